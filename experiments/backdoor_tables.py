"""Backdoor tables of a robustness sweep: each defence's accuracy and attack success rate (ASR) under the targeted
attacks, its worst ASR over them, and the ASR after the attackers stop.

For one corruption level rho, one row per defence (an algorithm or a defence chain of the sweep):
  clean accuracy    its accuracy at rho = 0;
  worst ASR         the largest mean ASR over the targeted attacks at rho, the attack reaching it, the mean accuracy
                    under that attack, and (with a sweep's --rounds_after_attack N > 0) that attack's ASR N rounds
                    after its attackers stopped;
and a second table with every targeted attack's accuracy, ASR and ASR N rounds later. Each value is the mean
[min, max] over seeds. As in `worst_case_tables`, means over seeds come first and the maximum over attacks second:
the attacker picks one attack for the whole run. Accuracy and ASR are those at the end of the attack: the
evaluation at round T = total_rounds - N (the rows' `*_at_attack_end` columns, `experiments.targeted_runs`) when the
sweep had N > 0, else the final one; the clean accuracy likewise (the clean run's evaluation at round T). The ASR N
rounds later is the final evaluation's.

Rows are those of `experiments.robustness_sweep`'s results.csv (numbers as numbers or text; a row of an
untargeted attack is ignored), so the tables can be rebuilt from any results file, also one of a sweep still running:
a value from fewer seeds than the table's others says how many (`(2 seeds)`), a missing run is `-`, and a defence
missing a targeted attack at rho has no worst ASR (`- (missing: ...)` names the attacks).

  python -m experiments.backdoor_report --results=DIR/results.csv     # backdoor.md and backdoor_asr.png beside it

Imports no TensorFlow and defines no flags (the robustness sweep writes these tables).
"""

import collections
import dataclasses
from typing import Iterable, Optional, Sequence

import numpy as np

from experiments import targeted_runs
from tff_robust.core.attacks import targeted_catalog

ACCURACY, ASR, ASR_AFTER = 'accuracy', 'asr', 'asr_after'


@dataclasses.dataclass(frozen=True)
class Stat:
  """Mean, minimum and maximum of a value over `count` seeds."""

  mean: float
  low: float
  high: float
  count: int

  @classmethod
  def of(cls, values: Sequence[float]) -> 'Stat':
    return cls(float(np.mean(values)), float(min(values)), float(max(values)), len(values))

  def text(self, seeds: int) -> str:
    """`mean [min, max]` (the mean alone for one seed), with the seed count when it is below `seeds`."""
    text = f'{self.mean:.3f}' if self.count == 1 else f'{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]'
    return text if self.count >= seeds else f'{text} ({_count(self.count, "seed")})'


def _number(value) -> Optional[float]:
  return None if value is None or value == '' else float(value)


def targeted_attacks(rows: Iterable[dict], fraction: Optional[float] = None) -> list[str]:
  """The targeted attacks (canonical specs) of `rows`, at corruption level `fraction` if given, sorted."""
  return sorted({row['corruption'] for row in rows if targeted_runs.is_targeted(row['corruption'])
                 and (fraction is None or float(row['fraction']) == fraction)})


def rounds_after_attack(rows: Iterable[dict]) -> Optional[int]:
  """N of the rows' sweep (`rounds_after_attack`), or None if its attackers attacked to the end.

  Raises:
    ValueError: if the rows come from sweeps with different N.
  """
  values = {int(float(row['rounds_after_attack'])) for row in rows if _number(row.get('rounds_after_attack'))}
  if len(values) > 1:
    raise ValueError(f'rows of sweeps with different rounds_after_attack: {sorted(values)}')
  return values.pop() if values else None


def cells(rows: Iterable[dict]) -> dict:
  """(defence, corruption, fraction) -> {ACCURACY, ASR, ASR_AFTER: `Stat` over seeds} for the clean runs (corruption
  'none', only ACCURACY) and the targeted attacks; a metric a run did not measure is absent."""
  values = collections.defaultdict(lambda: collections.defaultdict(list))
  for row in rows:
    kind = row['corruption']
    if kind != 'none' and not targeted_runs.is_targeted(kind):
      continue
    at_end = _number(row.get('attack_end_round')) is not None
    measured = {
        ACCURACY: _number(row['accuracy_at_attack_end'] if at_end else row['accuracy']),
        ASR: _number(row.get('attack_success_rate_at_attack_end' if at_end else 'attack_success_rate')),
        ASR_AFTER: _number(row.get('attack_success_rate')) if at_end else None,
    }
    key = (row['algorithm'], kind, float(row['fraction']))
    for metric, value in measured.items():
      if value is not None and (metric == ACCURACY or kind != 'none'):
        values[key][metric].append(value)
  return {key: {metric: Stat.of(v) for metric, v in metrics.items()} for key, metrics in values.items()}


