"""`run_settings`: a directory's recorded settings admit the same settings only; it imports no TensorFlow."""

import json
import math
import subprocess
import sys

import pytest

from tests import repository
from tff_robust.simulation import run_settings


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
  result = subprocess.run([sys.executable, '-c', code], cwd=repository.ROOT, capture_output=True, text=True,
                          timeout=120)
  assert result.stdout.strip() == 'False', result.stderr[-2000:]


def _strict_json(text: str):
  """`text` parsed as RFC 8259 JSON: NaN, Infinity and -Infinity are refused."""
  def refuse(constant):
    raise ValueError(f'not JSON: {constant}')
  return json.loads(text, parse_constant=refuse)


def test_non_finite_settings_are_written_as_strict_json_and_read_back(tmp_path):
  settings = {**_SETTINGS, 'client_learning_rate': math.nan, 'snr_db': -math.inf, 'ipm_epsilon': math.inf,
              'grid': (1.0, math.nan)}
  run_settings.record(str(tmp_path / 'run'), settings)
  written = _strict_json((tmp_path / 'run' / run_settings.FILENAME).read_text())
  assert written['client_learning_rate'] == {'float': 'nan'} and written['snr_db'] == {'float': '-inf'}
  read = run_settings.read(str(tmp_path / 'run'))
  assert set(read) == set(settings) and math.isnan(read['client_learning_rate']) and math.isnan(read['grid'][1])
  assert (read['snr_db'], read['ipm_epsilon'], read['grid'][0]) == (-math.inf, math.inf, 1.0)
  assert (read['algorithm'], read['clients_per_round'], read['tff_worker']) == ('rfa', None, ['a', 'b'])
  run_settings.check_same_run(str(tmp_path / 'run'), settings)  # NaN is the same setting as NaN
  with pytest.raises(run_settings.SettingsMismatch, match=r'--client_learning_rate was nan, now 0.1\)$'):
    run_settings.check_same_run(str(tmp_path / 'run'), {**settings, 'client_learning_rate': 0.1})
  assert run_settings.read(str(tmp_path / 'no_run')) is None


def test_a_record_with_a_bare_nan_from_before_the_encoding_still_compares_equal(tmp_path):
  (tmp_path / 'run').mkdir()
  (tmp_path / 'run' / run_settings.FILENAME).write_text('{"algorithm": "rfa", "client_learning_rate": NaN}')
  run_settings.check_same_run(str(tmp_path / 'run'), {'algorithm': 'rfa', 'client_learning_rate': math.nan})
  assert math.isnan(run_settings.read(str(tmp_path / 'run'))['client_learning_rate'])
