"""experiments/paper_tables.py on small fake run outputs: mean ± std over seeds and the papers' layouts."""

import csv
import json

import pytest

from experiments import paper_plots
from experiments import paper_tables


def _write_summary(directory, **summary):
  directory.mkdir(parents=True)
  (directory / 'summary.json').write_text(json.dumps(summary))


def _row(table: str, first_cells: tuple) -> list[str]:
  """The cells of the markdown row of `table` starting with `first_cells`."""
  for line in table.splitlines():
    cells = [c.strip() for c in line.strip().strip('|').split('|')]
    if tuple(cells[:len(first_cells)]) == first_cells:
      return cells
  raise AssertionError(f'no row {first_cells} in\n{table}')


def test_mean_std_is_the_population_std_over_seeds():
  assert paper_tables.mean_std([0.5, 0.7]) == pytest.approx((0.6, 0.1))
  assert paper_tables.format_mean_std([0.5, 0.7]) == '60.00 ± 10.00'
  assert paper_tables.format_mean_std([0.25]) == '25.00 ± 0.00'
  assert paper_tables.format_mean_std([]) == '—'


def test_rfa_table_from_summaries_has_algorithm_rows_rho_columns_and_the_papers_numbers(tmp_path):
  runs = tmp_path / 'runs'
  for seed, (clean, corrupted) in enumerate([(0.60, 0.50), (0.64, 0.54)]):
    common = dict(task='emnist_linear_rfa', seed=seed, rounds=2, secure_average_calls=6)
    _write_summary(runs / f'rfa_clean_{seed}', algorithm='rfa', corruption='none', corruption_fraction=0.0,
                   **{'eval/accuracy': clean}, **common)
    _write_summary(runs / f'rfa_data_{seed}', algorithm='rfa', corruption='data', corruption_fraction=0.25,
                   **{'eval/accuracy': corrupted}, **common)
  _write_summary(runs / 'fedavg_data_0', algorithm='fedavg', task='emnist_linear_rfa', seed=0, corruption='data',
                 corruption_fraction=0.25, rounds=2, secure_average_calls=2, **{'eval/accuracy': 0.4})
  records = paper_tables.load_records([str(runs)])
  assert len(records) == 5 and {r.kind for r in records} == {'rfa'}
  table = paper_tables.rfa_tables(records, paper_tables.load_published())
  assert '## emnist_linear_rfa: data corruption' in table
  assert _row(table, ('algorithm',)) == ['algorithm', 'source', 'ρ=0', 'ρ=0.25']
  assert _row(table, ('fedavg', 'ours (emnist_linear_rfa)')) == ['fedavg', 'ours (emnist_linear_rfa)', '—', '40.00 ± 0.00']
  assert _row(table, ('rfa', 'ours (emnist_linear_rfa)'))[2:] == ['62.00 ± 2.00', '52.00 ± 2.00']
  assert _row(table, ('rfa', 'paper (emnist_linear)'))[2:] == ['62.9', '52.8']  # RFA Fig. 2 text
  assert _row(table, ('fedavg', 'paper (emnist_linear)'))[2:] == ['64.3', '41.2']
  assert 'rfa_one_step' not in table  # the paper's rows only for algorithms that were run
  assert table.index('ours (emnist_linear_rfa)') < table.index('paper (emnist_linear)')
  assert 'Ours: 2 seeds (0, 1), but fedavg at ρ=0.25 1 seed (0); ρ = ' in table  # cells short of seeds are named


def test_personalized_rfa_with_one_pass_is_reported_as_personalised_fedavg_with_personal_accuracy(tmp_path):
  common = dict(algorithm='personalized_rfa', task='emnist_linear_rfa', seed=0, corruption='none',
                corruption_fraction=0.0, rounds=4, **{'eval/accuracy': 0.1})
  _write_summary(tmp_path / 'a', secure_average_calls=4, **{'personal/error_mean': 0.3}, **common)
  _write_summary(tmp_path / 'b', secure_average_calls=12, **{'personal/error_mean': 0.2}, **common)
  records = sorted(paper_tables.load_records([str(tmp_path)]), key=lambda r: r.algorithm)
  assert [(r.algorithm, r.accuracy) for r in records] == [
      ('personalized_fedavg', pytest.approx(0.7)), ('personalized_rfa', pytest.approx(0.8))]


