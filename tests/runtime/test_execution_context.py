"""The TFF worker started by tff_robust never outlives the process that started it."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.runtime import execution_context


def _process_exists(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  with open(f'/proc/{pid}/stat') as stat:  # a zombie has exited but is not reaped yet
    return stat.read().split()[2] != 'Z'


def _wait_until_gone(pid, timeout=20.0):
  deadline = time.monotonic() + timeout
  while _process_exists(pid) and time.monotonic() < deadline:
    time.sleep(0.1)
  return not _process_exists(pid)


def test_context_runs_federated_computations(tff_worker):
  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def mean(values):
    return tff.federated_mean(values)

  assert tff_worker.is_running()
  assert mean([1.0, 2.0, 6.0]) == 3.0


def test_the_worker_runs_one_client_computation_per_core_unless_told_otherwise(tff_worker):
  with open(f'/proc/{tff_worker.pid}/cmdline') as cmdline:
    arguments = cmdline.read().split('\0')
  assert f'--max_concurrent_computation_calls={len(os.sched_getaffinity(0))}' in arguments


def test_secure_sum_runs_in_simulation():
  @tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
  def secure_total(values):
    return tff.federated_secure_sum_bitwidth(values, 8)

  assert secure_total([1, 2, 3]) == 6


def test_a_stopped_worker_is_gone_and_a_new_one_starts():
  worker = execution_context.LocalWorker()
  pid = worker.pid
  assert worker.is_running()
  worker.stop()
  worker.stop()  # idempotent
  assert _wait_until_gone(pid)


def _spawn(script):
  return subprocess.Popen(
      [sys.executable, '-c', script],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
  )


_START_AND_REPORT = textwrap.dedent('''
    from tests.simulation import proc_files
    from tff_robust.runtime import execution_context
    worker = execution_context.set_local_execution_context()
    helpers = proc_files.descendants(worker.pid)  # the relay when isolated: it must not outlive the worker
    assert len(helpers) == worker.network_isolated, helpers
    print(worker.pid, worker.log_path, *helpers, flush=True)
''')


def _started_worker(child):
  """(pid of the worker_binary, pids of its helpers (the relay when isolated), its log) reported by `child`."""
  pid, log_path, *helpers = child.stdout.readline().split()
  return int(pid), [int(helper) for helper in helpers], log_path


def test_worker_is_stopped_when_the_program_exits_without_stopping_it():
  child = _spawn(_START_AND_REPORT)
  worker_pid, helper_pids, log_path = _started_worker(child)
  # The pipe closes only when every holder (the worker included) is gone: this is what hung CI.
  child.communicate(timeout=60)
  assert child.returncode == 0
  assert all(_wait_until_gone(pid) for pid in [worker_pid, *helper_pids])
  assert not os.path.exists(os.path.dirname(log_path))  # a clean exit leaves no file behind


def test_worker_dies_with_a_killed_parent():
  child = _spawn(_START_AND_REPORT + 'import time; time.sleep(600)\n')
  worker_pid, helper_pids, log_path = _started_worker(child)
  assert _process_exists(worker_pid)
  child.send_signal(signal.SIGKILL)  # no atexit handler runs
  child.wait(timeout=30)
  assert all(_wait_until_gone(pid) for pid in [worker_pid, *helper_pids])
  shutil.rmtree(os.path.dirname(log_path))


def test_a_cleanly_stopped_worker_removes_its_socket_and_log():
  worker = execution_context.LocalWorker()
  private_dir = os.path.dirname(worker.log_path)
  assert os.path.isdir(private_dir)
  worker.stop()
  assert not os.path.exists(private_dir)


def test_a_worker_that_died_keeps_its_log_and_says_where(tmp_path):
  worker = execution_context.LocalWorker(log_dir=str(tmp_path / 'run'))
  os.kill(worker.pid, signal.SIGKILL)
  assert _wait_until_gone(worker.pid)
  expected = f'was killed by signal 9 \\(SIGKILL\\); its log \\({tmp_path}/run/tff_worker.log\\)'
  with pytest.raises(RuntimeError, match=expected):
    worker.check_running()
  worker.stop()
  assert (tmp_path / 'run' / 'tff_worker.log').exists()
  private = execution_context.LocalWorker()
  os.kill(private.pid, signal.SIGKILL)
  assert _wait_until_gone(private.pid)
  private.stop()
  assert os.path.exists(private.log_path)  # kept: the worker did not stop cleanly
  shutil.rmtree(os.path.dirname(private.log_path))


_KILL_WORKER_BETWEEN_COMPUTATIONS = textwrap.dedent('''
    import os, signal, time
    import numpy as np
    import tensorflow_federated as tff
    from tff_robust.runtime import execution_context
    worker = execution_context.set_local_execution_context()
    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def mean(values):
      return tff.federated_mean(values)
    assert mean([1.0, 3.0]) == 2.0
    os.kill(worker.pid, signal.SIGKILL)
    started = time.monotonic()
    try:
      mean([1.0, 3.0])
    except execution_context.WorkerExited as error:
      print(worker.pid, time.monotonic() - started, error, flush=True)
''')


def test_a_computation_on_a_worker_that_died_raises_worker_exited_at_once_instead_of_retrying():
  child = _spawn(_KILL_WORKER_BETWEEN_COMPUTATIONS)
  try:
    stdout, _ = child.communicate(timeout=60)
  finally:
    child.kill()
    child.wait()
  assert stdout, 'the computation on the dead worker did not raise WorkerExited'
  pid, seconds, message = stdout.split(' ', 2)
  assert float(seconds) < 5.0
  log_path = message.strip().rpartition('its log: ')[2]
  assert message.strip() == (f'the local TFF worker_binary (pid {pid}) was killed by signal 9 (SIGKILL) during a '
                             f'computation; its log: {log_path}')
  assert os.path.isfile(log_path)
  shutil.rmtree(os.path.dirname(log_path))
