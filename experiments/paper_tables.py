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
    the paper's dataset the task stands for; `paper_plots.plot_rfa` draws accuracy against rho (mean, min-max band).
  * Delta-FL (Tables 2-3): 90th percentile (Table 2) and mean (Table 3) of the test-device misclassification
    error (%), one row per task, columns FedAvg and Delta-FL theta = 0.8, 0.5, 0.1, mean ± std over seeds,
    beside the paper's five rows; `paper_plots.plot_dfl` draws both as grouped bars.
std is the population standard deviation over seeds (ddof = 0), as the sweep binaries report it.

Only runs that differ in seed alone share a mean. Each record carries the run's other settings (its
run_settings.json, the summary's extras, the rounds; a sweep's results.csv: the sweep's run_settings.json), and
runs that differ in one are reported apart (`experiments.setting_groups`): an algorithm's own setting makes a row
of its own (`trimmed_mean (trim_fraction=0.2)`), an attack's a table of its own (`ipm corruption, ipm_epsilon=2`),
any other (the cohort, rounds, learning rates, task options) a table (an RFA panel, a Delta-FL row) of its own,
each titled with the settings that tell it apart. Two runs of one cell with the same seed are refused (ValueError
naming both): nothing recorded tells them apart.
"""

import csv
import dataclasses
import json
import math
import os
from typing import Iterable, Optional, Sequence

import numpy as np

from experiments import flag_users
from experiments import setting_groups
from tff_robust.simulation import run_settings

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
  settings: tuple = ()  # ((name, value), ...): the run's other settings that it uses (module docstring)
  source: str = ''  # where the run was read from, for messages


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


# Not settings: the layouts' axes, and what a run measured or became.
_AXES = ('task', 'algorithm', 'seed', 'corruption', 'corruption_fraction', 'conformity_level')
_OUTCOMES = ('rounds', 'secure_average_calls', 'seconds_per_round', 'nonfinite_model_round', 'corruption_weight_share')


def _uses(name: str, flags: dict) -> bool:
  """Whether a run with these flags uses flag `name` (`flag_users`, and its selectors in turn; a selector the
  flags lack, as an older run's: yes)."""
  users = flag_users.FLAG_USERS.get(name)
  if users is None or not set(users.selectors) <= set(flags):
    return True
  return flag_users.is_used(name, flags) and all(_uses(selector, flags) for selector in users.selectors)


def run_settings_tuple(flags: dict, seed: int) -> tuple:
  """The `Record.settings` of a run with these flags (recorded settings and summary extras; algorithm and
  corruption included): the used ones outside `_AXES` and `_OUTCOMES`, sorted; a split_seed equal to the seed
  reads 'seed' (a split drawn per seed)."""
  settings = {name: tuple(value) if isinstance(value, list) else value for name, value in flags.items()
              if name not in _AXES and name not in _OUTCOMES and '/' not in name and _uses(name, flags)}
  if 'split_seed' in settings and settings['split_seed'] == seed:
    settings['split_seed'] = 'seed'
  return tuple(sorted(settings.items()))


def records_from_summary(summary: dict, recorded: Optional[dict] = None, source: str = '') -> Record:
  """The record of one `summary.json` (and the run's `run_settings.json`, `recorded`); personalised runs are scored
  with the devices' personal models, and personalized_rfa with 1 secure average per round (--rfa_num_passes=1)
  is personalised FedAvg."""
  flags = {**(recorded or {}), **summary}  # the summary's values are the run's own (e.g. clients_per_round)
  if 'total_rounds' not in flags and 'rounds' in summary and 'nonfinite_model_round' not in summary:
    flags['total_rounds'] = summary['rounds']  # summaries before total_rounds was recorded
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
      settings=run_settings_tuple(flags, int(summary['seed'])), source=source,
  )


def summary_record(path: str) -> Record:
  """The record of the `summary.json` at `path`, with the settings of the run_settings.json beside it if any."""
  with open(path) as f:
    summary = json.load(f)
  return records_from_summary(summary, run_settings.read(os.path.dirname(path)), source=os.path.dirname(path))