def test_dfl_tables_from_a_superquantile_results_csv_put_our_rows_above_the_papers(tmp_path):
  path = tmp_path / 'results.csv'
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['method', 'conformity_level', 'seed', 'error_p90', 'error_mean', 'accuracy'])
    writer.writerow(['FedAvg', '1.0', '0', '0.10', '0.05', '0.9'])
    writer.writerow(['FedAvg', '1.0', '1', '0.20', '0.07', '0.9'])
    writer.writerow(['Delta-FL theta=0.5', '0.5', '0', '0.08', '0.04', '0.9'])
    writer.writerow(['Delta-FL theta=0.5', '0.5', '1', '0.12', '0.06', '0.9'])
  records = paper_tables.load_records([f'digits={path}'])
  assert {(r.kind, r.task) for r in records} == {('dfl', 'digits')}
  table = paper_tables.dfl_tables(records, paper_tables.load_published())
  table2, table3 = table.split('## Table 3')
  assert _row(table2, ('dataset',)) == ['dataset', 'model', 'source', 'FedAvg', 'Δ-FL θ=0.8', 'Δ-FL θ=0.5',
                                        'Δ-FL θ=0.1']
  ours = _row(table2, ('digits',))
  assert ours[2] == 'ours (digits, 2 seeds (0, 1))'
  assert ours[3:] == ['15.00 ± 5.00', '—', '10.00 ± 2.00', '—']
  assert _row(table3, ('digits',))[3:] == ['6.00 ± 1.00', '—', '5.00 ± 1.00', '—']
  assert _row(table2, ('EMNIST', 'ConvNet'))[2:] == ['paper (Table 2)', '28.46 ± 1.07', '26.23 ± 1.15',
                                                    '23.69 ± 0.94', '25.46 ± 2.77']
  assert _row(table3, ('Shakespeare', 'RNN'))[3] == '42.90 ± 0.04'
  assert table2.index('ours (digits') < table2.index('paper (Table 2)')


def test_a_robustness_sweep_csv_shares_its_rho_0_runs_between_corruptions_and_figures_are_written(tmp_path):
  path = tmp_path / 'results.csv'
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['algorithm', 'corruption', 'fraction', 'seed', 'accuracy', 'loss', 'calls_per_round',
                     'corruption_weight_share'])
    writer.writerow(['rfa', 'none', '0.0', '0', '0.9', '0.1', '3.0', '0.0'])
    writer.writerow(['rfa', 'data', '0.25', '0', '0.8', '0.1', '3.0', '0.25'])
    writer.writerow(['rfa', 'omniscient', '0.25', '0', '0.7', '0.1', '3.0', '0.25'])
  records = paper_tables.load_records([str(path)], default_task='digits')
  published = paper_tables.load_published()
  table = paper_tables.rfa_tables(records, published)
  data, omniscient = table.split('## digits: omniscient corruption')
  assert _row(data, ('rfa', 'ours (digits)'))[2:] == ['90.00 ± 0.00', '80.00 ± 0.00']
  assert _row(omniscient, ('rfa', 'ours (digits)'))[2:] == ['90.00 ± 0.00', '70.00 ± 0.00']
  assert _row(omniscient, ('rfa', 'paper (emnist_linear)'))[2:] == ['62.9', '>40']
  assert 'for orientation only' in data  # digits stands in for EMNIST linear
  paper_plots.plot_rfa(records, published, str(tmp_path / 'rfa.png'))
  assert (tmp_path / 'rfa.png').stat().st_size > 0


def test_the_rfa_figure_without_any_final_accuracy_is_refused_naming_records(tmp_path):
  records = [paper_tables.Record(kind='rfa', task='digits', algorithm='rfa', seed=0),
             paper_tables.Record(kind='dfl', task='digits', algorithm='fedavg', seed=0, error_p90=0.2, error_mean=0.1)]
  with pytest.raises(ValueError, match='records: no RFA-kind run with a final test accuracy'):
    paper_plots.plot_rfa(records, paper_tables.load_published(), str(tmp_path / 'rfa.png'))
  assert not (tmp_path / 'rfa.png').exists()


def test_an_unknown_csv_is_refused(tmp_path):
  path = tmp_path / 'results.csv'
  path.write_text('a,b\n1,2\n')
  with pytest.raises(ValueError, match='not a results.csv'):
    paper_tables.load_records([str(path)])


def _write_run(directory, settings: dict, **summary):
  """A run directory as the runner leaves it: run_settings.json (every defining flag it is given) and summary.json."""
  from tff_robust.simulation import run_settings  # pylint: disable=g-import-not-at-top
  _write_summary(directory, **summary)
  run_settings.record(str(directory), settings)


_DIGITS = dict(task='digits', client_learning_rate=0.1, clients_per_round=10, alie_z=None, ipm_epsilon=0.1,
               trim_fraction=0.1, clipping_norm=1.0, channel='none', snr_db=10.0)


