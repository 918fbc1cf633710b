"""Runs `python -m experiments.train` in a process of its own, as a user does, and reads back what it wrote; or,
for the tests that read only a run's exit status and files, in the test's own process (`train_here`).

Runs are forked from the test session's fork server (`tests/fork_server.py`), which has imported TensorFlow once;
`fresh_interpreter=True` or $TFF_ROBUST_TEST_FORK_SERVER=0 starts a fresh interpreter instead. A forked run
killed by SIGSEGV that was not resuming is run once more, from an empty output directory, in a fresh interpreter:
a child forked from a multi-threaded process can crash on a lock another thread held at the fork (seen once,
2026-11-27: a forked runner died in libpython before its first round; 9 reruns passed), while a crash of the
runner itself recurs there too.
"""

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from unittest import mock

import numpy as np

from tests import fork_server
from tests import repository
from tests.simulation import proc_files

TRAIN_COMMAND = (sys.executable, '-m', 'experiments.train', '--noprogress_bar')


def train(tmp_path, *flags, timeout=600, name='run', fresh_interpreter=False):
  """The finished `subprocess.CompletedProcess` of one run writing to `tmp_path/name`.

  `fresh_interpreter`: start a new Python, as `TRAIN_COMMAND` does, instead of forking the fork server's (which
  has imported TensorFlow already); for tests of what happens before or during imports.
  """
  args = [*TRAIN_COMMAND[3:], f'--root_output_dir={tmp_path}', f'--experiment_name={name}', *flags]
  if not fresh_interpreter and fork_server.enabled():
    run_dir = os.path.join(tmp_path, name)
    resumes = os.path.exists(run_dir)  # a crashed resume is not rerun: its first run's outputs are gone then
    result = fork_server.run(TRAIN_COMMAND[2], args, cwd=repository.ROOT, env=os.environ, timeout=timeout)
    if result.returncode != -signal.SIGSEGV or resumes:
      return result
    shutil.rmtree(run_dir, ignore_errors=True)  # the rerun starts over, as the forked run did
  return subprocess.run(
      [*TRAIN_COMMAND[:3], *args], cwd=repository.ROOT, capture_output=True, text=True, timeout=timeout,
      stdin=subprocess.DEVNULL,
  )


def train_here(tmp_path, *flags, name='run') -> subprocess.CompletedProcess:
  """`train`'s run in this process, on the session's TFF worker: `experiments.train.main` on the parsed flags.

  Its `returncode` is the exit status `main` returns, or `REFUSED` with the refusal in `stderr`; `stdout` is what the
  run printed there (its headline); `stderr` holds nothing else (logging and TensorFlow's C++ lines go to the test
  process's own stderr). For tests of what a run computes, writes and prints on stdout (test_train's, the flagfiles'
  smoke runs), not of its stderr or of its process: a forked run pays again for
  the tracing, AutoGraph conversions and Keras set-up that this process has cached (a 2-round digits run took 17 s
  here against 25 s forked, 2026-11-28, NOTES.md). The runner's local worker is the session's (tests/conftest.py,
  without Grappler), so results equal a forked run's to float rounding, not bit for bit.
  """
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from experiments import exit_statuses  # pylint: disable=g-import-not-at-top
  from experiments import train  # pylint: disable=g-import-not-at-top
  from experiments import train_flags  # pylint: disable=g-import-not-at-top
  from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top

  args = [*TRAIN_COMMAND[3:], f'--root_output_dir={tmp_path}', f'--experiment_name={name}', *flags]
  stdout = io.StringIO()
  absl_flags.FLAGS.unparse_flags()
  try:
    absl_flags.FLAGS(['train', *args])
    with mock.patch.object(execution_context, 'set_local_execution_context', lambda **kwargs: None), \
        mock.patch.object(execution_context, 'stop_local_execution_context', lambda: None), \
        contextlib.redirect_stdout(stdout):
      status, stderr = train.main(['train']), ''
  except train_flags.Refusal as refusal:
    status, stderr = exit_statuses.REFUSED, f'error: {refusal}'
  finally:
    absl_flags.FLAGS.unparse_flags()
  return subprocess.CompletedProcess(args, status, stdout.getvalue(), stderr)


def outputs(tmp_path, name='run'):
  """(summary.json as a dict, metrics.csv as a list of row dicts) of run `name`."""
  with open(tmp_path / name / 'summary.json') as f:
    summary = json.load(f)
  with open(tmp_path / name / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  return summary, rows


def model_weights(tmp_path, name='run'):
  """The final model of run `name` as a list of arrays, in `model_weights.npz` order."""
  with np.load(tmp_path / name / 'model_weights.npz') as arrays:
    return [arrays[key] for key in arrays.files]


def wait_for_path(path, process, timeout=600):
  """Polls until `path` exists; fails if `process` ends first or `timeout` seconds pass."""
  deadline = time.monotonic() + timeout
  while not os.path.exists(path):
    assert process.poll() is None, f'the run ended before {path} existed'
    assert time.monotonic() < deadline, f'no {path} after {timeout}s'
    time.sleep(0.05)


def worker_of(pid: int) -> int:
  """The process id of the `worker_binary` that process `pid` started (from /proc: never by name, other runs share
  it)."""
  workers = [child for child in proc_files.descendants(pid) if proc_files.command_name(child) == 'worker_binary']
  assert len(workers) == 1, workers
  return workers[0]


def _live_processes_of_group(group: int) -> list[int]:
  """Process ids of the processes of process group `group` that are not zombies (from /proc)."""
  found = []
  for entry in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{entry}/stat') as f:
        state, _, process_group = f.read().rsplit(')', 1)[1].split()[:3]
    except OSError:  # the process has gone
      continue
    if int(process_group) == group and state != 'Z':
      found.append(int(entry))
  return found


def kill_process_group(process) -> None:
  """SIGKILLs what is left of `process`'s group (started with `start_new_session`) and reaps `process`."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait()


def process_group_is_empty(group: int, timeout=30) -> bool:
  """Whether every process of process group `group` (a run started with `start_new_session`) ends within `timeout`."""
  deadline = time.monotonic() + timeout
  while _live_processes_of_group(group):
    if time.monotonic() > deadline:
      return False
    time.sleep(0.1)
  return True
