"""One figure of every worst-case table: each defence's worst case over the attack suite, setting by setting.

  python -m experiments.worst_case_figure --root=results/robustness_worst_case_digits \
      [--figure=ROOT/worst_case_summary.png]

Every `results.csv` of `experiments.robustness_sweep` one level below `--root` is a setting (its directory name,
e.g. `dirichlet0.5_epochs5_rho0.2`); each attacked corruption level rho in it is one group of bars, one bar per
defence: its worst case (`worst_case_tables.worst_cases`: the smallest mean over seeds among the attacks), with a
dot at its clean accuracy. A defence missing any attack of a setting has no bar there. Imports no TensorFlow.
"""

import glob
import os

from absl import app
from absl import flags
import numpy as np

from experiments import worst_case_tables
from tff_robust.command_line import finite_flags

_ROOT = flags.DEFINE_string('root', None, 'A directory whose subdirectories hold robustness_sweep results.csv files.')
_FIGURE = flags.DEFINE_string('figure', None, 'The figure (PNG); default: worst_case_summary.png in --root.')


def summary(root: str) -> dict:
  """(setting, rho) -> {defence: (worst mean accuracy, its attack, clean mean accuracy)}, settings in name order.

  Raises:
    ValueError: if no subdirectory of `root` holds a results.csv.
  """
  paths = sorted(glob.glob(os.path.join(root, '*', 'results.csv')))
  if not paths:
    raise ValueError(f'no */results.csv below {root!r}')
  groups = {}
  for path in paths:
    rows = worst_case_tables.read_rows(path)
    setting = os.path.basename(os.path.dirname(path))
    means = worst_case_tables.mean_accuracies(rows)
    for fraction in sorted({float(r['fraction']) for r in rows if r['corruption'] != 'none'}):
      groups[(setting, fraction)] = {
          defence: (accuracy, attack, means.get((defence, 'none', 0.0), (float('nan'), 0))[0])
          for defence, (accuracy, attack) in worst_case_tables.worst_cases(rows, fraction).items()
      }
  return groups


def plot(groups: dict, path: str) -> None:
  """Grouped bars: one group per (setting, rho), one bar per defence (its worst case), a dot at its clean accuracy."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  defences = list(dict.fromkeys(d for group in groups.values() for d in group))
  width = 0.8 / len(defences)
  figure, axis = plt.subplots(figsize=(max(8.0, 1.6 * len(groups)), 6.0))
  for index, defence in enumerate(defences):
    positions = [g + (index - (len(defences) - 1) / 2) * width for g in range(len(groups))]
    values = [group.get(defence, (np.nan, '', np.nan)) for group in groups.values()]
    bars = axis.bar(positions, [v[0] for v in values], width, label=defence)
    axis.plot(positions, [v[2] for v in values], 'o', color=bars.patches[0].get_facecolor(), markersize=4,
              markeredgecolor='black', markeredgewidth=0.5)
  axis.set_xticks(range(len(groups)))
  axis.set_xticklabels([setting.replace('_', '\n') + f'\nrho = {fraction:g}' for setting, fraction in groups],
                       fontsize=8)
  axis.set(ylabel='worst case over the attacks (bar), clean (dot)', ylim=(0, 1),
           title='Worst case over the attack suite, mean over seeds')
  axis.grid(axis='y', alpha=0.3)
  axis.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.3), ncol=3)
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  if not _ROOT.value or not os.path.isdir(_ROOT.value):
    raise app.UsageError(f'--root must be an existing directory, got {_ROOT.value!r}')
  try:
    groups = summary(_ROOT.value)
  except ValueError as error:
    raise app.UsageError(f'--root: {error}') from error
  output = _FIGURE.value or os.path.join(_ROOT.value, 'worst_case_summary.png')
  plot(groups, output)
  print(f'{len(groups)} settings; wrote {output}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
