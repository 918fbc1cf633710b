"""Test accuracy against secure-average oracle calls and against rounds (RFA Fig. 4) from runs' metrics.csv; for
Delta-FL runs, the test accuracy and the test-device error's 90th percentile and mean against rounds; for runs of a
targeted attack (a backdoor), the test accuracy and the attack success rate against rounds (`asr_curves`).

The RFA paper measures communication in calls to the secure-average oracle (notes §3.8): FedAvg and SGD make one
per round, RFA up to R = 3 (its Weiszfeld passes), so RFA "needs 3x the oracle calls of FedAvg" at rho = 0 while
it matches FedAvg per outer iteration. A run of `python -m experiments.train` writes `summary.json` (its total
`secure_average_calls` and `rounds`) and `metrics.csv` (`eval/accuracy` at every evaluation round); every
algorithm here makes the same number of calls each round, so the calls after round t are t x calls per round.
Runs that differ in a setting other than the seed are drawn apart (`experiments.setting_groups`, as the tables do).
Used by `experiments/paper_report.py` (no absl flags).
"""

import collections
import csv
import dataclasses
import json
import os
from typing import Iterable, Sequence

import numpy as np

from experiments import paper_tables
from experiments import setting_groups
from tff_robust.simulation import run_settings


# Targeted attacks' curves (runs that report an attack success rate): metrics.csv column -> axis label.
ASR_METRICS = {
    'eval/accuracy': 'test accuracy (%)',
    'eval/attack_success_rate': 'attack success rate (%)',
}
# Delta-FL's curves: metrics.csv column -> axis label (each a fraction, drawn in %).
DFL_METRICS = {
    'eval/accuracy': 'test accuracy (%)',
    'eval/error_p90': 'test-device error, 90th percentile (%)',
    'eval/error_mean': 'test-device error, mean (%)',
}


@dataclasses.dataclass(frozen=True)
class Curve:
  """One run's held-out `metric` (a fraction: accuracy, an error) at its evaluation rounds, with the oracle calls
  made by then."""

  record: paper_tables.Record  # the run's labels (task, algorithm, corruption, fraction, seed)
  rounds: tuple[int, ...]
  calls: tuple[float, ...]
  values: tuple[float, ...]
  metric: str = 'eval/accuracy'


def load_curve(run_dir: str, metric: str = 'eval/accuracy') -> Curve:
  """The curve of `metric` (a metrics.csv column) of the run in `run_dir` (its summary.json and metrics.csv)."""
  with open(os.path.join(run_dir, 'summary.json')) as f:
    summary = json.load(f)
  calls_per_round = summary['secure_average_calls'] / summary['rounds']
  with open(os.path.join(run_dir, 'metrics.csv'), newline='') as f:
    evaluated = [(int(row['round']), float(row[metric])) for row in csv.DictReader(f)
                 if row.get(metric) not in (None, '')]
  rounds = tuple(r for r, _ in evaluated)
  record = paper_tables.records_from_summary(summary, run_settings.read(run_dir), source=run_dir)
  return Curve(record, rounds, tuple(calls_per_round * r for r in rounds), tuple(a for _, a in evaluated), metric)


def load_curves(inputs: Iterable[str], kind: str = 'rfa', metric: str = 'eval/accuracy') -> list[Curve]:
  """Curves of `metric` of every run of `kind` ('rfa' or 'dfl', `paper_tables.Record.kind`) below the directories
  among `inputs` that has both summary.json and metrics.csv and evaluated `metric` (other inputs, e.g. a sweep's
  results.csv, hold no curves and are skipped).

  Raises:
    ValueError: `kind` is neither 'rfa' nor 'dfl'.
  """
  if kind not in ('rfa', 'dfl'):
    raise ValueError(f"kind must be 'rfa' or 'dfl', got {kind!r}")
  curves = [load_curve(root, metric)
            for root in paper_tables.run_directories(inputs, ('summary.json', 'metrics.csv'))]
  return [curve for curve in curves if curve.rounds and curve.record.kind == kind]


def asr_curves(inputs: Iterable[str]) -> dict[str, list[Curve]]:
  """{metric of `ASR_METRICS`: its curves} of every run below `inputs` (of either kind) that evaluated an attack
  success rate: the accuracy and the ASR of the same runs."""
  runs = [curve.record.source for kind in ('rfa', 'dfl')
          for curve in load_curves(inputs, kind=kind, metric='eval/attack_success_rate')]
  return {metric: [load_curve(run, metric) for run in runs] for metric in ASR_METRICS}