def worst_asr(rows: Sequence[dict], fraction: float, attacks: Optional[Sequence[str]] = None) -> dict:
  """defence -> (attack, its cell: {metric: Stat}) of the largest mean ASR over `attacks` (default: every targeted
  attack at `fraction`), the first of `attacks` on a tie. A defence missing any of them (or its ASR) is left out."""
  table = cells(rows)
  attacks = targeted_attacks(rows, fraction) if attacks is None else attacks
  result = {}
  for defence in dict.fromkeys(row['algorithm'] for row in rows):
    found = [(attack, table.get((defence, attack, fraction), {})) for attack in attacks]
    if attacks and all(ASR in cell for _, cell in found):
      result[defence] = max(found, key=lambda item: item[1][ASR].mean)  # max keeps the first of equal ones
  return result


def backdoor_table(rows: Sequence[dict], fraction: float) -> str:
  """Markdown: at corruption level `fraction`, each defence's clean accuracy and worst ASR over the targeted attacks
  (with the attack, the accuracy there and its ASR N rounds after the attackers stopped), then every attack's
  accuracy, ASR and later ASR. Mean [min, max] over seeds; see the module docstring for the cells.

  Raises:
    ValueError: if the rows hold no targeted attack at `fraction`.
  """
  attacks = targeted_attacks(rows, fraction)
  if not attacks:
    raise ValueError(f'rows hold no targeted attack ({", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)}) at '
                     f'fraction={fraction:g}')
  table = cells(rows)
  after = rounds_after_attack(rows)
  seeds = max(stat.count for (_, kind, f), cell in table.items() if f == fraction or kind == 'none'
              for stat in cell.values())
  calls = {row['algorithm']: float(row['calls_per_round']) for row in rows}
  worst = worst_asr(rows, fraction, attacks)
  defences = list(dict.fromkeys(row['algorithm'] for row in rows))

  def cell(key, metric):
    stat = table.get(key, {}).get(metric)
    return '-' if stat is None else stat.text(seeds)

  later = [] if after is None else [f'ASR {_count(after, "round")} after the attackers stop']
  lines = [f'Mean [min, max] over {_count(seeds, "seed")} at rho = {fraction:g}; the worst ASR over the '
           f'{_count(len(attacks), "targeted attack")}', '',
           _header(['defence', 'calls/round', 'clean accuracy', 'worst ASR', 'attack', 'accuracy there'] + later)]
  for defence in defences:
    if defence in worst:
      attack, there = worst[defence]
      worst_cells = [f'**{there[ASR].text(seeds)}**', attack, cell((defence, attack, fraction), ACCURACY)]
      worst_cells += [cell((defence, attack, fraction), ASR_AFTER)] * len(later)
    else:
      missing = [a for a in attacks if ASR not in table.get((defence, a, fraction), {})]
      worst_cells = [f'- (missing: {", ".join(missing)})', '-', '-'] + ['-'] * len(later)
    lines.append(f'| {defence} | {calls[defence]:g} | {cell((defence, "none", 0.0), ACCURACY)} | '
                 + ' | '.join(worst_cells) + ' |')
  metrics = [(ACCURACY, 'accuracy'), (ASR, 'ASR')] + ([(ASR_AFTER, f'ASR +{after}')] if after is not None else [])
  note = f' (ASR +{after}: {_count(after, "round")} after the attackers stop)' if later else ''
  lines += ['', f'Every targeted attack{note}',
            '', _header(['defence'] + [f'{attack}: {name}' for attack in attacks for _, name in metrics])]
  for defence in defences:
    lines.append(f'| {defence} | ' + ' | '.join(cell((defence, attack, fraction), metric)
                                                for attack in attacks for metric, _ in metrics) + ' |')
  return '\n'.join(lines) + '\n'


def _count(number: int, noun: str) -> str:
  return f'{number} {noun}{"" if number == 1 else "s"}'


def _header(columns: Sequence[str]) -> str:
  """A markdown table's header and rule lines."""
  return '| ' + ' | '.join(columns) + ' |\n' + '|---' * len(columns) + '|'


def write_backdoor_tables(rows: Sequence[dict], path: str) -> None:
  """`path`: one `backdoor_table` per corruption level of `rows` that has a targeted attack.

  Raises:
    ValueError: if the rows hold no targeted attack.
  """
  fractions = sorted({float(r['fraction']) for r in rows if targeted_runs.is_targeted(r['corruption'])})
  if not fractions:
    raise ValueError(f'rows hold no targeted attack ({", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)}): a backdoor '
                     'table needs one')
  sections = ['# Backdoors: accuracy and attack success rate (ASR) per defence, the worst ASR over the targeted '
              'attacks', '']
  for fraction in fractions:
    sections += [f'## rho = {fraction:g}', '', backdoor_table(rows, fraction)]
  with open(path, 'w') as f:
    f.write('\n'.join(sections))
