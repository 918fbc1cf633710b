"""Tables and figures of the papers' layouts from run outputs, beside the published numbers (no absl flags).

Used by `experiments/paper_report.py`. Inputs are normalised into `Record`s:
  * `summary.json` of `python -m experiments.train` runs (found recursively under a directory): the runner
    records algorithm, task, seed, corruption, corruption_fraction and, for delta_fl, conformity_level;
  * `results.csv` of `experiments/robustness_sweep.py` (algorithm, corruption, fraction, seed, accuracy) and of
    `experiments/superquantile_tables.py` (method, conformity_level, seed, error_p90, error_mean, ...); these
    name no task, so the caller gives one.

Two layouts:
  * RFA (Fig. 2/3/5/6): final test accuracy (%), one table per task x corruption, one row per algorithm and one
    column per corruption level rho, mean ± std over seeds; under it the paper's numbers (Fig. 2/5/6 text) for
    the paper's dataset the task stands for; `plot_rfa` draws accuracy against rho (mean, min-max band).
  * Delta-FL (Tables 2-3): 90th percentile (Table 2) and mean (Table 3) of the test-device misclassification
    error (%), one row per task, columns FedAvg and Delta-FL theta = 0.8, 0.5, 0.1, mean ± std over seeds,
    beside the paper's five rows; `plot_dfl` draws both as grouped bars.
std is the population standard deviation over seeds (ddof = 0), as the sweep binaries report it.
"""

import collections
import csv
import dataclasses
import json
import math
import os
from typing import Iterable, Optional, Sequence

import numpy as np

PUBLISHED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs', 'published_numbers.json')

# Runner task -> the paper's dataset whose published numbers it reproduces ('digits' stands in for EMNIST linear).
RFA_DATASETS = {
    'emnist_linear_rfa': 'emnist_linear', 'emnist_cnn_rfa': 'emnist_cnn', 'shakespeare_lstm_rfa': 'shakespeare_lstm',
    'sent140_linear': 'sent140_linear', 'digits': 'emnist_linear',
}
DFL_DATASETS = {
    'emnist_linear_dfl': 'emnist_linear', 'emnist_cnn_dfl': 'emnist_cnn', 'sent140_linear_by_device': 'sent140_linear',
    'sent140_lstm_by_device': 'sent140_rnn', 'shakespeare_gru_dfl': 'shakespeare_rnn',
}
DFL_COLUMNS = (('FedAvg', 'fedavg', 1.0), ('Δ-FL θ=0.8', 'delta_fl', 0.8), ('Δ-FL θ=0.5', 'delta_fl', 0.5),
               ('Δ-FL θ=0.1', 'delta_fl', 0.1))
DFL_METRICS = (('error_p90', 'Table 2: 90th percentile of the test-device misclassification error (%)'),
               ('error_mean', 'Table 3: mean of the test-device misclassification error (%)'))
RFA_ALGORITHM_ORDER = ('fedavg', 'rfa', 'rfa_one_step', 'personalized_fedavg', 'personalized_rfa', 'coordinate_median',
                       'trimmed_mean', 'multi_krum', 'bulyan', 'norm_clipping', 'fedsgd')


@dataclasses.dataclass(frozen=True)
class Record:
  """One run's final metrics, fractions in [0, 1] (None where the run does not report them)."""

  kind: str  # 'rfa' (accuracy against corruption) or 'dfl' (per-device error distribution)
  task: str
  algorithm: str
  seed: int
  corruption: str = 'none'
  fraction: float = 0.0
  conformity_level: float = 1.0
  accuracy: Optional[float] = None
  error_p90: Optional[float] = None
  error_mean: Optional[float] = None


def mean_std(values: Sequence[float]) -> tuple[float, float]:
  """(mean, population std) of `values`."""
  array = np.asarray(values, dtype=float)
  return float(array.mean()), float(array.std())


def format_mean_std(values: Sequence[float], scale: float = 100.0, digits: int = 2) -> str:
  """'m ± s' of `values` times `scale` ('—' when empty); non-finite runs make the cell 'nan'."""
  if not len(values):  # pylint: disable=g-explicit-length-test
    return '—'
  mean, std = mean_std([scale * v for v in values])
  return f'{mean:.{digits}f} ± {std:.{digits}f}'


def load_published(path: str = PUBLISHED_PATH) -> dict:
  with open(path) as f:
    return json.load(f)


def _float(value, default=None):
  return default if value in (None, '') else float(value)


