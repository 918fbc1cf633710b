"""Tables and figures of the MtFEEL sweep (`experiments.mtfeel_sweep`): cohort share of alpha, results.md,
Fig. 4 and the alpha heat map. No flags, so tests and other scripts can import it.
"""

import collections

import matplotlib
import numpy as np

matplotlib.use('Agg')
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

# swept channel -> (its level's results.csv column, axis label, column heading of results.md, figure file)
SWEEPS = collections.OrderedDict(
    rayleigh=('snr_db', 'SNR (dB), BPSK over Rayleigh fading', 'SNR={:g} dB', 'fig4_snr.png'),
    bsc=('flip_probability', 'bit-flip probability p (binary symmetric channel)', 'p={:g}', 'fig4_flip.png'),
)
_ERROR_FREE_BASELINES = ('local_only', 'fedavg')  # dashed lines in Fig. 4


def cohort_share(alpha, labels) -> dict[str, float]:
  """Mean over devices k of sum_{m in cohort(k)} alpha_km: {'overall': ..., <cohort>: mean over its devices}.

  Args:
    alpha: [N, N] row-stochastic importance matrix (row k: model k's weights on the devices' data).
    labels: the hidden cohort of each of the N devices, in the order of alpha's rows and columns.
  """
  labels = np.asarray(labels)
  same_cohort = labels[:, None] == labels[None, :]
  shares = np.sum(np.where(same_cohort, alpha, 0.0), axis=1)
  return dict(overall=float(shares.mean()), **{c: float(shares[labels == c].mean()) for c in dict.fromkeys(labels)})


def cohort_share_line(alphas, labels) -> str:
  """results.md's line on the cohort share, mean over the given alphas (one per seed), with uniform alpha's."""
  shares = [cohort_share(alpha, labels) for alpha in alphas]
  mean = {key: float(np.mean([share[key] for share in shares])) for key in shares[0]}
  uniform = cohort_share(np.full([len(labels)] * 2, 1.0 / len(labels)), labels)
  text = lambda share: ', '.join(f'{key} {value:.3f}' for key, value in share.items())
  return (f'Cohort share of alpha (per device k, the sum of alpha_km over the devices m of its hidden cohort; mean '
          f'over devices; error-free MtFEEL, mean over {len(alphas)} seed(s)): {text(mean)}. Uniform alpha: '
          f'{text(uniform)}; block-diagonal alpha (the cohorts found exactly): 1.')


def _mean_std(values) -> str:
  return f'{np.mean(values):.3f} ± {np.std(values):.3f}'


def _error_free_table(rows) -> list[str]:
  lines = ['## Error-free uplink', '',
           '| method | accuracy, mean ± std | accuracy [min, max] | 90th pct. device error | train loss | s/round |',
           '|---|---|---|---|---|---|']
  for method in dict.fromkeys(r['method'] for r in rows):
    runs = [r for r in rows if r['method'] == method]
    accuracies = [r['accuracy'] for r in runs]
    lines.append(f'| {method} | {_mean_std(accuracies)} | [{min(accuracies):.3f}, {max(accuracies):.3f}] | '
                 f'{np.mean([r["error_p90"] for r in runs]):.3f} | {np.mean([r["train_loss"] for r in runs]):.3f} | '
                 f'{np.mean([r["seconds_per_round"] for r in runs]):.2f} |')
  return lines + ['']


def _sweep_table(rows, channel) -> list[str]:
  key, label, heading, _ = SWEEPS[channel]
  levels = sorted({r[key] for r in rows})
  lines = [f'## Accuracy vs {label}', '', '| method | ' + ' | '.join(heading.format(v) for v in levels) + ' |',
           '|---|' + '---|' * len(levels)]
  for method in dict.fromkeys(r['method'] for r in rows):
    cells = [[r['accuracy'] for r in rows if r['method'] == method and r[key] == level] for level in levels]
    lines.append(f'| {method} | ' + ' | '.join(_mean_std(c) if c else '-' for c in cells) + ' |')
  return lines + ['']


def write_table(rows, cohort_line, path):
  """results.md: the error-free table, one table per swept channel, `cohort_line` (if any) and the seeds."""
  lines = ['# MtFEEL on digits_cohorts: test accuracy of each device\'s model on its own data, mean over devices', '']
  error_free = [r for r in rows if r['channel'] == 'none']
  if error_free:
    lines += _error_free_table(error_free)
  for channel in SWEEPS:
    swept = [r for r in rows if r['channel'] == channel]
    if swept:
      lines += _sweep_table(swept, channel)
  if cohort_line:
    lines += [cohort_line, '']
  seeds = sorted({r['seed'] for r in rows})
  lines += [f'{len(seeds)} seed(s) ({", ".join(map(str, seeds))}); std is the population std over seeds.', '']
  with open(path, 'w') as f:
    f.write('\n'.join(lines))


def plot_sweep(rows, channel, path):
  """Fig. 4: mean accuracy vs the channel's level per swept method, min-max band over seeds, and the
  error-free accuracy (mean over seeds) of local-only and FedAvg where `rows` has it, dashed."""
  key, label, _, _ = SWEEPS[channel]
  figure, axis = plt.subplots(figsize=(6.0, 4.2))
  swept = [r for r in rows if r['channel'] == channel]
  for method in dict.fromkeys(r['method'] for r in swept):
    by_level = collections.defaultdict(list)
    for r in swept:
      if r['method'] == method:
        by_level[r[key]].append(r['accuracy'])
    levels = sorted(by_level)
    line, = axis.plot(levels, [np.mean(by_level[v]) for v in levels], marker='o', label=method)
    axis.fill_between(levels, [min(by_level[v]) for v in levels], [max(by_level[v]) for v in levels],
                      color=line.get_color(), alpha=0.2)
  for color, method in zip(('0.2', '0.55'), _ERROR_FREE_BASELINES):
    accuracies = [r['accuracy'] for r in rows if r['method'] == method and r['channel'] == 'none']
    if accuracies:
      axis.axhline(np.mean(accuracies), color=color, linestyle='--', label=f'{method}, error-free')
  axis.set(xlabel=label, ylabel='test accuracy, mean over devices', ylim=(0, 1),
           title=f'Fig. 4: accuracy over the {channel} uplink')
  axis.grid(alpha=0.3)
  axis.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)


def plot_alpha(alpha, labels, title, path):
  """Heat map of alpha (rows: models k, columns: devices m, both in client order), cohorts delimited and named."""
  figure, axis = plt.subplots(figsize=(6.0, 5.2))
  image = axis.imshow(alpha, cmap='viridis', vmin=0.0)
  figure.colorbar(image, ax=axis, label='alpha_km')
  starts = [i for i, label in enumerate(labels) if i == 0 or label != labels[i - 1]]
  for start in starts[1:]:
    axis.axhline(start - 0.5, color='w', linewidth=1.0)
    axis.axvline(start - 0.5, color='w', linewidth=1.0)
  centres = [(start + end - 1) / 2 for start, end in zip(starts, starts[1:] + [len(labels)])]
  names = [labels[start] for start in starts]
  axis.set_xticks(centres, names)
  axis.set_yticks(centres, names)
  axis.set(xlabel='device m (hidden cohort)', ylabel='model k (hidden cohort)', title=title)
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)
