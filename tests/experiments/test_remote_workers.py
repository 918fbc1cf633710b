"""`experiments.train` on TFF executor services started with `tff_robust.runtime.worker_service`."""

import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from experiments import exit_statuses
from tests import repository
from tests.experiments import train_runs
from tests.runtime import worker_services

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
  """Starts worker services with their defaults (127.0.0.1) and `flags`; yields a function making n of them and
  returning their addresses (the `worker_services.Service`s in its `started`); stops them all."""
  started = []

  def start(count, *flags):
    services = [worker_services.Service(tmp_path / f'worker_service_{len(started) + i}.log', *flags)
                for i in range(count)]
    started.extend(service.wait_until_serving() for service in services)
    return ','.join(f'localhost:{service.port}' for service in services)

  start.started = started
  yield start
  for service in started:
    if service.process.poll() is None:
      service.stop()
    assert not _pid_alive(service.process.pid), 'a worker_service outlived the test'
    # Each service said, in one line, where it serves: this host's loopback, the worker in a namespace of its own.
    (serving,) = service.lines(worker_services.SERVING)
    assert f'on 127.0.0.1:{service.port} ' in serving and 'private network namespace' in serving, serving


def _final_model(tmp_path, name, *flags):
  result = train_runs.train(tmp_path, *_FLAGS, *flags, name=name)
  assert result.returncode == 0, result.stderr[-3000:]
  return train_runs.model_weights(tmp_path, name), train_runs.outputs(tmp_path, name)[0]


@pytest.fixture(scope='module')
def local_run(tmp_path_factory):
  """The final model and summary of `_FLAGS` with `--algorithm=algorithm` on the run's own local worker: one run
  per algorithm for the module (three tests compare RFA's remote runs with the same local run)."""
  runs = {}

  def run(algorithm):
    if algorithm not in runs:
      runs[algorithm] = _final_model(tmp_path_factory.mktemp('local'), 'local', f'--algorithm={algorithm}')
    return runs[algorithm]

  return run


def _assert_same_run(remote, local):
  remote_weights, remote_summary = remote
  local_weights, local_summary = local
  assert len(remote_weights) == len(local_weights)
  for remote_array, local_array in zip(remote_weights, local_weights):
    np.testing.assert_allclose(remote_array, local_array, rtol=1e-5, atol=1e-6)
  assert remote_summary['eval/accuracy'] == pytest.approx(local_summary['eval/accuracy'], abs=1e-6)
  assert remote_summary['secure_average_calls'] == local_summary['secure_average_calls']


@pytest.mark.slow
def test_rfa_on_a_loopback_worker_trains_the_same_model_as_locally(tmp_path, loopback_workers, local_run):
  address = loopback_workers(1)
  remote = _final_model(tmp_path, 'remote', '--algorithm=rfa', f'--tff_worker_address={address}')
  _assert_same_run(remote, local_run('rfa'))


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['fedavg', 'rfa'])
def test_a_run_over_two_workers_trains_the_same_model_as_locally(tmp_path, loopback_workers, local_run, algorithm):
  addresses = loopback_workers(2)
  sharded = _final_model(tmp_path, 'sharded', f'--algorithm={algorithm}', f'--tff_worker_address={addresses}')
  _assert_same_run(sharded, local_run(algorithm))


@pytest.mark.slow
def test_a_run_whose_remote_worker_stops_mid_run_ends_with_one_line_naming_it(tmp_path, loopback_workers):
  address = loopback_workers(1)
  process = subprocess.Popen(
      [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', '--experiment_name=run', *_FLAGS[:1],
       '--algorithm=rfa', '--clients_per_round=4', '--total_rounds=500', '--rounds_per_checkpoint=1',
       '--rounds_per_eval=500', f'--tff_worker_address={address}'],
      cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,
  )
  try:
    checkpoint = tmp_path / 'run' / 'checkpoints' / 'program_state' / 'round_1'
    train_runs.wait_for_path(checkpoint / 'checkpoint_manifest.json', process)
    (service,) = loopback_workers.started
    service.process.send_signal(signal.SIGTERM)  # the service stops its worker: the address stops answering mid-run
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


@pytest.fixture(scope='module')
def certificates(tmp_path_factory):
  """{'ours': a test cluster's certificates (localhost), 'theirs': another cluster's}."""
  root = tmp_path_factory.mktemp('certificates')
  return {name: worker_services.make_certificates(root / name, 'localhost') for name in ('ours', 'theirs')}


def _one_line_refusal(result, *fragments):
  assert result.returncode == exit_statuses.REFUSED, result.stderr[-3000:]
  (line,) = result.stderr.splitlines()
  assert line.startswith('error: ') and all(fragment in line for fragment in fragments), line


def test_worker_credentials_that_cannot_serve_are_refused_in_one_line_before_tensorflow(tmp_path, certificates):
  driver = f'{certificates["ours"]}/driver'
  _one_line_refusal(train_runs.train(tmp_path, f'--tff_worker_credentials={driver}', fresh_interpreter=True),
                    '--tff_worker_credentials', '--tff_worker_address')
  mismatched = tmp_path / 'driver'
  shutil.copytree(driver, mismatched)
  shutil.copy(f'{certificates["theirs"]}/driver/client.key', mismatched / 'client.key')
  for credentials, fragment in ((tmp_path / 'missing', 'not a directory'),
                                (mismatched, 'client.key does not match')):
    result = train_runs.train(tmp_path, '--tff_worker_address=localhost:1', f'--tff_worker_credentials={credentials}',
                              fresh_interpreter=True)
    _one_line_refusal(result, f'--tff_worker_credentials={credentials}', fragment)
  assert not (tmp_path / 'run').exists()


@pytest.mark.slow
def test_rfa_over_two_tls_workers_trains_the_same_model_as_locally(tmp_path, loopback_workers, certificates,
                                                                    local_run):
  addresses = loopback_workers(2, *worker_services.tls_flags(certificates['ours']))
  remote = _final_model(tmp_path, 'tls', '--algorithm=rfa', f'--tff_worker_address={addresses}',
                        f'--tff_worker_credentials={certificates["ours"]}/driver')
  _assert_same_run(remote, local_run('rfa'))
  for service in loopback_workers.started:
    assert service.lines('accepted a connection') and not service.lines('refused a connection')


@pytest.mark.slow
def test_the_runner_refuses_a_worker_whose_certificate_does_not_verify_in_one_line(tmp_path, loopback_workers,
                                                                                   certificates):
  address = loopback_workers(1, *worker_services.tls_flags(certificates['theirs']))
  # A fresh interpreter, as a user's: the runner quiets gRPC's own log of the failed handshake before importing gRPC.
  result = train_runs.train(tmp_path, *_FLAGS, f'--tff_worker_address={address}',
                            f'--tff_worker_credentials={certificates["ours"]}/driver', fresh_interpreter=True)
  assert result.returncode == exit_statuses.REFUSED, result.stderr[-3000:]
  # The tests' TF_CPP_MIN_LOG_LEVEL=2 lets TensorFlow's three import errors through (the runner's default, 3, does not).
  lines = [line for line in result.stderr.splitlines() if 'Unable to register' not in line]
  assert len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith(f'error: --tff_worker_credentials={certificates["ours"]}/driver: the TFF worker at '
                             f'{address} failed this driver\'s TLS check') and 'CERTIFICATE_VERIFY_FAILED' in lines[0]
