"""The worst-case tables: a defence's worst case is the smallest of its per-attack means over seeds."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import worst_case_tables
from tests import repository


def _rows(accuracies):
  """results.csv rows from {(defence, corruption, fraction): [accuracy per seed]}."""
  return [dict(algorithm=defence, corruption=corruption, fraction=fraction, seed=seed, accuracy=accuracy,
               calls_per_round=3.0 if defence == 'rfa' else 1.0)
          for (defence, corruption, fraction), per_seed in accuracies.items()
          for seed, accuracy in enumerate(per_seed)]


_ACCURACIES = {
    ('fedavg', 'none', 0.0): [0.93, 0.95, 0.94],
    ('fedavg', 'omniscient', 0.2): [0.10, 0.12, 0.08],
    ('fedavg', 'ipm(eps=1)', 0.2): [0.80, 0.90, 0.70],
    ('rfa', 'none', 0.0): [0.94, 0.94, 0.95],
    ('rfa', 'omniscient', 0.2): [0.90, 0.60, 0.90],  # mean 0.8: worse than its ipm mean though its best seeds win
    ('rfa', 'ipm(eps=1)', 0.2): [0.85, 0.86, 0.84],
    ('rfa', 'omniscient', 0.25): [0.5, 0.6, 0.7],
}


def test_the_worst_case_is_the_minimum_over_attacks_of_the_mean_over_seeds():
  rows = _rows(_ACCURACIES)
  worst = worst_case_tables.worst_cases(rows, 0.2)
  for defence in ('fedavg', 'rfa'):
    means = {attack: np.mean(_ACCURACIES[(defence, attack, 0.2)]) for attack in ('omniscient', 'ipm(eps=1)')}
    expected_attack = min(means, key=means.get)
    assert worst[defence][1] == expected_attack
    assert worst[defence][0] == pytest.approx(means[expected_attack])
  assert worst['rfa'] == (pytest.approx(0.8), 'omniscient')  # not the seed-wise minimum 0.6


def test_the_order_of_rows_does_not_change_the_table():
  rows = _rows(_ACCURACIES)
  reference = worst_case_tables.worst_case_table(rows, 0.2)
  rng = np.random.default_rng(0)
  for _ in range(20):
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    # Defences are listed in order of first appearance; each defence's line does not depend on the order.
    expected = {line.split(' |')[0]: line for line in reference.splitlines() if line.startswith('| ')}
    got = {line.split(' |')[0]: line for line in worst_case_tables.worst_case_table(shuffled, 0.2).splitlines()
           if line.startswith('| ')}
    assert got == expected


def test_a_defence_missing_an_attack_has_no_worst_case_and_the_table_says_so():
  rows = _rows(_ACCURACIES)
  table = worst_case_tables.worst_case_table(rows, 0.25)
  assert 'rfa' in worst_case_tables.worst_cases(rows, 0.25) and 'fedavg' not in worst_case_tables.worst_cases(rows, 0.25)
  fedavg_line = next(line for line in table.splitlines() if line.startswith('| fedavg |'))
  assert fedavg_line.endswith('| - | - |')
  rfa_line = next(line for line in table.splitlines() if line.startswith('| rfa |'))
  assert '| 3 | 0.943 | 0.600 | **0.600** | omniscient |' in rfa_line


def test_cells_with_fewer_seeds_are_marked_with_their_count():
  accuracies = dict(_ACCURACIES)
  accuracies[('fedavg', 'ipm(eps=1)', 0.2)] = [0.8, 0.9]
  table = worst_case_tables.worst_case_table(_rows(accuracies), 0.2)
  assert '0.850 (2)' in table and 'over 3 seeds' in table


def test_a_level_without_attacked_runs_is_refused():
  with pytest.raises(ValueError, match='fraction=0.4'):
    worst_case_tables.worst_case_table(_rows(_ACCURACIES), 0.4)


def test_the_file_has_one_table_per_attacked_level(tmp_path):
  path = tmp_path / 'worst_case.md'
  worst_case_tables.write_worst_case_tables(_rows(_ACCURACIES), str(path))
  text = path.read_text()
  assert text.count('## rho = ') == 2 and '## rho = 0.2' in text and '## rho = 0.25' in text


def _command(*arguments) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'experiments.worst_case_tables', *arguments],
                        cwd=repository.ROOT, capture_output=True, text=True, timeout=120)


def test_the_command_rebuilds_the_tables_from_a_partial_results_csv(tmp_path):
  rows = _rows(_ACCURACIES)
  rows = [r for r in rows if not (r['algorithm'] == 'rfa' and r['corruption'] == 'ipm(eps=1)')]  # a stopped sweep
  with open(tmp_path / 'results.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  completed = _command(f'--results={tmp_path / "results.csv"}')
  assert completed.returncode == 0, completed.stderr
  assert f'{len(rows)} runs; wrote {tmp_path / "worst_case.md"}' in completed.stdout
  worst_case_tables.write_worst_case_tables(rows, str(tmp_path / 'expected.md'))
  text = (tmp_path / 'worst_case.md').read_text()
  assert text == (tmp_path / 'expected.md').read_text()
  fedavg_row, rfa_row = [line for line in text.split('## rho = 0.25')[0].splitlines() if line.startswith('| fedavg')
                         or line.startswith('| rfa')]
  assert fedavg_row.endswith('| **0.100** | omniscient |') and rfa_row.endswith('| - | - |')


def test_the_command_names_a_missing_results_file(tmp_path):
  completed = _command(f'--results={tmp_path / "absent.csv"}')
  assert completed.returncode != 0 and '--results must be an existing results.csv file' in completed.stderr


def _write_run(directory, summary):
  os.makedirs(directory)
  with open(os.path.join(directory, 'summary.json'), 'w') as f:
    json.dump(summary, f)


def test_run_directories_of_the_runner_give_the_table_of_the_same_rows(tmp_path):
  # The runner's summaries: a defence chain names its row, else the algorithm; calls per round from the summary.
  runs = tmp_path / 'table' / 'runs'
  expected = []
  for (defence, corruption, fraction), per_seed in _ACCURACIES.items():
    for seed, accuracy in enumerate(per_seed):
      summary = {'algorithm': 'rfa' if defence == 'rfa' else 'fedavg', 'seed': seed, 'corruption': corruption,
                 'corruption_fraction': fraction, 'eval/accuracy': accuracy, 'rounds': 10,
                 'secure_average_calls': 30 if defence == 'rfa' else 10}
      _write_run(runs / f'{defence}_{corruption}_{fraction}_{seed}', summary)
      expected.append(dict(algorithm=defence, corruption=corruption, fraction=fraction, seed=seed, accuracy=accuracy,
                           calls_per_round=3.0 if defence == 'rfa' else 1.0))
  _write_run(runs / 'chain_none', {'algorithm': 'fedavg', 'defence': 'norm_filter(k=2.0)>centered_clipping(tau=0.3)',
                                   'seed': 0, 'corruption': 'none', 'corruption_fraction': 0.0,
                                   'eval/accuracy': 0.9, 'rounds': 10, 'secure_average_calls': 50})
  _write_run(tmp_path / 'elsewhere' / 'chain_omniscient', {
      'algorithm': 'fedavg', 'defence': 'norm_filter(k=2.0)>centered_clipping(tau=0.3)', 'seed': 0,
      'corruption': 'omniscient', 'corruption_fraction': 0.2, 'eval/accuracy': 0.7, 'rounds': 10,
      'secure_average_calls': 50})
  os.symlink(tmp_path / 'elsewhere' / 'chain_omniscient', runs / 'chain_omniscient')  # a run another table shares
  _write_run(runs / 'stopped', {'algorithm': 'fedavg', 'seed': 5, 'corruption': 'none', 'rounds': 3})  # no accuracy
  expected += [dict(algorithm='norm_filter(k=2.0)>centered_clipping(tau=0.3)', corruption=corruption, fraction=fraction,
                    seed=0, accuracy=accuracy, calls_per_round=5.0)
               for corruption, fraction, accuracy in (('none', 0.0, 0.9), ('omniscient', 0.2, 0.7))]
  rows = worst_case_tables.rows_from_runs([str(runs)])
  key = lambda row: (row['algorithm'], row['corruption'], row['fraction'], row['seed'])
  assert sorted(rows, key=key) == sorted(expected, key=key)

  completed = _command(f'--runs={runs}', f'--output={tmp_path / "worst_case.md"}')
  assert completed.returncode == 0, completed.stderr
  worst_case_tables.write_worst_case_tables(rows, str(tmp_path / 'expected.md'))  # the rows checked above
  assert (tmp_path / 'worst_case.md').read_text() == (tmp_path / 'expected.md').read_text()
  chain_row = [line for line in (tmp_path / 'worst_case.md').read_text().splitlines()
               if line.startswith('| norm_filter')][0]
  # One seed of three, no run under ipm(eps=1): marked, and no worst case.
  assert chain_row == '| norm_filter(k=2.0)>centered_clipping(tau=0.3) | 5 | 0.900 (1) | - | 0.700 (1) | - | - |'


def test_the_command_with_runs_needs_an_output_and_a_run_with_an_accuracy(tmp_path):
  completed = _command(f'--runs={tmp_path}')
  assert completed.returncode != 0 and '--runs takes --output and no --results' in completed.stderr
  completed = _command(f'--runs={tmp_path}', f'--output={tmp_path / "worst_case.md"}')
  assert completed.returncode != 0 and '--runs: no run with a final accuracy below' in completed.stderr
