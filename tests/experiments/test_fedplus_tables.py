"""A tiny Fed+ Table 2 run end to end: CSV, markdown table beside the paper's row, sigma override, usage errors."""

import csv

import pytest

from tests import fork_server


def _run_tables(tmp_path, *flags, timeout=900):
  return fork_server.python_m(
      'experiments.fedplus_tables', [f'--root_output_dir={tmp_path}', '--experiment_name=t', *flags], timeout=timeout
  )


@pytest.mark.slow
def test_tiny_table_run_uses_the_sigma_override_and_states_kappa(tmp_path):
  result = _run_tables(tmp_path, '--methods=local-only,FedGeoMed+', '--seeds=0', '--total_rounds=1',
                       '--fedplus_sigma=1000')
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / 't' / 'results.csv') as f:
    rows = {r['method']: r for r in csv.DictReader(f)}
  assert set(rows) == {'local-only', 'FedGeoMed+'} and all(float(r['sigma']) == 1000 for r in rows.values())
  # From w_k = w~ = 0 the anchor is 0, so kappa = 1 / (1 + 1e-4 * 1000) = 0.909 shrinks every step toward 0
  # and the first-round personal models differ from local training's: sigma reached the process.
  assert abs(float(rows['FedGeoMed+']['score']) - float(rows['local-only']['score'])) > 1.0
  table = (tmp_path / 't' / 'results.md').read_text()
  assert '| | local-only | FedGeoMed+ |' in table and '| paper (Table 2) | — | 1048 |' in table
  assert 'sigma = 1000, kappa = 1/(1 + eta sigma) = 0.909091' in table


@pytest.mark.slow
def test_validation_fraction_scores_every_method_on_validation_data(tmp_path):
  flags = ('--task=digits_personal', '--methods=local-only', '--seeds=0', '--total_rounds=1')
  validated = _run_tables(tmp_path / 'validation', *flags, '--validation_fraction=0.3')
  tested = _run_tables(tmp_path / 'test', *flags)
  assert validated.returncode == 0 and tested.returncode == 0, (validated.stderr + tested.stderr)[-3000:]
  rows = {}
  for split in ('validation', 'test'):
    with open(tmp_path / split / 't' / 'results.csv') as f:
      (rows[split],) = csv.DictReader(f)
    assert rows[split]['scored_on'] == split
    assert f'({split} accuracy %, higher is better)' in (tmp_path / split / 't' / 'results.md').read_text()
  assert rows['validation']['score'] != rows['test']['score']


@pytest.mark.parametrize('flags, message', [
    ('--fedplus_sigma=-1', 'fedplus_sigma'),
    ('--methods=FedAvg,FedMagic', '--methods must be among'),
    ('--seeds=0,x', '--seeds'),
    ('--validation_fraction=0.2', "--validation_fraction applies to digits_robust, digits_personal, not "
     "'synthetic_regression_fedplus'"),
    ('--task=digits_robust --validation_fraction=1', '--validation_fraction must be in (0, 1)'),
])
def test_bad_flags_are_usage_errors_naming_the_flag(tmp_path, flags, message):
  result = _run_tables(tmp_path, *flags.split(), timeout=300)
  assert result.returncode != 0 and message in result.stderr
  assert not (tmp_path / 't').exists()
