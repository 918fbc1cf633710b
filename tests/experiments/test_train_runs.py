"""train_runs.train reruns a forked run that died by SIGSEGV once, from scratch, in a fresh interpreter; a
crashed resume is returned as it is (rerunning it would lose the first run's outputs)."""

import subprocess

from tests import fork_server
from tests.experiments import train_runs


def _crashing_fork(run_dir):
  def run(module, args, **kwargs):
    del module, args, kwargs
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / 'partial').write_text('')
    return subprocess.CompletedProcess([], -11, '', '')
  return run


def test_a_crashed_forked_run_is_rerun_fresh_from_an_empty_directory(tmp_path, monkeypatch):
  fresh_calls = []
  monkeypatch.setattr(fork_server, 'enabled', lambda: True)
  monkeypatch.setattr(fork_server, 'run', _crashing_fork(tmp_path / 'run'))

  def fresh(command, **kwargs):
    fresh_calls.append(command)
    assert not (tmp_path / 'run').exists()
    return subprocess.CompletedProcess(command, 0, '', '')

  monkeypatch.setattr(subprocess, 'run', fresh)
  assert train_runs.train(tmp_path, '--task=digits').returncode == 0
  assert len(fresh_calls) == 1 and fresh_calls[0][:3] == list(train_runs.TRAIN_COMMAND[:3])


def _no_rerun(*args, **kwargs):
  raise AssertionError(f'a crashed resume must not be rerun: {args} {kwargs}')


def test_a_crashed_resume_is_returned_as_it_is(tmp_path, monkeypatch):
  (tmp_path / 'run').mkdir()
  monkeypatch.setattr(fork_server, 'enabled', lambda: True)
  monkeypatch.setattr(fork_server, 'run', _crashing_fork(tmp_path / 'run'))
  monkeypatch.setattr(subprocess, 'run', _no_rerun)
  assert train_runs.train(tmp_path, '--task=digits').returncode == -11
  assert (tmp_path / 'run' / 'partial').exists()
