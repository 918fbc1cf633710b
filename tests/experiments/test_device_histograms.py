"""experiments/device_histograms.py on fake run directories: which runs it reads, per-device seed means, the figure."""

import csv
import json

import numpy as np
import pytest

from experiments import device_histograms
from tests import fork_server


def _write_run(directory, *, algorithm, seed, devices, conformity_level=1.0, task='shakespeare_gru_dfl'):
  """A run whose devices.csv has `devices` = [(group, device_id, loss, error)]."""
  directory.mkdir(parents=True)
  summary = dict(algorithm=algorithm, task=task, seed=seed, conformity_level=conformity_level,
                 **{'eval/accuracy': 0.6, 'eval/error_p90': 0.5, 'eval/error_mean': 0.4})
  (directory / 'summary.json').write_text(json.dumps(summary))
  if devices is not None:
    with open(directory / 'devices.csv', 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['group', 'device_id', 'num_examples', 'loss', 'error'])
      writer.writerows([group, device, 10, loss, error] for group, device, loss, error in devices)


def _runs(root):
  # Written in an order the labels must not follow: theta = 0.5 first, seed 1 before seed 0.
  for seed, shift in ((1, 0.2), (0, 0.0)):
    _write_run(root / f'dfl_{seed}', algorithm='delta_fl', conformity_level=0.5, seed=seed,
               devices=[('eval', 'a', 1.0 + shift, 0.3 + shift), ('eval', 'b', 2.0, 0.5), ('train', 'c', 0.7, 0.1)])
    _write_run(root / f'fedavg_{seed}', algorithm='fedavg', seed=seed,
               devices=[('eval', 'a', 1.5, 0.2 + shift), ('train', 'c', 0.9 - shift, 0.2)])
  _write_run(root / 'no_devices', algorithm='fedavg', seed=2, devices=None)
  _write_run(root / 'rfa_run', algorithm='rfa', task='digits', seed=0, devices=[('eval', 'z', 9.0, 0.9)])


def test_runs_are_labelled_in_the_tables_column_order_and_each_device_is_its_mean_over_seeds(tmp_path):
  _runs(tmp_path / 'runs')
  values, labels = device_histograms.load_from_runs([str(tmp_path / 'runs')])
  assert labels == ['shakespeare_gru_dfl: FedAvg', 'shakespeare_gru_dfl: Δ-FL θ=0.5']  # the RFA run is not Δ-FL's
  fedavg, dfl = (values[label] for label in labels)
  assert device_histograms.device_means(fedavg, 'eval', 'error') == pytest.approx([np.mean([0.2, 0.4])])
  assert device_histograms.device_means(fedavg, 'train', 'loss') == pytest.approx([np.mean([0.9, 0.7])])
  assert device_histograms.device_means(dfl, 'eval', 'error') == pytest.approx([np.mean([0.3, 0.5]), 0.5])
  assert device_histograms.device_means(dfl, 'eval', 'loss') == pytest.approx([np.mean([1.0, 1.2]), 2.0])
  assert dict(fedavg[('eval', 'error')]) == {'a': pytest.approx([0.2, 0.4])}  # seed 0 first, then seed 1


def test_inputs_that_are_not_directories_are_skipped(tmp_path):
  _runs(tmp_path / 'runs')
  values, labels = device_histograms.load_from_runs([str(tmp_path / 'runs' / 'fedavg_0' / 'summary.json'),
                                                     f'digits={tmp_path / "results.csv"}'])
  assert (values, labels) == ({}, [])


def test_paper_report_draws_the_device_histograms_of_run_directories(tmp_path):
  _runs(tmp_path / 'runs')
  result = fork_server.python_m(
      'experiments.paper_report',
      [f'--inputs={tmp_path / "runs"}',
       f'--output_dir={tmp_path / "out"}'], timeout=300,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'dfl_device_histograms.png' in result.stdout
  assert (tmp_path / 'out' / 'dfl_device_histograms.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize('labels', [[], ['shakespeare_gru_dfl: Δ-FL θ=0.8']])
def test_plot_histograms_refuses_no_labels_or_a_label_without_values(tmp_path, labels):
  _runs(tmp_path / 'runs')
  values, _ = device_histograms.load_from_runs([str(tmp_path / 'runs')])
  with pytest.raises(ValueError, match='at least one label, each a key of values'):
    device_histograms.plot_histograms(values, labels, str(tmp_path / 'figure.png'))
  assert not (tmp_path / 'figure.png').exists()