def records_from_csv(path: str, task: str) -> list[Record]:
  """Records of a robustness-sweep or superquantile-tables results.csv (recognised by their columns), with the
  settings of the sweep's run_settings.json beside it if any."""
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return []
  shared = {name: value for name, value in (run_settings.read(os.path.dirname(path)) or {}).items() if name != 'task'}
  settings = lambda algorithm, corruption, seed: run_settings_tuple(
      {**shared, 'algorithm': algorithm, 'corruption': corruption}, seed)
  if {'algorithm', 'corruption', 'fraction', 'accuracy'} <= set(rows[0]):
    return [Record(kind='rfa', task=task, algorithm=r['algorithm'], seed=int(r['seed']), corruption=r['corruption'],
                   fraction=float(r['fraction']), accuracy=_float(r['accuracy']),
                   settings=settings(r['algorithm'], r['corruption'], int(r['seed'])), source=f'{path} row {number}')
            for number, r in enumerate(rows, start=2)]
  if {'method', 'conformity_level', 'error_p90', 'error_mean'} <= set(rows[0]):
    records = []
    for number, r in enumerate(rows, start=2):
      theta, algorithm = float(r['conformity_level']), 'fedavg' if r['method'] == 'FedAvg' else 'delta_fl'
      records.append(Record(kind='dfl', task=task, algorithm=algorithm,
                            seed=int(r['seed']), conformity_level=theta, accuracy=_float(r.get('accuracy')),
                            error_p90=_float(r['error_p90']), error_mean=_float(r['error_mean']),
                            settings=settings(algorithm, 'none', int(r['seed'])), source=f'{path} row {number}'))
    return records
  raise ValueError(f'{path}: not a results.csv of experiments.robustness_sweep or experiments.superquantile_tables '
                   f'(columns {sorted(rows[0])})')


def run_directories(inputs: Iterable[str], required: Iterable[str]) -> list[str]:
  """Every directory below the directories among `inputs` ('TASK=' prefixes ignored) that holds all files named in
  `required`, sorted per input; inputs that are files (a summary.json, a sweep's results.csv) are skipped. Links are
  followed (a run that two results directories share is linked from one into the other), and a directory reached
  twice, through a link or another input, is read once."""
  required = set(required)
  found, seen = [], set()
  for spec in inputs:
    path = spec.rpartition('=')[2]
    if not os.path.isdir(path):
      continue
    below = []
    for root, directories, files in os.walk(path, followlinks=True):
      if os.path.realpath(root) in seen:
        directories[:] = []  # read already (and a link cycle ends here)
        continue
      seen.add(os.path.realpath(root))
      if required <= set(files):
        below.append(root)
    found += sorted(below)
  return found


def load_records(inputs: Iterable[str], default_task: str = 'digits') -> list[Record]:
  """Records of `inputs`: directories (every summary.json below), summary.json or results.csv files, each
  optionally 'TASK=PATH' to name the task of a results.csv (default `default_task`)."""
  records = [summary_record(os.path.join(root, 'summary.json')) for root in run_directories(inputs, ('summary.json',))]
  for spec in inputs:
    task, _, path = spec.rpartition('=') if '=' in spec else (default_task, '', spec)
    task = task or default_task
    if os.path.isdir(path):
      continue  # read above, each run once
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


@dataclasses.dataclass(frozen=True)
class RfaPanel:
  """One RFA table (and figure panel): a task and corruption, the settings that tell its runs from the task's
  other runs (`label`, '' if none), and its rows (row name, algorithm, the runs: clean and corrupted)."""

  task: str
  corruption: str
  label: str
  rows: tuple[tuple[str, str, tuple[Record, ...]], ...]

  @property
  def runs(self) -> list[Record]:
    return [r for _, _, runs in self.rows for r in runs]

  @property
  def title(self) -> str:
    corruption = 'no corruption' if self.corruption == 'none' else f'{self.corruption} corruption'
    return f'{self.task}: {corruption}' + (f', {self.label}' if self.label else '')


def rfa_panels(records: Sequence[Record]) -> list[RfaPanel]:
  """The RFA layout of `records` (those with a final accuracy): per task, per group of common settings, per
  corruption and group of its attack's settings, the rows of each algorithm's groups of its own settings. The
  rho = 0 runs are shared by every corruption (the sweep runs them once, with corruption 'none').

  Raises:
    ValueError: two runs of one cell (row x rho) have the same seed.
  """
  panels = []
  records = rfa_accuracy_records(records)
  for task in sorted({r.task for r in records}):
    for condition, condition_runs in setting_groups.groups([r for r in records if r.task == task], 'common'):
      clean = [r for r in condition_runs if r.corruption == 'none' or r.fraction == 0.0]
      corruptions = sorted({r.corruption for r in condition_runs if r.corruption != 'none'}) or ['none']
      for corruption in corruptions:
        attacked = [r for r in condition_runs if r.corruption == corruption and r.fraction > 0.0]
        for variant, variant_runs in setting_groups.groups(attacked, 'corruption') or [('', [])]:
          selected = variant_runs + clean
          rows = []
          for algorithm in order_algorithms(r.algorithm for r in selected):
            for own, runs in setting_groups.groups([r for r in selected if r.algorithm == algorithm], 'algorithm'):
              name = f'{algorithm} ({own})' if own else algorithm
              for fraction in sorted({r.fraction for r in runs}):
                setting_groups.check_one_run_per_seed(
                    [r for r in runs if r.fraction == fraction], f'{task}, {corruption}, {name} at ρ={fraction:g}')
              rows.append((name, algorithm, tuple(runs)))
          label = ', '.join(part for part in (variant, condition) if part)
          panels.append(RfaPanel(task, corruption, label, tuple(rows)))
  return panels