def records_from_summary(summary: dict) -> Record:
  """The record of one `summary.json`; personalised runs are scored with the devices' personal models, and
  personalized_rfa with 1 secure average per round (--rfa_num_passes=1) is personalised FedAvg."""
  algorithm, task = summary['algorithm'], summary['task']
  accuracy = summary.get('eval/accuracy')
  if algorithm == 'personalized_rfa' and 'personal/error_mean' in summary:
    accuracy = 1.0 - summary['personal/error_mean']
    if summary.get('rounds') and summary.get('secure_average_calls') == summary['rounds']:
      algorithm = 'personalized_fedavg'
  kind = 'dfl' if algorithm == 'delta_fl' or task in DFL_DATASETS else 'rfa'
  return Record(
      kind=kind, task=task, algorithm=algorithm, seed=int(summary['seed']),
      corruption=summary.get('corruption', 'none'), fraction=float(summary.get('corruption_fraction', 0.0)),
      conformity_level=float(summary.get('conformity_level', 1.0)) if algorithm == 'delta_fl' else 1.0,
      accuracy=accuracy, error_p90=summary.get('eval/error_p90'), error_mean=summary.get('eval/error_mean'),
  )


def summary_record(path: str) -> Record:
  """The record of the `summary.json` at `path`."""
  with open(path) as f:
    return records_from_summary(json.load(f))


def records_from_csv(path: str, task: str) -> list[Record]:
  """Records of a robustness-sweep or superquantile-tables results.csv (recognised by their columns)."""
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return []
  if {'algorithm', 'corruption', 'fraction', 'accuracy'} <= set(rows[0]):
    return [Record(kind='rfa', task=task, algorithm=r['algorithm'], seed=int(r['seed']), corruption=r['corruption'],
                   fraction=float(r['fraction']), accuracy=_float(r['accuracy'])) for r in rows]
  if {'method', 'conformity_level', 'error_p90', 'error_mean'} <= set(rows[0]):
    records = []
    for r in rows:
      theta = float(r['conformity_level'])
      records.append(Record(kind='dfl', task=task, algorithm='fedavg' if r['method'] == 'FedAvg' else 'delta_fl',
                            seed=int(r['seed']), conformity_level=theta, accuracy=_float(r.get('accuracy')),
                            error_p90=_float(r['error_p90']), error_mean=_float(r['error_mean'])))
    return records
  raise ValueError(f'{path}: not a results.csv of experiments.robustness_sweep or experiments.superquantile_tables '
                   f'(columns {sorted(rows[0])})')


def run_directories(inputs: Iterable[str], required: Iterable[str]) -> list[str]:
  """Every directory below the directories among `inputs` ('TASK=' prefixes ignored) that holds all files named in
  `required`, in walk order; inputs that are files (a summary.json, a sweep's results.csv) are skipped."""
  required = set(required)
  found = []
  for spec in inputs:
    path = spec.rpartition('=')[2]
    if os.path.isdir(path):
      found += [root for root, _, files in sorted(os.walk(path)) if required <= set(files)]
  return found


def load_records(inputs: Iterable[str], default_task: str = 'digits') -> list[Record]:
  """Records of `inputs`: directories (every summary.json below), summary.json or results.csv files, each
  optionally 'TASK=PATH' to name the task of a results.csv (default `default_task`)."""
  records = []
  for spec in inputs:
    task, _, path = spec.rpartition('=') if '=' in spec else (default_task, '', spec)
    task = task or default_task
    if os.path.isdir(path):
      records += [summary_record(os.path.join(root, 'summary.json'))
                  for root in run_directories([path], ('summary.json',))]
    elif path.endswith('.json'):
      records.append(summary_record(path))
    elif path.endswith('.csv'):
      records.extend(records_from_csv(path, task))
    else:
      raise ValueError(f'{path}: expected a directory, a summary.json or a results.csv')
  return records


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
  return ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] + ['| ' + ' | '.join(r) + ' |' for r in rows]


def order_algorithms(algorithms: Iterable[str]) -> list[str]:
  """The distinct `algorithms` in the papers' order (RFA_ALGORITHM_ORDER), others after them by name."""
  rank = {a: i for i, a in enumerate(RFA_ALGORITHM_ORDER)}
  return sorted(set(algorithms), key=lambda a: (rank.get(a, len(rank)), a))


