"""The sweep and table binaries end with one line and status 4 when their own TFF worker dies, like the runner."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from experiments import exit_statuses
from experiments import worker_exit_report
from tests import repository
from tests.experiments import train_runs
from tff_robust.runtime import execution_context


def test_a_dead_worker_becomes_one_line_with_the_resume_hint_and_status_4(monkeypatch, capsys):
  stopped = []
  monkeypatch.setattr(execution_context, 'stop_local_execution_context', lambda: stopped.append(True))

  @worker_exit_report.reports_worker_exit('Run it again.')
  def main(argv):
    raise execution_context.WorkerExited(f'the worker died under {argv[0]}')

  assert main(['sweep']) == exit_statuses.WORKER_EXITED
  assert capsys.readouterr().err == 'error: the worker died under sweep. Run it again.\n'
  assert stopped == [True]


def test_other_outcomes_pass_through_and_still_stop_the_worker(monkeypatch):
  stopped = []
  monkeypatch.setattr(execution_context, 'stop_local_execution_context', lambda: stopped.append(True))
  returns = worker_exit_report.reports_worker_exit('unused')(lambda argv: None)

  @worker_exit_report.reports_worker_exit('unused')
  def fails(argv):
    raise ValueError('not a worker death')

  assert returns(['x']) is None
  try:
    fails(['x'])
  except ValueError as error:
    assert str(error) == 'not a worker death'
  else:
    raise AssertionError('the ValueError was swallowed')
  assert stopped == [True, True]


@pytest.mark.slow
def test_a_sweep_whose_worker_is_killed_stops_with_one_line_and_resumes_from_the_checkpoint(tmp_path):
  command = [sys.executable, '-m', 'experiments.robustness_sweep', '--algorithms=fedavg', '--corruptions=omniscient',
             '--update_fractions=0', '--seeds=0', '--client_epochs_per_round=1', '--total_rounds=30',
             f'--root_output_dir={tmp_path}', '--experiment_name=s']
  process = subprocess.Popen(
      [*command, '--rounds_per_checkpoint=1'], cwd=repository.ROOT, stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
  )
  run_dir = tmp_path / 's' / 'runs' / 'fedavg_none_0_seed0'
  try:
    train_runs.wait_for_path(run_dir / 'checkpoints' / 'program_state' / 'round_2' / 'checkpoint_manifest.json',
                             process)
    worker = train_runs.worker_of(process.pid)
    os.kill(worker, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    group_emptied = train_runs.process_group_is_empty(process.pid)
  finally:
    train_runs.kill_process_group(process)
  assert group_emptied, 'a process of the sweep outlived it'
  assert process.returncode == exit_statuses.WORKER_EXITED, stderr[-3000:]
  assert 'Traceback' not in stderr, stderr[-3000:]
  match = re.fullmatch(
      rf'error: the local TFF worker_binary \(pid {worker}\) was killed by signal 9 \(SIGKILL\) during a computation; '
      r'its log: (.+)\. The same command resumes the sweep: finished runs are kept in results\.csv, the unfinished '
      r'one resumes from its newest checkpoint\.', stderr.splitlines()[-1])
  assert match, stderr[-3000:]
  shutil.rmtree(os.path.dirname(match[1]))  # the worker's private directory, kept for its log
  assert not (tmp_path / 's' / 'results.csv').exists()

  resumed = subprocess.run(  # fewer checkpoints: not a per-run setting, so the run is still the same
      [*command, '--rounds_per_checkpoint=100'], cwd=repository.ROOT, stdin=subprocess.DEVNULL, capture_output=True,
      text=True, timeout=600,
  )
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  rounds = re.findall(r'resumed from round (\d+) of 30', resumed.stdout + resumed.stderr)
  assert rounds and int(rounds[0]) >= 2, (resumed.stdout + resumed.stderr)[-3000:]
  with open(tmp_path / 's' / 'results.csv') as f:
    assert len(f.read().splitlines()) == 2  # the header and the resumed run's row
