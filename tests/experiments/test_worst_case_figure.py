"""The worst-case figure's numbers: per setting and rho, each defence's worst case over the attacks (the smallest
mean over seeds, as `worst_case_tables`) and its clean mean; a defence missing an attack has no bar."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import worst_case_figure

from tests import repository


# setting -> {(defence, corruption, fraction): [accuracy per seed]}
_SETTINGS = {
    'dirichlet0.5_rho0.2': {
        ('fedavg', 'none', 0.0): [0.93, 0.95, 0.94],
        ('fedavg', 'omniscient', 0.2): [0.10, 0.12, 0.08],
        ('fedavg', 'ipm', 0.2): [0.80, 0.90, 0.70],
        ('rfa', 'none', 0.0): [0.94, 0.94, 0.95],
        ('rfa', 'omniscient', 0.2): [0.90, 0.60, 0.90],
        ('rfa', 'ipm', 0.2): [0.85, 0.86, 0.84],
    },
    'dirichlet0.1_rho0.25': {
        ('fedavg', 'none', 0.0): [0.80, 0.82, 0.84],
        ('fedavg', 'omniscient', 0.25): [0.10, 0.11, 0.12],
        ('rfa', 'none', 0.0): [0.85, 0.85, 0.85],
        ('rfa', 'omniscient', 0.25): [0.50, 0.40, 0.60],
        ('rfa', 'ipm', 0.25): [0.70, 0.70, 0.70],  # fedavg has no ipm run here: no worst case
    },
}


def _write(root):
  for setting, accuracies in _SETTINGS.items():
    os.makedirs(root / setting)
    with open(root / setting / 'results.csv', 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=['algorithm', 'corruption', 'fraction', 'seed', 'accuracy'])
      writer.writeheader()
      for (defence, corruption, fraction), per_seed in accuracies.items():
        for seed, accuracy in enumerate(per_seed):
          writer.writerow(dict(algorithm=defence, corruption=corruption, fraction=fraction, seed=seed,
                               accuracy=accuracy))


def test_each_bar_is_the_worst_mean_over_attacks_and_each_dot_the_clean_mean(tmp_path):
  _write(tmp_path)
  groups = worst_case_figure.summary(str(tmp_path))
  assert list(groups) == [('dirichlet0.1_rho0.25', 0.25), ('dirichlet0.5_rho0.2', 0.2)]  # settings in name order
  first = groups[('dirichlet0.5_rho0.2', 0.2)]
  assert first['fedavg'][:2] == (pytest.approx(0.10), 'omniscient')
  assert first['rfa'][:2] == (pytest.approx(0.80), 'omniscient')  # the mean, not the seed-wise minimum 0.6
  assert first['rfa'][2] == pytest.approx(np.mean([0.94, 0.94, 0.95]))
  second = groups[('dirichlet0.1_rho0.25', 0.25)]
  assert set(second) == {'rfa'} and second['rfa'][:2] == (pytest.approx(0.5), 'omniscient')


def test_the_command_writes_the_figure_and_names_a_root_without_results(tmp_path):
  _write(tmp_path)
  completed = subprocess.run([sys.executable, '-m', 'experiments.worst_case_figure', f'--root={tmp_path}'],
                             cwd=repository.ROOT, capture_output=True, text=True, timeout=120)
  assert completed.returncode == 0, completed.stderr
  figure = tmp_path / 'worst_case_summary.png'
  assert f'2 settings; wrote {figure}' in completed.stdout
  assert figure.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  empty = tmp_path / 'empty'
  empty.mkdir()
  completed = subprocess.run([sys.executable, '-m', 'experiments.worst_case_figure', f'--root={empty}'],
                             cwd=repository.ROOT, capture_output=True, text=True, timeout=120)
  assert completed.returncode != 0 and '--root: no */results.csv below' in completed.stderr