def seed_band(curves: Sequence[Curve], x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(x, mean, min, max) over seeds of the curves' metric (%) at the evaluation rounds every seed has; `x` is
  'calls' or 'rounds'."""
  if not curves or x not in ('calls', 'rounds'):
    raise ValueError(f"seed_band needs at least one curve and x in ('calls', 'rounds'), got {len(curves)} curves and "
                     f'x={x!r}')
  common = sorted(set.intersection(*(set(c.rounds) for c in curves)))
  values = np.array([[100 * c.values[c.rounds.index(r)] for r in common] for c in curves])
  xs = [getattr(curves[0], x)[curves[0].rounds.index(r)] for r in common]
  return np.array(xs, dtype=float), values.mean(0), values.min(0), values.max(0)


def convergence_panels(curves: Sequence[Curve]) -> list[tuple[str, list[tuple[str, list[Curve]]]]]:
  """[(panel title, [(line name, the line's curves: one per seed)])]: one panel per task x corruption x rho x group
  of common and attack settings, one line per algorithm x Delta-FL conformity level x group of its own settings.

  Raises:
    ValueError: two curves of one line have the same seed.
  """
  settings_of = lambda curve: curve.record.settings
  by_key = collections.defaultdict(list)
  for curve in curves:
    by_key[curve.record.task, curve.record.corruption, curve.record.fraction].append(curve)
  panels = []
  for (task, corruption, fraction), key_curves in sorted(by_key.items()):
    for condition, condition_curves in setting_groups.groups(key_curves, 'common', settings_of):
      for variant, panel_curves in setting_groups.groups(condition_curves, 'corruption', settings_of):
        lines = []
        algorithms = paper_tables.order_algorithms(c.record.algorithm for c in panel_curves)
        levels = sorted({c.record.conformity_level for c in panel_curves}, reverse=True)
        for algorithm, level in ((a, level) for a in algorithms for level in levels):
          own_curves = [c for c in panel_curves
                        if c.record.algorithm == algorithm and c.record.conformity_level == level]
          if not own_curves:
            continue
          base = f'{algorithm} θ={level:g}' if algorithm == 'delta_fl' else algorithm  # Delta-FL's theta
          for own, line_curves in setting_groups.groups(own_curves, 'algorithm', settings_of):
            name = f'{base} ({own})' if own else base
            setting_groups.check_one_run_per_seed(
                line_curves, f'{task}, {corruption}, ρ={fraction:g}, {name}', seed_of=lambda c: c.record.seed,
                source_of=lambda c: c.record.source)
            lines.append((name, line_curves))
        title = f'{task}: ' + ('no corruption' if corruption == 'none' else f'{corruption}, ρ={fraction:g}')
        labels = ', '.join(part for part in (variant, condition) if part)
        panels.append((title + (f'\n{labels}' if labels else ''), lines))
  return panels


def _draw_seed_band(ax, line_curves: Sequence[Curve], x: str, index: int, name: str) -> None:
  """One line on `ax`: the mean over seeds against `x` with a marker at every evaluation, and the min-max band,
  in the `index`-th colour."""
  xs, mean, low, high = seed_band(line_curves, x)
  ax.plot(xs, mean, color=f'C{index % 10}', marker='o', markersize=4, label=name)
  ax.fill_between(xs, low, high, color=f'C{index % 10}', alpha=0.2)


def plot_convergence(curves: Sequence[Curve], path: str) -> None:
  """Two rows of panels, one column per `convergence_panels` panel: accuracy (%) against oracle calls (top) and
  against rounds (bottom), one line per algorithm (mean over seeds, min-max band), a marker at every evaluation
  (a run evaluated once is a point)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  panels = convergence_panels(curves)
  fig, axes = plt.subplots(2, len(panels), figsize=(5 * len(panels), 7.5), squeeze=False)
  for column, (title, lines) in enumerate(panels):
    for index, (name, line_curves) in enumerate(lines):
      for row, x in enumerate(('calls', 'rounds')):
        _draw_seed_band(axes[row][column], line_curves, x, index, name)
    axes[0][column].set_title(title, fontsize=9)
    axes[0][column].set(xlabel='secure-average oracle calls', ylabel='test accuracy (%)')
    axes[1][column].set(xlabel='rounds (outer iterations)', ylabel='test accuracy (%)')
    for ax in axes[:, column]:
      ax.grid(alpha=0.3)
      ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def plot_against_rounds(curves_by_metric: dict[str, Sequence[Curve]], labels: dict[str, str], path: str) -> None:
  """One row of panels per metric of `curves_by_metric` ({metric: its curves}; `labels` gives each its axis label),
  one column per `convergence_panels` panel: the metric (%) against rounds, one line per algorithm (mean over
  seeds, min-max band), a marker at every evaluation. Delta-FL's accuracy and test-device error curves."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  rows = [(metric, convergence_panels(curves)) for metric, curves in curves_by_metric.items() if curves]
  columns = max(len(panels) for _, panels in rows)
  fig, axes = plt.subplots(len(rows), columns, figsize=(5.5 * columns, 3.6 * len(rows)), squeeze=False)
  for row, (metric, panels) in enumerate(rows):
    for column, (title, lines) in enumerate(panels):
      ax = axes[row][column]
      for index, (name, line_curves) in enumerate(lines):
        _draw_seed_band(ax, line_curves, 'rounds', index, name)
      ax.set_title(title, fontsize=9)
      ax.set(xlabel='rounds', ylabel=labels[metric])
      ax.grid(alpha=0.3)
      ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
