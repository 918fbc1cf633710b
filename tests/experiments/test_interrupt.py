"""Ctrl-C stops a run with one line saying where it resumes from, and the worker with it; the same command resumes."""

import os
import re
import signal
import subprocess
import sys

import pytest

from tests import repository
from tests.experiments import test_train_flags
from tests.experiments import train_runs

_FLAGS = ('--task=digits', '--algorithm=rfa', '--clients_per_round=5', '--rounds_per_checkpoint=1',
          '--rounds_per_eval=50')
_INTERRUPT_AFTER_CHECKPOINT = 2


def _start_as_foreground_job(command, **options) -> subprocess.Popen:
  """Starts `command` as a terminal starts a foreground job: in a process group of its own, SIGINT not ignored.

  A process inherits an ignored SIGINT, and Python then never raises KeyboardInterrupt: a test session started
  with `&` by a non-interactive shell ignores SIGINT, and a run it started the plain way ignored this test's Ctrl-C
  and finished all its rounds (NOTES.md, "Environment facts").
  """
  return subprocess.Popen(
      command, start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **options
  )


def test_a_run_started_as_a_foreground_job_takes_ctrl_c_even_where_the_test_session_ignores_it():
  ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a session started with `&` by a script
  try:
    child = _start_as_foreground_job(
        [sys.executable, '-c', 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'],
        stdout=subprocess.PIPE, text=True,
    )
    stdout, _ = child.communicate(timeout=60)
  finally:
    signal.signal(signal.SIGINT, ignored)
  assert stdout.strip() == 'True'


@pytest.mark.slow
def test_ctrl_c_ends_with_one_line_saying_where_the_run_resumes_from(tmp_path):
  process = _start_as_foreground_job(
      [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', '--experiment_name=run', '--total_rounds=200',
       *_FLAGS],
      cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=test_train_flags.user_environment(),
  )
  try:
    checkpoint = tmp_path / 'run' / 'checkpoints' / 'program_state' / f'round_{_INTERRUPT_AFTER_CHECKPOINT}'
    train_runs.wait_for_path(checkpoint / 'checkpoint_manifest.json', process)
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the run's whole process group, worker included
    _, stderr = process.communicate(timeout=120)
    group_emptied = train_runs.process_group_is_empty(process.pid)
  finally:  # whatever failed, nothing of the run outlives the test
    train_runs.kill_process_group(process)
  assert group_emptied, 'a process of the run (the TFF worker?) outlived it'
  assert process.returncode == 130, stderr[-3000:]
  assert 'Traceback' not in stderr and 'KeyboardInterrupt' not in stderr, stderr[-3000:]
  last_line = stderr.splitlines()[-1]
  match = re.fullmatch(r'Interrupted in round (\d+) of 200: the same command resumes it from round (\d+) '
                       r'\(checkpoint in (.+)\)\.', last_line)
  assert match, stderr[-3000:]
  interrupted, resumable = int(match[1]), int(match[2])
  assert _INTERRUPT_AFTER_CHECKPOINT <= resumable < interrupted
  assert match[3] == str(tmp_path / 'run' / 'checkpoints')

  resumed = train_runs.train(tmp_path, f'--total_rounds={resumable + 1}', *_FLAGS)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f'resumed from round {resumable} of {resumable + 1}' in resumed.stdout
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['rounds'] == resumable + 1 and [int(row['round']) for row in rows] == list(range(1, resumable + 2))