def rfa_tables(records: Sequence[Record], published: dict) -> str:
  """Markdown: per `rfa_panels` panel, accuracy (%) mean ± std over seeds by row x rho, then the paper's numbers."""
  lines = ['# RFA (Fig. 2/3/5/6 layout): final test accuracy (%), mean ± std over seeds', '']
  published_numbers = published['rfa']['numbers']
  for panel in rfa_panels(records):
    task, corruption, selected = panel.task, panel.corruption, panel.runs
    dataset = RFA_DATASETS.get(task)
    fractions = sorted({r.fraction for r in selected})
    cell_runs = {(name, f): [r for r in runs if r.fraction == f] for name, _, runs in panel.rows for f in fractions}
    header = ['algorithm', 'source'] + [f'ρ={f:g}' for f in fractions]
    rows = [[name, f'ours ({task})'] + [format_mean_std([r.accuracy for r in cell_runs[name, f]]) for f in fractions]
            for name, _, _ in panel.rows]
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
    lines += [f'## {panel.title}', ''] + _markdown(header, rows + paper_rows) + ['']
    seeds = {r.seed for r in selected}
    fewer = [f'{name} at ρ={f:g} {_seeds_note(cell_runs[name, f])}' for name, _, _ in panel.rows for f in fractions
             if cell_runs[name, f] and {r.seed for r in cell_runs[name, f]} != seeds]
    note = f'Ours: {_seeds_note(selected)}' + (f', but {"; ".join(fewer)}' if fewer else '')
    note += '; ρ = share of training examples on corrupted devices.'
    if dataset is not None and not task.startswith(dataset.split('_')[0]):
      note += (f' The paper rows are its {dataset} numbers (a different dataset: for orientation only).')
    sources = sorted({p['source'] for p in published_numbers if p['dataset'] == dataset})
    if sources:
      note += ' Paper sources: ' + '; '.join(sources) + '.'
    lines += [note, '']
  return '\n'.join(lines)


def dfl_rows(records: Sequence[Record]) -> list[tuple[str, str, list[Record]]]:
  """The Delta-FL layout's rows of `records` (the 'dfl' kind): (task, the settings that tell the row's runs from
  the task's other runs, '' if none, the runs), per task and group of common settings."""
  records = [r for r in records if r.kind == 'dfl']
  return [(task, label, runs) for task in sorted({r.task for r in records})
          for label, runs in setting_groups.groups([r for r in records if r.task == task], 'common')]


def dfl_cell(runs: Sequence[Record], algorithm: str, theta: float, where: str) -> list[Record]:
  """The runs of one Delta-FL column; ValueError if they differ in the algorithm's own settings (the table has one
  cell for them) or two share a seed."""
  cell = [r for r in runs if r.algorithm == algorithm and math.isclose(r.conformity_level, theta)]
  variants = setting_groups.groups(cell, 'algorithm')
  if len(variants) > 1:
    raise ValueError(f'{where}, {algorithm} θ={theta:g}: runs differ in {"; ".join(label for label, _ in variants)}, '
                     'one cell of the Delta-FL table; report them apart (separate --inputs)')
  setting_groups.check_one_run_per_seed(cell, f'{where}, {algorithm} θ={theta:g}')
  return cell


def dfl_tables(records: Sequence[Record], published: dict) -> str:
  """Markdown: the Delta-FL paper's Tables 2 and 3, our rows (`dfl_rows`, mean ± std over seeds) above the paper's."""
  paper = published['superquantile_fl']['numbers']
  lines = ['# Superquantile FL (Δ-FL) Tables 2–3: test-device misclassification error (%), mean ± std over seeds', '']
  header = ['dataset', 'model', 'source'] + [label for label, _, _ in DFL_COLUMNS]
  for metric, title in DFL_METRICS:
    rows = []
    for task, label, runs in dfl_rows(records):
      dataset = DFL_DATASETS.get(task)
      names = [(p['dataset_name'], p['model']) for p in paper if p['dataset'] == dataset][:1] or [(task, '—')]
      cells = [format_mean_std([getattr(r, metric) for r in dfl_cell(runs, algorithm, theta, task)
                                if getattr(r, metric) is not None]) for _, algorithm, theta in DFL_COLUMNS]
      rows.append([*names[0], f'ours ({", ".join(p for p in (task, label) if p)}, {_seeds_note(runs)})'] + cells)
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
