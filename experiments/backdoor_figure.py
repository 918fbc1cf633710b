"""The backdoor figure of a robustness sweep: each defence's worst attack success rate (ASR) over the targeted
attacks, one panel per corruption level.

A bar per defence is its worst mean ASR over seeds (`backdoor_tables.worst_asr`), its whisker the min-max over
seeds, its label the defence and that attack; a circle marks the mean accuracy under that attack and a cross its
ASR N rounds after the attackers stopped (a sweep's --rounds_after_attack), when measured. A defence missing a
targeted attack has no bar. Imports no TensorFlow and defines no flags.
"""

from typing import Sequence

import numpy as np

from experiments import backdoor_tables
from experiments import targeted_runs


def plot(rows: Sequence[dict], path: str) -> None:
  """Writes the figure of the targeted runs among `rows` (results.csv rows of the sweep) to `path` (PNG).

  Raises:
    ValueError: if the rows hold no targeted attack.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fractions = sorted({float(r['fraction']) for r in rows if targeted_runs.is_targeted(r['corruption'])})
  if not fractions:
    raise ValueError('rows hold no targeted attack: no backdoor figure')
  defences = list(dict.fromkeys(row['algorithm'] for row in rows))
  after = backdoor_tables.rounds_after_attack(rows)
  figure, axes = plt.subplots(1, len(fractions), figsize=(max(6.0, 1.3 * len(defences)) * len(fractions), 5.5),
                              squeeze=False)
  positions = np.arange(len(defences))
  for axis, fraction in zip(axes[0], fractions):
    worst = backdoor_tables.worst_asr(rows, fraction)
    cells = [worst[d][1] if d in worst else {} for d in defences]

    def means(metric):
      return np.array([cell[metric].mean if metric in cell else np.nan for cell in cells])

    asr = means(backdoor_tables.ASR)
    whiskers = [[m - cell[backdoor_tables.ASR].low if cell else 0.0 for m, cell in zip(asr, cells)],
                [cell[backdoor_tables.ASR].high - m if cell else 0.0 for m, cell in zip(asr, cells)]]
    axis.bar(positions, asr, 0.6, yerr=whiskers, capsize=3, color='tab:red', alpha=0.7, label='worst ASR')
    axis.plot(positions, means(backdoor_tables.ACCURACY), 'o', color='black', label='accuracy under that attack')
    if after is not None:
      axis.plot(positions, means(backdoor_tables.ASR_AFTER), 'x', color='tab:blue', markersize=9,
                label=f'its ASR {after} round{"" if after == 1 else "s"} after the attackers stop')
    axis.set_xticks(positions)  # each defence over the attack that gave its worst ASR at this rho
    axis.set_xticklabels([f'{d}\nworst: {worst[d][0]}' if d in worst else d for d in defences], rotation=30,
                         ha='right', fontsize=7)
    axis.set(ylim=(0, 1.3), ylabel='mean over seeds (whisker: min-max)',
             title=f'Worst ASR over the targeted attacks, rho = {fraction:g}')
    axis.grid(axis='y', alpha=0.3)
  axes[0][-1].legend(fontsize=7, loc='upper right')
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)
