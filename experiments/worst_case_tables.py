"""Worst-case tables of a robustness sweep: each defence against the whole attack suite, its worst case last.

A defence is judged by its worst case over the attacks it may meet, not by the attack it happens to resist (ByzFL's
heatmaps report the same). For one corruption level rho, a row per defence (algorithm or defence chain) and a column
per attack hold the mean final accuracy over seeds; the row's `worst` is the smallest of those means, named by its
attack, beside the clean accuracy (rho = 0) and the secure-average calls per round. Means over seeds come first and
the minimum over attacks second: the worst case is that of an attacker who picks one attack for the whole run.

Rows are the `results.csv` rows of `experiments.robustness_sweep` (parsed: `fraction` float, `accuracy` float), so
the tables can be rebuilt from any results file, also one of a sweep still running or stopped (its missing runs
are `-` cells and its incomplete rows have no worst case), or the same rows read from the runner's run directories
(`rows_from_runs`: one per `summary.json`, the defence chain or else the algorithm naming the row):

  python -m experiments.worst_case_tables --results=DIR/results.csv [--output=DIR/worst_case.md]
  python -m experiments.worst_case_tables --runs=DIR/runs --output=DIR/worst_case.md

Imports no TensorFlow.
"""

import collections
import csv
import json
import os
from typing import Iterable, Optional, Sequence

from absl import app
from absl import flags
import numpy as np

from experiments import paper_tables
from tff_robust.command_line import finite_flags

_RESULTS = flags.DEFINE_string('results', None, 'A results.csv of experiments.robustness_sweep, finished or not.')
_RUNS = flags.DEFINE_multi_string('runs', None, 'Instead of --results: directories holding run directories of the '
                                  'runner (every summary.json below them, links followed).')
_OUTPUT = flags.DEFINE_string('output', None, 'The tables (markdown); default: worst_case.md beside --results '
                              '(required with --runs).')


def mean_accuracies(rows: Iterable[dict]) -> dict:
  """(algorithm, corruption, fraction) -> (mean accuracy over seeds, number of seeds)."""
  accuracies = collections.defaultdict(list)
  for row in rows:
    accuracies[(row['algorithm'], row['corruption'], float(row['fraction']))].append(float(row['accuracy']))
  return {key: (float(np.mean(values)), len(values)) for key, values in accuracies.items()}


def worst_cases(rows: Sequence[dict], fraction: float, attacks: Optional[Sequence[str]] = None) -> dict:
  """defence -> (worst mean accuracy, attack reaching it) over `attacks` (default: every corruption at `fraction`).

  A defence missing any of the attacks at `fraction` is left out: its worst case is not known.
  """
  means = mean_accuracies(rows)
  if attacks is None:
    attacks = sorted({c for (_, c, f) in means if f == fraction and c != 'none'})
  result = {}
  for defence in dict.fromkeys(row['algorithm'] for row in rows):
    cells = [(means[(defence, attack, fraction)][0], attack) for attack in attacks
             if (defence, attack, fraction) in means]
    if cells and len(cells) == len(attacks):
      result[defence] = min(cells)
  return result


def worst_case_table(rows: Sequence[dict], fraction: float, *, title: str = '') -> str:
  """Markdown: defences x attacks at corruption level `fraction`, mean accuracy over seeds, worst case last.

  Columns: the defence, secure-average calls per round, clean accuracy, one per attack, the worst mean and its
  attack. Cells with fewer seeds than the table's most are marked with their count (e.g. `0.912 (2)`); a missing
  run is `-`, and then that row has no worst case.
  """
  means = mean_accuracies(rows)
  attacks = sorted({c for (_, c, f) in means if f == fraction and c != 'none'})
  if not attacks:
    raise ValueError(f'rows hold no attacked run at fraction={fraction:g}')
  seeds = max(n for (_, c, f), (_, n) in means.items() if f == fraction or c == 'none')
  calls = {row['algorithm']: float(row['calls_per_round']) for row in rows}
  worst = worst_cases(rows, fraction, attacks)

  def cell(key):
    if key not in means:
      return '-'
    mean, count = means[key]
    return f'{mean:.3f}' + ('' if count == seeds else f' ({count})')

  lines = [title or f'Mean final accuracy over {seeds} seeds at rho = {fraction:g}; worst case over the {len(attacks)} '
           'attacks last', '',
           '| defence | calls/round | clean | ' + ' | '.join(attacks) + ' | worst | worst attack |',
           '|---|---|---|' + '---|' * len(attacks) + '---|---|']
  for defence in dict.fromkeys(row['algorithm'] for row in rows):
    worst_cell = (f'**{worst[defence][0]:.3f}**', worst[defence][1]) if defence in worst else ('-', '-')
    lines.append(f'| {defence} | {calls[defence]:g} | {cell((defence, "none", 0.0))} | '
                 + ' | '.join(cell((defence, attack, fraction)) for attack in attacks)
                 + f' | {worst_cell[0]} | {worst_cell[1]} |')
  return '\n'.join(lines) + '\n'


def write_worst_case_tables(rows: Sequence[dict], path: str) -> None:
  """`path`: one worst-case table per attacked corruption level of `rows` (data corruption counts as an attack)."""
  fractions = sorted({float(r['fraction']) for r in rows if r['corruption'] != 'none'})
  sections = ['# Worst case over the attack suite: mean final accuracy over seeds, defence x attack', '']
  for fraction in fractions:
    sections += [f'## rho = {fraction:g}', '', worst_case_table(rows, fraction)]
  with open(path, 'w') as f:
    f.write('\n'.join(sections))


def rows_from_runs(inputs: Iterable[str]) -> list[dict]:
  """`results.csv`-like rows of the runner's run directories below `inputs`: the row's name is the run's defence
  chain (`--defence`) or else its algorithm; accuracy its final `eval/accuracy`; calls per round its secure-average
  calls over its rounds. A run without a final accuracy (stopped before its first evaluation) is left out."""
  rows = []
  for directory in paper_tables.run_directories(inputs, ['summary.json']):
    with open(os.path.join(directory, 'summary.json')) as f:
      summary = json.load(f)
    if summary.get('eval/accuracy') is None:
      continue
    rows.append(dict(algorithm=summary.get('defence') or summary['algorithm'],
                     corruption=summary.get('corruption', 'none'), fraction=summary.get('corruption_fraction', 0.0),
                     seed=summary['seed'], accuracy=summary['eval/accuracy'],
                     calls_per_round=summary['secure_average_calls'] / summary['rounds']))
  return rows


def read_rows(path: str) -> list[dict]:
  """The rows of a `results.csv` (values as strings; the tables parse the numbers they use)."""
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  if _RUNS.value:
    if _RESULTS.value or not _OUTPUT.value:
      raise app.UsageError('--runs takes --output and no --results')
    rows, output = rows_from_runs(_RUNS.value), _OUTPUT.value
    if not rows:
      raise app.UsageError(f'--runs: no run with a final accuracy below {_RUNS.value}')
  else:
    if not _RESULTS.value or not os.path.isfile(_RESULTS.value):
      raise app.UsageError(f'--results must be an existing results.csv file, got {_RESULTS.value!r}')
    output = _OUTPUT.value or os.path.join(os.path.dirname(_RESULTS.value), 'worst_case.md')
    rows = read_rows(_RESULTS.value)
  write_worst_case_tables(rows, output)
  print(f'{len(rows)} runs; wrote {output}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
