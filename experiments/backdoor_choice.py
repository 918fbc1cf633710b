"""Choosing a backdoor defence's hyperparameters on validation runs: accuracy, with the worst ASR as the constraint.

The candidates are the defences of a validation sweep (`experiments.robustness_sweep --validation_fraction=...`),
grouped into families by their spec without parameters (`weak_dp(m=1.0,sigma=0.01)` is of family `weak_dp`,
`rlr(theta=4)>mean` of `rlr>mean`). For each candidate at the corruption level rho of the choice:
  worst ASR  the largest mean validation ASR over the targeted attacks at rho (`backdoor_tables.worst_asr`);
  accuracy   the mean clean validation accuracy (rho = 0).
Within a family, the eligible candidates are those whose worst ASR is at most the family's lowest worst ASR plus
`tolerance` (0.05: 13 of the 254 triggered validation inputs of the digits task's 20% split); the chosen one
is the eligible candidate of highest accuracy, then of lower worst ASR, then the first listed. So a setting that
resists the backdoor best is kept unless another one within `tolerance` of it is more accurate. A candidate missing
its clean run or a targeted attack at rho is not eligible (its worst ASR is unknown) and is listed as such.

Imports no TensorFlow and defines no flags (`experiments.backdoor_report --choose_fraction` runs it).
"""

import dataclasses
import re
from typing import Optional, Sequence

from experiments import backdoor_tables

TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A defence's validation measurements at rho: mean clean accuracy and worst mean ASR (None: not measured)."""

  defence: str
  accuracy: Optional[float]
  worst_asr: Optional[float]
  attack: Optional[str]

  @property
  def complete(self) -> bool:
    return self.accuracy is not None and self.worst_asr is not None


def family(defence: str) -> str:
  """The defence spec without its parameters: `rlr(theta=4)>weak_dp(m=1.0,sigma=0.01)` -> `rlr>weak_dp`."""
  return re.sub(r'\([^()]*\)', '', defence)


def candidates(rows: Sequence[dict], fraction: float) -> list[Candidate]:
  """Every defence of `rows` (in order of appearance) with its clean accuracy and worst ASR at `fraction`."""
  table = backdoor_tables.cells(rows)
  worst = backdoor_tables.worst_asr(rows, fraction)
  result = []
  for defence in dict.fromkeys(row['algorithm'] for row in rows):
    clean = table.get((defence, 'none', 0.0), {}).get(backdoor_tables.ACCURACY)
    attack, cell = worst.get(defence, (None, {}))
    result.append(Candidate(defence, None if clean is None else clean.mean,
                            cell[backdoor_tables.ASR].mean if cell else None, attack))
  return result


def choose(rows: Sequence[dict], fraction: float, tolerance: float = TOLERANCE) -> dict:
  """family -> the chosen `Candidate` (see the module docstring), for every family with a complete candidate.

  Raises:
    ValueError: if the rows hold no targeted attack at `fraction`, or `tolerance` is negative or not finite.
  """
  if not 0 <= tolerance < float('inf'):
    raise ValueError(f'tolerance must be a finite number >= 0, got {tolerance}')
  if not backdoor_tables.targeted_attacks(rows, fraction):
    raise ValueError(f'rows hold no targeted attack at fraction={fraction:g}: nothing to choose by')
  families = {}
  for candidate in candidates(rows, fraction):
    if candidate.complete:
      families.setdefault(family(candidate.defence), []).append(candidate)
  # max keeps the first of equal keys: highest accuracy, then lowest worst ASR, then the order listed
  return {name: max(_eligible(members, tolerance), key=lambda c: (c.accuracy, -c.worst_asr))
          for name, members in families.items()}


def _eligible(members: Sequence[Candidate], tolerance: float) -> list[Candidate]:
  """The complete `members` whose worst ASR is within `tolerance` of the lowest among them (1e-12: rounding)."""
  complete = [c for c in members if c.complete]
  if not complete:
    return []
  lowest = min(c.worst_asr for c in complete)
  return [c for c in complete if c.worst_asr <= lowest + tolerance + 1e-12]


def choice_table(rows: Sequence[dict], fraction: float, tolerance: float = TOLERANCE) -> str:
  """Markdown: every candidate by family, its clean accuracy, worst ASR and attack, whether it was eligible and
  which one was chosen."""
  chosen = choose(rows, fraction, tolerance)
  lines = [f'Validation at rho = {fraction:g}: the highest clean accuracy among the settings whose worst ASR is within '
           f'{tolerance:g} of their family\'s lowest', '',
           '| family | defence | clean accuracy | worst ASR | attack | eligible | chosen |',
           '|---|---|---|---|---|---|---|']
  by_family = {}
  for candidate in candidates(rows, fraction):
    by_family.setdefault(family(candidate.defence), []).append(candidate)
  for name, members in by_family.items():
    for c in members:
      if not c.complete:
        lines.append(f'| {name} | {c.defence} | {_text(c.accuracy)} | {_text(c.worst_asr)} | - | no (runs missing) '
                     '| |')
        continue
      mark = '**yes**' if chosen.get(name) == c else ''
      lines.append(f'| {name} | {c.defence} | {c.accuracy:.3f} | {c.worst_asr:.3f} | {c.attack} | '
                   f'{"yes" if c in _eligible(members, tolerance) else "no"} | {mark} |')
  return '\n'.join(lines) + '\n'


def _text(value: Optional[float]) -> str:
  return '-' if value is None else f'{value:.3f}'
