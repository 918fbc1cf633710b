"""A run whose own TFF worker dies mid-run stops at once with one line saying how and how to resume, leaving nothing."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from experiments import exit_statuses
from tests import repository
from tests.experiments import train_runs

_FLAGS = ('--task=digits', '--algorithm=fedavg', '--clients_per_round=5', '--total_rounds=200',
          '--rounds_per_checkpoint=1', '--rounds_per_eval=50')
_SECONDS_ALLOWED_TO_STOP = 60  # TFF alone retries the dead worker forever, backing off to 30 s between attempts


@pytest.mark.slow
def test_a_run_whose_worker_is_killed_stops_with_one_line_naming_the_signal_and_the_log(tmp_path):
  process = subprocess.Popen(
      [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', '--experiment_name=run', *_FLAGS],
      cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,  # a process group of its own: whatever the run started can be found and ended
  )
  try:
    checkpoint = tmp_path / 'run' / 'checkpoints' / 'program_state' / 'round_1'
    train_runs.wait_for_path(checkpoint / 'checkpoint_manifest.json', process)
    worker = train_runs.worker_of(process.pid)
    os.kill(worker, signal.SIGKILL)  # as the OOM killer would: the worker alone, mid-run
    killed_at = time.monotonic()
    try:
      _, stderr = process.communicate(timeout=_SECONDS_ALLOWED_TO_STOP)
    except subprocess.TimeoutExpired:
      stderr = None
    seconds_to_stop = time.monotonic() - killed_at
    group_emptied = stderr is not None and train_runs.process_group_is_empty(process.pid)
  finally:  # whatever failed, nothing of the run outlives the test
    train_runs.kill_process_group(process)
  assert stderr is not None, f'the run still ran {_SECONDS_ALLOWED_TO_STOP} s after its worker was killed'
  assert group_emptied, 'a process of the run outlived it'
  assert process.returncode == exit_statuses.WORKER_EXITED, stderr[-3000:]
  assert 'Traceback' not in stderr, stderr[-3000:]
  last_line = stderr.splitlines()[-1]
  match = re.fullmatch(
      rf'error: the local TFF worker_binary \(pid {worker}\) was killed by signal 9 \(SIGKILL\) '
      r'during a computation; its log: (.+)\. The same command resumes the run from its newest checkpoint, if it '
      r'has one\.', last_line)
  assert match, stderr[-3000:]
  assert os.path.isfile(match[1])
  shutil.rmtree(os.path.dirname(match[1]))  # the worker's private directory, kept for its log
  print(f'stopped {seconds_to_stop:.1f} s after the worker was killed')
