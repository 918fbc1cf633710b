"""The MtFEEL sweep: its cohort share and results table, and a tiny sweep end to end."""

import csv

import numpy as np
import pytest

from experiments import mtfeel_report
from tff_robust.tasks import digits_cohorts
from tests import fork_server


def test_cohort_share_of_a_hand_computed_alpha():
  alpha = np.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
  # device shares: 0.5 + 0.25, 0 + 1, 0.5
  assert mtfeel_report.cohort_share(alpha, ['A', 'A', 'B']) == pytest.approx(dict(overall=0.75, A=0.875, B=0.5))


def test_cohort_share_is_one_for_block_diagonal_alpha_and_the_cohort_size_for_uniform_alpha():
  labels = np.array(digits_cohorts.cohort_labels())
  same_cohort = (labels[:, None] == labels[None, :]).astype(float)
  block_diagonal = same_cohort / same_cohort.sum(axis=1, keepdims=True)
  assert mtfeel_report.cohort_share(block_diagonal, labels) == pytest.approx(dict(overall=1.0, A=1.0, B=1.0, C=1.0))
  uniform = np.full([30, 30], 1 / 30)
  assert mtfeel_report.cohort_share(uniform, labels) == pytest.approx(
      dict(overall=(12 * 12 + 12 * 12 + 6 * 6) / 900, A=12 / 30, B=12 / 30, C=6 / 30))


def _row(method, channel, seed, accuracy, snr_db=None, flip_probability=None):
  return dict(method=method, channel=channel, snr_db=snr_db, flip_probability=flip_probability, seed=seed,
              accuracy=accuracy, error_p90=0.5, train_loss=1.0, seconds_per_round=2.0)


def test_write_table_on_fake_rows(tmp_path):
  rows = [
      _row('mtfeel', 'none', 0, 0.9), _row('mtfeel', 'none', 1, 0.7),
      _row('local_only', 'none', 0, 0.6), _row('local_only', 'none', 1, 0.6),
      _row('mtfeel', 'rayleigh', 0, 0.3, snr_db=-10.0), _row('mtfeel', 'rayleigh', 1, 0.5, snr_db=-10.0),
      _row('mtfeel', 'rayleigh', 0, 0.8, snr_db=10.0), _row('mtfeel', 'rayleigh', 1, 0.8, snr_db=10.0),
      _row('mtfeel', 'bsc', 0, 0.1, flip_probability=0.5),
  ]
  path = tmp_path / 'results.md'
  mtfeel_report.write_table(rows, 'Cohort share of alpha: overall 0.9', path)
  table = path.read_text()
  assert '| mtfeel | 0.800 ± 0.100 | [0.700, 0.900] | 0.500 | 1.000 | 2.00 |' in table
  assert '| local_only | 0.600 ± 0.000 | [0.600, 0.600] |' in table
  assert '| method | SNR=-10 dB | SNR=10 dB |\n|---|---|---|\n| mtfeel | 0.400 ± 0.100 | 0.800 ± 0.000 |' in table
  assert '| method | p=0.5 |\n|---|---|\n| mtfeel | 0.100 ± 0.000 |' in table
  assert 'Cohort share of alpha: overall 0.9' in table and '2 seed(s) (0, 1)' in table


@pytest.mark.slow
def test_tiny_sweep_writes_csv_tables_and_figures(tmp_path):
  result = fork_server.python_m(
      'experiments.mtfeel_sweep',
      ['--methods=mtfeel,local_only', '--sweep_methods=mtfeel',
       '--seeds=0', '--total_rounds=1', '--snr_db_values=0', '--flip_probabilities=0.5', '--dde_steps=1',
       f'--root_output_dir={tmp_path}', '--experiment_name=s'],
      timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / 's' / 'results.csv') as f:
    rows = list(csv.DictReader(f))
  assert [(r['method'], r['channel'], r['snr_db'], r['flip_probability']) for r in rows] == [
      ('mtfeel', 'none', '', ''), ('local_only', 'none', '', ''), ('mtfeel', 'rayleigh', '0.0', ''),
      ('mtfeel', 'bsc', '', '0.5')]
  assert all(0 <= float(r['accuracy']) <= 1 for r in rows)
  table = (tmp_path / 's' / 'results.md').read_text()
  assert '## Error-free uplink' in table and '| SNR=0 dB |' in table and '| p=0.5 |' in table
  assert 'Cohort share of alpha' in result.stdout
  for figure in ('fig4_snr.png', 'fig4_flip.png', 'alpha_heatmap.png'):
    assert (tmp_path / 's' / figure).stat().st_size > 10_000
