"""The figures of the papers' layouts (`experiments.paper_tables`' records and rows), beside the published numbers.

Used by `experiments/paper_report.py`; matplotlib is imported on first use.
"""

from typing import Sequence

import numpy as np

from experiments import paper_tables


def plot_rfa(records: Sequence[paper_tables.Record], published: dict, path: str) -> None:
  """Accuracy (%) against rho, one panel per `paper_tables.rfa_panels` panel, one line per row (mean, min-max
  band; a marker at every point), the paper's numbers for the task's dataset as open markers."""
  panels = paper_tables.rfa_panels(records)
  if not panels:
    raise ValueError('records: no RFA-kind run with a final test accuracy (eval/accuracy) to plot')
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
  for ax, panel in zip(axes[0], panels):
    drawn = set()
    for index, (name, algorithm, runs) in enumerate(panel.rows):
      fractions = sorted({r.fraction for r in runs})
      values = [[100 * r.accuracy for r in runs if r.fraction == f] for f in fractions]
      color = f'C{index % 10}'
      ax.plot(fractions, [np.mean(v) for v in values], marker='o', color=color, label=name)
      ax.fill_between(fractions, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
      dataset = paper_tables.RFA_DATASETS.get(panel.task)
      paper = [p for p in published['rfa']['numbers'] if p['dataset'] == dataset and p['algorithm'] == algorithm
               and p['corruption'] in (panel.corruption, 'none') and 'qualifier' not in p]
      if paper and algorithm not in drawn:
        drawn.add(algorithm)
        ax.scatter([p['fraction'] for p in paper], [p['value'] for p in paper], facecolors='none', edgecolors=color,
                   marker='s', s=60, label=f'{algorithm}, paper ({dataset})')
    ax.set_title(panel.title, fontsize=9)
    ax.set(xlabel='corruption level ρ', ylabel='test accuracy (%)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def plot_dfl(records: Sequence[paper_tables.Record], path: str) -> None:
  """Grouped bars: 90th percentile and mean test-device error (%) per method, mean ± std over seeds, per
  `paper_tables.dfl_rows` row."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  rows = paper_tables.dfl_rows(records)
  fig, axes = plt.subplots(1, len(rows), figsize=(6 * len(rows), 4), squeeze=False)
  for ax, (task, settings, runs) in zip(axes[0], rows):
    positions = np.arange(len(paper_tables.DFL_COLUMNS))
    for offset, (metric, _) in zip((-0.2, 0.2), paper_tables.DFL_METRICS):
      cells = [paper_tables.dfl_cell(runs, algorithm, theta, task) for _, algorithm, theta in paper_tables.DFL_COLUMNS]
      stats = [paper_tables.mean_std([100 * getattr(r, metric) for r in cell if getattr(r, metric) is not None]
                                     or [np.nan]) for cell in cells]
      ax.bar(positions + offset, [m for m, _ in stats], 0.4, yerr=[s for _, s in stats], capsize=3,
             label='90th percentile (Table 2)' if metric == 'error_p90' else 'mean (Table 3)')
    ax.set_xticks(positions, [label for label, _, _ in paper_tables.DFL_COLUMNS])
    ax.set_title(f'{task}: test-device error' + (f'\n{settings}' if settings else ''), fontsize=9)
    ax.set(ylabel='misclassification error (%)')
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
