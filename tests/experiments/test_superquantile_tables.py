"""A tiny Delta-FL table run end to end: CSV, markdown table in the paper's layout, histograms."""

import csv

import pytest

from tests import fork_server


@pytest.mark.slow
def test_tiny_table_run_writes_csv_table_and_histograms(tmp_path):
  result = fork_server.python_m(
      'experiments.superquantile_tables',
      ['--conformity_levels=0.5', '--seeds=0,1',
       '--total_rounds=2', f'--root_output_dir={tmp_path}', '--experiment_name=t'],
      timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  with open(tmp_path / 't' / 'results.csv') as f:
    rows = list(csv.DictReader(f))
  assert [(r['method'], r['seed']) for r in rows] == [
      ('FedAvg', '0'), ('Delta-FL theta=0.5', '0'), ('FedAvg', '1'), ('Delta-FL theta=0.5', '1')]
  assert all(0 <= float(r['error_mean']) <= float(r['error_p90']) <= 1 for r in rows)
  # Seeds draw different initial models: the same method's results differ between seeds.
  assert rows[0]['train_loss_mean'] != rows[2]['train_loss_mean']
  table = (tmp_path / 't' / 'results.md').read_text()
  assert '| metric | FedAvg | Delta-FL theta=0.5 |' in table and '[Table 2]' in table and ' ± ' in table
  assert (tmp_path / 't' / 'device_histograms.png').stat().st_size > 10_000


def test_conformity_level_outside_the_range_is_a_usage_error(tmp_path):
  result = fork_server.python_m(
      'experiments.superquantile_tables',
      ['--conformity_levels=0.5,0',
       f'--root_output_dir={tmp_path}'],
      timeout=300,
  )
  assert result.returncode != 0 and '--conformity_levels must lie in (0, 1]' in result.stderr
