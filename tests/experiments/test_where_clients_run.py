"""Where clients run, as the runner and `worker_service` tell it on this machine's TFF worker (the PyPI wheel's, built
without CUDA), and a worker binary of the user's own started instead of TFF's.

The runner's `--gpus=auto` line is checked by `test_train.py::test_the_runner_says_once_that_clients_run_on_the_cpu_
cores_of_a_worker_without_cuda`, on a run it makes anyway.
"""

import os
import subprocess
import sys
import time

import pytest

from experiments import exit_statuses
from tests import repository
from tests.experiments import train_runs
from tests.runtime import worker_services
from tff_robust.runtime import worker_binaries

_TFF_BINARY = worker_binaries.tff_wheel_binary()
_SERVICE_MODULE = 'tff_robust.runtime.worker_service'


@pytest.fixture(autouse=True)
def pypi_worker_only():
  """These tests are about TFF's PyPI worker: they mean nothing on a machine whose TFF worker has CUDA."""
  if worker_binaries.gpu_support(_TFF_BINARY) is not worker_binaries.GpuSupport.NONE:
    pytest.skip(f'{_TFF_BINARY} is not a build without CUDA')


@pytest.fixture
def stand_in(tmp_path):
  """(a worker binary of 'the user's own', where it records each start) : a script that appends its pid, its
  network namespace and its arguments to the record, then becomes TFF's binary (same pid)."""
  record = tmp_path / 'stand_in_started'
  script = tmp_path / 'my_worker'
  script.write_text(
      '#!/bin/sh\n'
      f'echo "$$ $(readlink /proc/$$/ns/net) $*" >> {record}\n'
      f'exec {_TFF_BINARY} "$@"\n'
  )
  script.chmod(0o755)
  return str(script), record


def _one_line_refusal(result, *fragments):
  assert result.returncode == exit_statuses.REFUSED, result.stderr[-3000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith('error: ') and all(fragment in lines[0] for fragment in fragments), lines[0]
  return lines[0]


def _command(module, *args, env=None):
  return subprocess.run([sys.executable, '-m', module, *args], cwd=repository.ROOT, capture_output=True, text=True,
                        timeout=120, stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize('gpus', ['0', '0,1'])
def test_the_runner_refuses_gpu_indices_in_one_line_before_loading_tensorflow(tmp_path, gpus):
  result = train_runs.train(tmp_path, f'--gpus={gpus}', fresh_interpreter=True)
  line = _one_line_refusal(result, f'--gpus={gpus}: ', 'built without CUDA', '--worker_binary')
  assert f'CPU, {len(os.sched_getaffinity(0))} cores' in line
  assert not (tmp_path / 'run').exists()


def test_the_runner_refuses_a_bad_worker_binary_in_one_line_naming_where_it_came_from(tmp_path):
  missing = tmp_path / 'no_such_worker'
  _one_line_refusal(train_runs.train(tmp_path, f'--worker_binary={missing}', fresh_interpreter=True),
                    '--worker_binary', 'executable file')
  environment = {**os.environ, worker_binaries.ENVIRONMENT_VARIABLE: str(missing)}
  result = _command(*train_runs.TRAIN_COMMAND[2:], f'--root_output_dir={tmp_path}', env=environment)
  _one_line_refusal(result, f'${worker_binaries.ENVIRONMENT_VARIABLE}={missing} does not exist')


def test_the_runner_starts_the_worker_binary_it_is_given_through_the_isolating_launcher(tmp_path, stand_in,
                                                                                        tff_worker):
  script, record = stand_in
  result = train_runs.train(tmp_path, '--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=1',
                            f'--worker_binary={script}')
  assert result.returncode == 0, result.stderr[-3000:]
  (start,) = record.read_text().splitlines()
  _, namespace, *arguments = start.split()
  # The runner's default concurrency limit, one client computation per core, reaches the worker.
  assert arguments[0].startswith('--port=')
  assert arguments[1] == f'--max_concurrent_computation_calls={len(os.sched_getaffinity(0))}'
  if tff_worker.network_isolated:  # where this machine isolates workers, the stand-in was isolated too
    assert namespace != os.readlink('/proc/self/ns/net')


def test_worker_service_refuses_gpu_indices_and_a_bad_binary_in_one_line():
  _one_line_refusal(_command(_SERVICE_MODULE, '--gpus=0'), '--gpus=0: ', 'built without CUDA')
  _one_line_refusal(_command(_SERVICE_MODULE, '--worker_binary=/no/such/worker'),
                    '--worker_binary=/no/such/worker does not exist')
  _one_line_refusal(_command(_SERVICE_MODULE, '--port=0'), '--port=0')


def test_worker_service_says_in_one_line_that_clients_run_on_the_cpu_cores(tmp_path):
  service = worker_services.Service(tmp_path / 'service.log', '--gpus=auto').wait_until_serving()
  try:
    lines = service.lines('--gpus')
  finally:
    service.stop()
  assert len(lines) == 1, lines
  assert 'built without CUDA' in lines[0]
  assert f'runs on the CPU ({len(os.sched_getaffinity(0))} cores)' in lines[0]


def test_worker_service_starts_the_worker_binary_it_is_given_in_a_network_namespace_of_its_own(tmp_path, stand_in):
  script, record = stand_in
  service = worker_services.Service(tmp_path / 'service.log', f'--worker_binary={script}').wait_until_serving()
  try:
    deadline = time.monotonic() + 60
    while not (record.exists() and record.read_text().endswith('\n')):
      assert time.monotonic() < deadline, 'the stand-in was never started'
      time.sleep(0.05)
    pid, namespace, *arguments = record.read_text().split()
    worker = service.worker_pid()
  finally:
    service.stop()
  assert int(pid) == worker  # the launcher replaced itself with the stand-in
  assert namespace != os.readlink('/proc/self/ns/net')
  assert arguments == [f'--port={service.port}', f'--max_concurrent_computation_calls={len(os.sched_getaffinity(0))}']