def _seeds_note(records: Sequence[Record]) -> str:
  seeds = sorted({r.seed for r in records})
  return f'{len(seeds)} seed{"s" * (len(seeds) != 1)} ({", ".join(map(str, seeds))})'


def rfa_accuracy_records(records: Sequence[Record]) -> list[Record]:
  """The RFA-kind records that report a final test accuracy: what the RFA tables and figure show."""
  return [r for r in records if r.kind == 'rfa' and r.accuracy is not None]


def rfa_tables(records: Sequence[Record], published: dict) -> str:
  """Markdown: per task and corruption, accuracy (%) mean ± std over seeds by algorithm x rho, then the paper's."""
  records = rfa_accuracy_records(records)
  lines = ['# RFA (Fig. 2/3/5/6 layout): final test accuracy (%), mean ± std over seeds', '']
  published_numbers = published['rfa']['numbers']
  for task in sorted({r.task for r in records}):
    task_records = [r for r in records if r.task == task]
    clean = [r for r in task_records if r.corruption == 'none' or r.fraction == 0.0]
    corruptions = sorted({r.corruption for r in task_records if r.corruption != 'none'}) or ['none']
    dataset = RFA_DATASETS.get(task)
    for corruption in corruptions:
      # rho = 0 runs are shared by every corruption (the sweep runs them once, with corruption 'none').
      selected = [r for r in task_records if r.corruption == corruption and r.fraction > 0.0] + clean
      fractions = sorted({r.fraction for r in selected})
      cell_runs = collections.defaultdict(list)
      for r in selected:
        cell_runs[r.algorithm, r.fraction].append(r)
      algorithms = order_algorithms(r.algorithm for r in selected)
      header = ['algorithm', 'source'] + [f'ρ={f:g}' for f in fractions]
      rows = [[a, f'ours ({task})'] + [format_mean_std([r.accuracy for r in cell_runs[a, f]]) for f in fractions]
              for a in algorithms]
      paper_rows = []
      if dataset is not None:
        paper = [p for p in published_numbers if p['dataset'] == dataset and p['corruption'] in (corruption, 'none')
                 and (p['corruption'] == corruption or p['fraction'] == 0.0)]
        ours = {r.algorithm for r in selected}
        for algorithm in order_algorithms(p['algorithm'] for p in paper if p['algorithm'] in ours):
          cells = []
          for f in fractions:
            hits = [p for p in paper if p['algorithm'] == algorithm and math.isclose(p['fraction'], f)]
            cells.append(' / '.join(f'{p.get("qualifier", "")}{p["value"]:g}' for p in hits) or '—')
          missing = sorted({p['fraction'] for p in paper if p['algorithm'] == algorithm} - set(fractions))
          suffix = f' (also ρ={", ".join(f"{m:g}" for m in missing)}: see JSON)' if missing else ''
          paper_rows.append([algorithm, f'paper ({dataset}){suffix}'] + cells)
      title = 'no corruption' if corruption == 'none' else f'{corruption} corruption'
      lines += [f'## {task}: {title}', ''] + _markdown(header, rows + paper_rows) + ['']
      seeds = {r.seed for r in selected}
      fewer = [f'{a} at ρ={f:g} {_seeds_note(cell_runs[a, f])}' for a in algorithms for f in fractions
               if cell_runs[a, f] and {r.seed for r in cell_runs[a, f]} != seeds]
      note = f'Ours: {_seeds_note(selected)}' + (f', but {"; ".join(fewer)}' if fewer else '')
      note += '; ρ = share of training examples on corrupted devices.'
      if dataset is not None and not task.startswith(dataset.split('_')[0]):
        note += (f' The paper rows are its {dataset} numbers (a different dataset: for orientation only).')
      sources = sorted({p['source'] for p in published_numbers if p['dataset'] == dataset})
      if sources:
        note += ' Paper sources: ' + '; '.join(sources) + '.'
      lines += [note, '']
  return '\n'.join(lines)


