"""`run_settings`: a directory's recorded settings admit the same settings only; it imports no TensorFlow."""

import os
import subprocess
import sys

import pytest

from tff_robust.simulation import run_settings

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SETTINGS = {'algorithm': 'rfa', 'client_learning_rate': 0.1, 'clients_per_round': None, 'tff_worker': ['a', 'b']}


def test_the_recorded_settings_admit_the_same_settings_only(tmp_path):
  run_settings.check_same_run(str(tmp_path / 'run'), _SETTINGS)  # no directory: no run
  run_settings.record(str(tmp_path / 'run'), _SETTINGS)
  run_settings.check_same_run(str(tmp_path / 'run'), dict(_SETTINGS))
  changed = {**_SETTINGS, 'client_learning_rate': 0.2, 'clients_per_round': 10}
  with pytest.raises(run_settings.SettingsMismatch,
                     match=r'--client_learning_rate was 0.1, now 0.2; --clients_per_round was null, now 10\)$'):
    run_settings.check_same_run(str(tmp_path / 'run'), changed)
  with pytest.raises(run_settings.SettingsMismatch, match='--seed was absent, now 1'):
    run_settings.check_same_run(str(tmp_path / 'run'), {**_SETTINGS, 'seed': 1})
  with pytest.raises(run_settings.SettingsMismatch, match='--algorithm was "rfa", now absent'):
    run_settings.check_same_run(str(tmp_path / 'run'), {k: v for k, v in _SETTINGS.items() if k != 'algorithm'})


def test_a_flag_added_after_the_record_is_admitted_at_its_default_only(tmp_path):
  run_settings.record(str(tmp_path / 'run'), _SETTINGS)
  defaults = {'algorithm': 'fedavg', 'bucket_size': 2}
  run_settings.check_same_run(str(tmp_path / 'run'), {**_SETTINGS, 'bucket_size': 2}, defaults)
  with pytest.raises(run_settings.SettingsMismatch, match=r'\(--bucket_size was absent, now 3\)$'):
    run_settings.check_same_run(str(tmp_path / 'run'), {**_SETTINGS, 'bucket_size': 3}, defaults)
  with pytest.raises(run_settings.SettingsMismatch, match=r'\(--algorithm was "rfa", now "fedavg"\)$'):
    run_settings.check_same_run(str(tmp_path / 'run'), {**_SETTINGS, 'algorithm': 'fedavg'}, defaults)


def test_checkpoints_without_recorded_settings_and_an_unreadable_record_are_refused(tmp_path):
  (tmp_path / 'old_run' / 'checkpoints').mkdir(parents=True)
  with pytest.raises(run_settings.SettingsMismatch, match='checkpoints of a run whose settings were not recorded'):
    run_settings.check_same_run(str(tmp_path / 'old_run'), _SETTINGS)
  (tmp_path / 'damaged').mkdir()
  (tmp_path / 'damaged' / run_settings.FILENAME).write_text('{"algorithm": ')
  with pytest.raises(run_settings.SettingsMismatch, match='cannot be read'):
    run_settings.check_same_run(str(tmp_path / 'damaged'), _SETTINGS)


def test_the_module_imports_no_tensorflow():
  code = 'import sys; from tff_robust.simulation import run_settings; print("tensorflow" in sys.modules)'
  result = subprocess.run([sys.executable, '-c', code], cwd=_REPO, capture_output=True, text=True, timeout=120)
  assert result.stdout.strip() == 'False', result.stderr[-2000:]