def _digits_run(directory, algorithm, seed, corruption, fraction, accuracy, **settings):
  flags = {**_DIGITS, 'algorithm': algorithm, 'seed': seed, 'corruption': corruption, 'corruption_fraction': fraction,
           **settings}
  extras = {'ipm_epsilon': flags['ipm_epsilon']} if corruption == 'ipm' else {}
  _write_run(directory, flags, algorithm=algorithm, task='digits', seed=seed, corruption=corruption,
             corruption_fraction=fraction, clients_per_round=flags['clients_per_round'], rounds=30,
             secure_average_calls=30, **extras, **{'eval/accuracy': accuracy})


def test_runs_that_differ_in_an_attack_setting_get_tables_of_their_own(tmp_path):
  # The case: IPM at epsilon 1 and 2, seed 0, were averaged into one 'fedavg 52.36 ± 13.47' cell.
  _digits_run(tmp_path / 'clean', 'fedavg', 0, 'none', 0.0, 0.9)
  _digits_run(tmp_path / 'ipm1', 'fedavg', 0, 'ipm', 0.25, 0.6583, ipm_epsilon=1.0)
  _digits_run(tmp_path / 'ipm2', 'fedavg', 0, 'ipm', 0.25, 0.3889, ipm_epsilon=2.0)
  table = paper_tables.rfa_tables(paper_tables.load_records([str(tmp_path)]), paper_tables.load_published())
  one, two = table.split('## digits: ipm corruption, ipm_epsilon=2')
  assert '## digits: ipm corruption, ipm_epsilon=1' in one
  assert _row(one, ('fedavg', 'ours (digits)'))[2:] == ['90.00 ± 0.00', '65.83 ± 0.00']
  assert _row(two, ('fedavg', 'ours (digits)'))[2:] == ['90.00 ± 0.00', '38.89 ± 0.00']  # the clean run in both


def test_runs_that_differ_in_a_common_setting_get_tables_and_figure_panels_of_their_own(tmp_path):
  # The case: Shakespeare at 10 and at 50 roles a round, different evaluation sizes, shared one cell.
  for seed in (0, 1):
    _digits_run(tmp_path / f'small_{seed}', 'rfa', seed, 'none', 0.0, 0.5 + 0.01 * seed, clients_per_round=10)
    _digits_run(tmp_path / f'large_{seed}', 'rfa', seed, 'none', 0.0, 0.7 + 0.01 * seed, clients_per_round=50,
                client_learning_rate=0.5)
  records = paper_tables.load_records([str(tmp_path)])
  table = paper_tables.rfa_tables(records, paper_tables.load_published())
  small, large = table.split('## digits: no corruption, client_learning_rate=0.5, clients_per_round=50')
  assert '## digits: no corruption, client_learning_rate=0.1, clients_per_round=10' in small
  assert _row(small, ('rfa', 'ours (digits)'))[2:] == ['50.50 ± 0.50']
  assert _row(large, ('rfa', 'ours (digits)'))[2:] == ['70.50 ± 0.50']
  assert [panel.title for panel in paper_tables.rfa_panels(records)] == [
      'digits: no corruption, client_learning_rate=0.1, clients_per_round=10',
      'digits: no corruption, client_learning_rate=0.5, clients_per_round=50']
  paper_plots.plot_rfa(records, paper_tables.load_published(), str(tmp_path / 'rfa.png'))


def test_an_algorithms_own_setting_makes_a_row_and_settings_a_run_does_not_use_are_not_compared(tmp_path):
  for seed in (0, 1):
    _digits_run(tmp_path / f'tm10_{seed}', 'trimmed_mean', seed, 'data', 0.25, 0.8, trim_fraction=0.1)
    _digits_run(tmp_path / f'tm25_{seed}', 'trimmed_mean', seed, 'data', 0.25, 0.85, trim_fraction=0.25)
    _digits_run(tmp_path / f'rfa_{seed}', 'rfa', seed, 'data', 0.25, 0.9, trim_fraction=0.3, clipping_norm=5.0)
  records = paper_tables.load_records([str(tmp_path)])
  assert ('trim_fraction', 0.3) not in records[0].settings and ('snr_db', 10.0) not in records[0].settings
  table = paper_tables.rfa_tables(records, paper_tables.load_published())
  assert table.count('## digits') == 1  # rfa's unused trim_fraction and clipping_norm split nothing
  assert _row(table, ('trimmed_mean (trim_fraction=0.1)', 'ours (digits)'))[2:] == ['80.00 ± 0.00']
  assert _row(table, ('trimmed_mean (trim_fraction=0.25)', 'ours (digits)'))[2:] == ['85.00 ± 0.00']
  assert _row(table, ('rfa', 'ours (digits)'))[2:] == ['90.00 ± 0.00']
  assert 'Ours: 2 seeds (0, 1); ρ = ' in table