def dfl_tables(records: Sequence[Record], published: dict) -> str:
  """Markdown: the Delta-FL paper's Tables 2 and 3, our tasks' rows (mean ± std over seeds) above the paper's."""
  records = [r for r in records if r.kind == 'dfl']
  paper = published['superquantile_fl']['numbers']
  lines = ['# Superquantile FL (Δ-FL) Tables 2–3: test-device misclassification error (%), mean ± std over seeds', '']
  header = ['dataset', 'model', 'source'] + [label for label, _, _ in DFL_COLUMNS]
  for metric, title in DFL_METRICS:
    rows = []
    for task in sorted({r.task for r in records}):
      dataset = DFL_DATASETS.get(task)
      names = [(p['dataset_name'], p['model']) for p in paper if p['dataset'] == dataset][:1] or [(task, '—')]
      cells = []
      for _, algorithm, theta in DFL_COLUMNS:
        values = [getattr(r, metric) for r in records if r.task == task and r.algorithm == algorithm
                  and math.isclose(r.conformity_level, theta) and getattr(r, metric) is not None]
        cells.append(format_mean_std(values))
      rows.append([*names[0], f'ours ({task}, {_seeds_note([r for r in records if r.task == task])})'] + cells)
    for dataset in dict.fromkeys(p['dataset'] for p in paper):
      entries = [p for p in paper if p['dataset'] == dataset and p['metric'] == metric]
      cells = []
      for _, algorithm, theta in DFL_COLUMNS:
        hit = [p for p in entries if p['algorithm'] == algorithm and math.isclose(p['conformity_level'], theta)]
        cells.append(f'{hit[0]["value"]:.2f} ± {hit[0]["std"]:.2f}' if hit else '—')
      rows.append([entries[0]['dataset_name'], entries[0]['model'], f'paper ({entries[0]["source"]})'] + cells)
    lines += [f'## {title}', ''] + _markdown(header, rows) + ['']
  lines += ['Ours: the final model; unweighted over test devices (inverted-CDF percentile); std is the population '
            'std over seeds. Paper: final model after the round budget, 5 seeds.', '']
  return '\n'.join(lines)


def plot_rfa(records: Sequence[Record], published: dict, path: str) -> None:
  """Accuracy (%) against rho, one panel per task x corruption, one line per algorithm (mean, min-max band),
  the paper's numbers for the task's dataset as open markers."""
  records = rfa_accuracy_records(records)
  if not records:
    raise ValueError('records: no RFA-kind run with a final test accuracy (eval/accuracy) to plot')
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  panels = sorted({(r.task, r.corruption) for r in records if r.corruption != 'none'}) or sorted(
      {(r.task, 'none') for r in records})
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
  for ax, (task, corruption) in zip(axes[0], panels):
    selected = [r for r in records if r.task == task and (r.corruption == corruption or r.fraction == 0.0)]
    for index, algorithm in enumerate(order_algorithms(r.algorithm for r in selected)):
      fractions = sorted({r.fraction for r in selected if r.algorithm == algorithm})
      values = [[100 * r.accuracy for r in selected if r.algorithm == algorithm and r.fraction == f] for f in fractions]
      color = f'C{index % 10}'
      ax.plot(fractions, [np.mean(v) for v in values], marker='o', color=color, label=algorithm)
      ax.fill_between(fractions, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
      dataset = RFA_DATASETS.get(task)
      paper = [p for p in published['rfa']['numbers'] if p['dataset'] == dataset and p['algorithm'] == algorithm
               and p['corruption'] in (corruption, 'none') and 'qualifier' not in p]
      if paper:
        ax.scatter([p['fraction'] for p in paper], [p['value'] for p in paper], facecolors='none', edgecolors=color,
                   marker='s', s=60, label=f'{algorithm}, paper ({dataset})')
    ax.set(title=f'{task}: {corruption} corruption', xlabel='corruption level ρ', ylabel='test accuracy (%)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def plot_dfl(records: Sequence[Record], path: str) -> None:
  """Grouped bars: 90th percentile and mean test-device error (%) per method, mean ± std over seeds, per task."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  records = [r for r in records if r.kind == 'dfl']
  tasks = sorted({r.task for r in records})
  fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
  for ax, task in zip(axes[0], tasks):
    positions = np.arange(len(DFL_COLUMNS))
    for offset, (metric, _) in zip((-0.2, 0.2), DFL_METRICS):
      stats = [mean_std([100 * getattr(r, metric) for r in records if r.task == task and r.algorithm == algorithm
                         and math.isclose(r.conformity_level, theta)] or [np.nan])
               for _, algorithm, theta in DFL_COLUMNS]
      ax.bar(positions + offset, [m for m, _ in stats], 0.4, yerr=[s for _, s in stats], capsize=3,
             label='90th percentile (Table 2)' if metric == 'error_p90' else 'mean (Table 3)')
    ax.set_xticks(positions, [label for label, _, _ in DFL_COLUMNS])
    ax.set(title=f'{task}: test-device error', ylabel='misclassification error (%)')
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
