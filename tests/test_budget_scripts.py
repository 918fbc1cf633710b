"""Issue 43's resume kits: `results/shakespeare_budget_sync.sh` keeps each unfinished run's newest checkpoint and
`results/shakespeare_budget_worktree.sh` puts it back into a worktree that lacks it.

The scripts run as copies in a scratch checkout, whose `.venv/bin/python` (the reports they rebuild) does nothing,
against a scratch worktree with one finished run, one unfinished run and one finished run that a lane is continuing
(its lock held), so that only the copying is tested.
"""

import fcntl
import os
import shutil
import subprocess

import pytest

from tests import repository

_SCRIPTS = ('shakespeare_budget_sync.sh', 'shakespeare_budget_worktree.sh', 'shakespeare_budget_checkpoints.sh')


def _write(path, text='x'):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as file:
    file.write(text)


def _run_with_checkpoints(run_dir, rounds, finished=False):
  for name in ('metrics.csv', 'run_settings.json'):
    _write(os.path.join(run_dir, name))
  for round_num in rounds:
    _write(os.path.join(run_dir, 'checkpoints', 'program_state', f'round_{round_num}', 'saved_model.pb'))
  if finished:
    _write(os.path.join(run_dir, 'summary.json'), '{"rounds": 80}')


def _rounds(run_dir):
  return sorted(os.listdir(os.path.join(run_dir, 'checkpoints', 'program_state')))


@pytest.fixture
def scratch(tmp_path):
  checkout, worktree = tmp_path / 'checkout', tmp_path / 'worktree'
  os.makedirs(checkout / 'results')
  for script in _SCRIPTS:
    shutil.copy(os.path.join(repository.ROOT, 'results', script), checkout / 'results' / script)
  _write(str(checkout / '.venv' / 'bin' / 'python'), '#!/bin/sh\nexit 0\n')
  os.chmod(checkout / '.venv' / 'bin' / 'python', 0o755)
  runs = worktree / 'results' / 'shakespeare_budget_rfa_fig2' / 'runs'
  _run_with_checkpoints(str(runs / 'finished'), [75, 80], finished=True)
  _run_with_checkpoints(str(runs / 'unfinished'), [5, 10, 15])  # round_5 sorts after round_15 as text
  _run_with_checkpoints(str(runs / 'continued'), [40, 45], finished=True)
  os.makedirs(runs / '.locks')
  with open(runs / '.locks' / 'continued', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # a lane is continuing it past its summary's rounds
    yield checkout, worktree, runs


def _bash(checkout, script, worktree, **environment):
  return subprocess.run(
      ['bash', str(checkout / 'results' / script), str(worktree)], capture_output=True, text=True, check=True,
      env={**os.environ, **environment},
  ).stdout


def test_sync_copies_finished_runs_without_checkpoints_and_keeps_each_unfinished_runs_newest(scratch):
  checkout, worktree, _ = scratch
  _bash(checkout, 'shakespeare_budget_sync.sh', worktree)
  table = checkout / 'results' / 'shakespeare_budget_rfa_fig2' / 'runs'
  assert sorted(os.listdir(table / 'finished')) == ['metrics.csv', 'run_settings.json', 'summary.json']
  assert not (table / 'continued').exists() and not (table / 'unfinished').exists()
  kits = checkout / 'results' / 'shakespeare_budget_inflight' / 'rfa_fig2'
  assert sorted(os.listdir(kits)) == ['continued', 'unfinished']
  assert _rounds(str(kits / 'unfinished')) == ['round_15']
  assert _rounds(str(kits / 'continued')) == ['round_45']


def test_worktree_puts_back_only_kits_newer_than_its_own_checkpoints(scratch):
  checkout, worktree, runs = scratch
  _bash(checkout, 'shakespeare_budget_sync.sh', worktree)
  shutil.rmtree(runs / 'unfinished' / 'checkpoints')  # the worktree lost this run's checkpoints
  output = _bash(checkout, 'shakespeare_budget_worktree.sh', worktree, START_LANES='0')
  assert output.splitlines() == ['put back rfa_fig2/unfinished at round 15']
  assert _rounds(str(runs / 'unfinished')) == ['round_15']
  assert _rounds(str(runs / 'continued')) == ['round_40', 'round_45']
  assert _bash(checkout, 'shakespeare_budget_worktree.sh', worktree, START_LANES='0') == ''  # idempotent
