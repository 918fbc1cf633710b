"""`experiments.train` on TFF executor services started with `tff_robust.runtime.worker_service`."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest

from experiments import exit_statuses
from tests.experiments import train_runs

_FLAGS = ('--task=digits', '--total_rounds=2', '--rounds_per_eval=2', '--clients_per_round=4')


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  with open(f'/proc/{pid}/stat') as stat:
    return stat.read().split()[2] != 'Z'


@pytest.fixture
def loopback_workers(tmp_path):
  """Starts worker services on loopback ports; yields a function making n of them (their (process, port) pairs
  in its `started`); stops them all."""
  started = []

  def start(count):
    addresses = []
    for _ in range(count):
      port = portpicker.pick_unused_port()
      with open(tmp_path / f'worker_service_{port}.log', 'w') as log:
        process = subprocess.Popen(
            [sys.executable, '-m', 'tff_robust.runtime.worker_service', f'--port={port}', '--gpus=none'],
            cwd=train_runs.REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )
      started.append((process, port))
      addresses.append(f'localhost:{port}')
    return ','.join(addresses)

  start.started = started
  yield start
  for process, port in started:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    assert not _pid_alive(process.pid), 'a worker_binary outlived the test'
    # Each service said, in one line, that it is unauthenticated and reachable on every interface.
    warnings = [line for line in (tmp_path / f'worker_service_{port}.log').read_text().splitlines()
                if 'unauthenticated' in line]
    assert len(warnings) == 1 and f'every network interface (port {port})' in warnings[0], warnings


def _final_model(tmp_path, name, *flags):
  result = train_runs.train(tmp_path, *_FLAGS, *flags, name=name)
  assert result.returncode == 0, result.stderr[-3000:]
  return train_runs.model_weights(tmp_path, name), train_runs.outputs(tmp_path, name)[0]


def _assert_same_run(remote, local):
  remote_weights, remote_summary = remote
  local_weights, local_summary = local
  assert len(remote_weights) == len(local_weights)
  for remote_array, local_array in zip(remote_weights, local_weights):
    np.testing.assert_allclose(remote_array, local_array, rtol=1e-5, atol=1e-6)
  assert remote_summary['eval/accuracy'] == pytest.approx(local_summary['eval/accuracy'], abs=1e-6)
  assert remote_summary['secure_average_calls'] == local_summary['secure_average_calls']


@pytest.mark.slow
def test_rfa_on_a_loopback_worker_trains_the_same_model_as_locally(tmp_path, loopback_workers):
  address = loopback_workers(1)
  remote = _final_model(tmp_path, 'remote', '--algorithm=rfa', f'--tff_worker_address={address}')
  local = _final_model(tmp_path, 'local', '--algorithm=rfa')
  _assert_same_run(remote, local)


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['fedavg', 'rfa'])
def test_a_run_over_two_workers_trains_the_same_model_as_locally(tmp_path, loopback_workers, algorithm):
  addresses = loopback_workers(2)
  sharded = _final_model(tmp_path, 'sharded', f'--algorithm={algorithm}', f'--tff_worker_address={addresses}')
  local = _final_model(tmp_path, 'local', f'--algorithm={algorithm}')
  _assert_same_run(sharded, local)


@pytest.mark.slow
def test_a_run_whose_remote_worker_stops_mid_run_ends_with_one_line_naming_it(tmp_path, loopback_workers):
  address = loopback_workers(1)
  process = subprocess.Popen(
      [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', '--experiment_name=run', *_FLAGS[:1],
       '--algorithm=rfa', '--clients_per_round=4', '--total_rounds=500', '--rounds_per_checkpoint=1',
       '--rounds_per_eval=500', f'--tff_worker_address={address}'],
      cwd=train_runs.REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,
  )
  try:
    checkpoint = tmp_path / 'run' / 'checkpoints' / 'program_state' / 'round_1'
    train_runs.wait_for_path(checkpoint / 'checkpoint_manifest.json', process)
    (service, _), = loopback_workers.started
    service.send_signal(signal.SIGTERM)  # the service stops its worker: the address stops answering mid-run
    stopped_at = time.monotonic()
    try:
      _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
      stderr = None
    seconds_to_stop = time.monotonic() - stopped_at
  finally:
    train_runs.kill_process_group(process)
  assert stderr is not None, 'the run still ran 60 s after its remote worker stopped'
  assert process.returncode == exit_statuses.WORKER_EXITED, stderr[-3000:]
  assert 'Traceback' not in stderr, stderr[-3000:]
  assert re.fullmatch(
      rf'error: the TFF worker at {address} became unreachable during a computation .*\. The same command resumes '
      r'the run from its newest checkpoint, if it has one\.', stderr.splitlines()[-1]), stderr[-3000:]
  print(f'stopped {seconds_to_stop:.1f} s after the remote worker did')
