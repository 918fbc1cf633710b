"""The Delta-FL paper's Fig. 4: histograms of the final per-device test error and training loss (no absl flags).

A run's `devices.csv` (written by the runner's per-device evaluation) has one row per evaluated device: group
('eval' for the unseen test devices, 'train' for the training devices), device_id, num_examples, loss, error.
Values are collected as values[label][(group, metric)] = {device_id: [value per seed]}; a device's histogram
entry is its mean over the seeds that evaluated it, and the dashed line is the inverted-CDF 90th percentile of
those entries (Table 2's statistic). One panel row per method, test error on the left, training loss on the right.
Runs that differ in a setting other than the seed get rows of their own, labelled with it
(`experiments.setting_groups`).
Used by `experiments.superquantile_tables` (its runs) and `experiments.paper_report` (run directories).
"""

import collections
import csv
import math
import os
from typing import Iterable

import numpy as np

from experiments import paper_tables
from experiments import setting_groups

_PANELS = (('eval', 'error', 'test-device misclassification error'), ('train', 'loss', 'training-device loss'))


def empty_values():
  """values[(group, metric)][device_id] -> [value per seed], for one method."""
  return collections.defaultdict(lambda: collections.defaultdict(list))


def add_devices_csv(method_values, path: str) -> None:
  """Appends every device's loss and error of the `devices.csv` at `path` to one method's values."""
  with open(path, newline='') as f:
    for device in csv.DictReader(f):
      for metric in ('loss', 'error'):
        method_values[(device['group'], metric)][device['device_id']].append(float(device[metric]))


def _label(record: paper_tables.Record) -> str:
  for label, algorithm, theta in paper_tables.DFL_COLUMNS:
    if record.algorithm == algorithm and math.isclose(record.conformity_level, theta):
      return f'{record.task}: {label}'
  return f'{record.task}: {record.algorithm} θ={record.conformity_level:g}'


def load_from_runs(inputs: Iterable[str]) -> tuple[dict, list[str]]:
  """(values by label, labels in the tables' column order) of the Delta-FL-kind runs under the directories among
  `inputs` that have a devices.csv beside their summary.json; other inputs are skipped."""
  found = []
  for root in paper_tables.run_directories(inputs, ('summary.json', 'devices.csv')):
    record = paper_tables.summary_record(os.path.join(root, 'summary.json'))
    if record.kind == 'dfl':
      found.append((record, os.path.join(root, 'devices.csv')))
  order = {(algorithm, theta): index for index, (_, algorithm, theta) in enumerate(paper_tables.DFL_COLUMNS)}
  found.sort(key=lambda item: (item[0].task, order.get((item[0].algorithm, item[0].conformity_level), len(order)),
                               -item[0].conformity_level, item[0].seed))
  labels = {}
  for task in dict.fromkeys(record.task for record, _ in found):
    for condition, runs in setting_groups.groups([r for r, _ in found if r.task == task], 'common'):
      for column in dict.fromkeys(map(_label, runs)):
        for own, column_runs in setting_groups.groups([r for r in runs if _label(r) == column], 'algorithm'):
          label = column + (f' ({own})' if own else '') + (f' [{condition}]' if condition else '')
          setting_groups.check_one_run_per_seed(column_runs, label)
          labels.update((id(r), label) for r in column_runs)
  values = {}
  for record, devices_csv in found:
    add_devices_csv(values.setdefault(labels[id(record)], empty_values()), devices_csv)
  return values, list(values)


def device_means(method_values, group: str, metric: str) -> list[float]:
  """Each device's mean over seeds of `metric` in `group`, in the order the devices were first seen."""
  return [float(np.mean(seeds)) for seeds in method_values[(group, metric)].values()]


def plot_histograms(values, labels, path: str) -> None:
  """Writes the Fig. 4-style figure (see the module docstring) of `values[label]` for each label to `path`."""
  missing = [label for label in labels if label not in values]
  if not labels or missing:
    raise ValueError(f'plot_histograms needs at least one label, each a key of values; got labels={list(labels)}, '
                     f'missing {missing}')
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(len(labels), len(_PANELS), figsize=(10, 2.8 * len(labels)), squeeze=False,
                              sharex='col')
  for row, label in enumerate(labels):
    for col, (group, metric, title) in enumerate(_PANELS):
      means = device_means(values[label], group, metric)
      axis = axes[row][col]
      axis.set_title(f'{label}\n{title}', fontsize=9)
      axis.set_ylabel('devices')
      if not means:
        continue
      axis.hist(means, bins=15, color=f'C{row % 10}', alpha=0.8)
      axis.axvline(np.quantile(means, 0.9, method='inverted_cdf'), color='k', linestyle='--', linewidth=1,
                   label='90th percentile')
      axis.legend(fontsize=7)
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)