def test_two_runs_of_one_cell_with_the_same_seed_are_refused_naming_both(tmp_path):
  _digits_run(tmp_path / 'a', 'rfa', 0, 'none', 0.0, 0.9)
  _digits_run(tmp_path / 'b', 'rfa', 0, 'none', 0.0, 0.8)
  records = paper_tables.load_records([str(tmp_path)])
  with pytest.raises(ValueError, match=f'digits, none, rfa at ρ=0: {tmp_path / "a"} and {tmp_path / "b"} are both '
                                       'seed 0 with the same recorded settings'):
    paper_tables.rfa_tables(records, paper_tables.load_published())


def test_a_setting_not_every_run_records_is_not_compared(tmp_path):
  _digits_run(tmp_path / 'new', 'rfa', 0, 'none', 0.0, 0.9)
  _write_summary(tmp_path / 'old', algorithm='rfa', task='digits', seed=1, corruption='none', corruption_fraction=0.0,
                 clients_per_round=10, rounds=30, secure_average_calls=90, **{'eval/accuracy': 0.8})
  table = paper_tables.rfa_tables(paper_tables.load_records([str(tmp_path)]), paper_tables.load_published())
  assert table.count('## digits') == 1 and _row(table, ('rfa', 'ours (digits)'))[2:] == ['85.00 ± 5.00']


def test_dfl_rows_split_by_common_settings_and_a_cell_of_differing_runs_is_refused(tmp_path):
  base = dict(task='emnist_linear_dfl', corruption='none', corruption_fraction=0.0, rounds=10,
              secure_average_calls=10)
  for seed in (0, 1):
    for rate in (0.1, 1.0):
      _write_run(tmp_path / f'd{seed}_{rate}', dict(client_learning_rate=rate, quantile_method='exact'),
                 algorithm='delta_fl', seed=seed, conformity_level=0.5, **base,
                 **{'eval/error_p90': 0.2 + rate / 10, 'eval/error_mean': 0.1})
  records = paper_tables.load_records([str(tmp_path)])
  table2 = paper_tables.dfl_tables(records, paper_tables.load_published()).split('## Table 3')[0]
  assert _row(table2, ('EMNIST', 'Linear', 'ours (emnist_linear_dfl, client_learning_rate=0.1, 2 seeds (0, 1))'))[5] \
      == '21.00 ± 0.00'
  assert _row(table2, ('EMNIST', 'Linear', 'ours (emnist_linear_dfl, client_learning_rate=1, 2 seeds (0, 1))'))[5] \
      == '30.00 ± 0.00'
  _write_run(tmp_path / 'secure', dict(client_learning_rate=0.1, quantile_method='secure'),
             algorithm='delta_fl', seed=2, conformity_level=0.5, **base,
             **{'eval/error_p90': 0.3, 'eval/error_mean': 0.1})
  with pytest.raises(ValueError, match='delta_fl θ=0.5: runs differ in quantile_method=exact; quantile_method=secure'):
    paper_tables.dfl_tables(paper_tables.load_records([str(tmp_path)]), paper_tables.load_published())


def test_a_linked_run_is_read_once_through_its_link_and_a_link_cycle_ends(tmp_path):
  # The Shakespeare grids link a run that two results directories share (results/shakespeare_budget_queue.sh).
  common = dict(task='shakespeare_lstm_rfa', seed=0, corruption='none', corruption_fraction=0.0, rounds=80,
                **{'eval/accuracy': 0.5})
  _write_summary(tmp_path / 'check' / 'runs' / 'fedavg', algorithm='fedavg', **common)
  _write_summary(tmp_path / 'grid' / 'runs' / 'rfa_clean', algorithm='rfa', **common)
  (tmp_path / 'grid' / 'runs' / 'fedavg_clean').symlink_to(tmp_path / 'check' / 'runs' / 'fedavg')
  (tmp_path / 'grid' / 'runs' / 'loop').symlink_to(tmp_path / 'grid')
  grid = [r.algorithm for r in paper_tables.load_records([str(tmp_path / 'grid')])]
  assert sorted(grid) == ['fedavg', 'rfa']
  both = paper_tables.load_records([str(tmp_path / 'grid'), str(tmp_path / 'check')])
  assert sorted(r.algorithm for r in both) == ['fedavg', 'rfa']
