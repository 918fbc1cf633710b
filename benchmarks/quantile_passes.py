r"""Secure quantile: passes per round vs agreement with the exact filter, MM against the histogram search.

  python -m benchmarks.quantile_passes

Delta-FL keeps the devices whose loss is at least the weighted (1 - theta)-quantile q of the cohort's losses.
Agreement: the share of devices whose decision (kept / dropped) with the secure threshold equals the decision
with the exact q (`superquantile.weighted_quantile`, 'upper' end), averaged over the rounds of a stream and
its seeds. A pass is one secure weighted mean of bounded per-client values. Methods, each through its NumPy
reference (the TFF factories are tested against them):
  * MM, warm start (`SecureQuantileFactory`, the Delta-FL default until issue 23): K passes of corrected
    eq. (17) per round, each round starting from the previous round's estimate and mean distance (0 at the
    first); threshold mu_K - nu_K.
  * MM, mean start: one pass for the weighted mean of the losses, then K - 1 MM passes from it, every round.
  * histogram, B bins (`SecureHistogramQuantileFactory`): P passes of the B-ary search of
    `core.histogram_quantile`; threshold the lower edge of the last bin.
Losses (a documented synthetic mix, a training-like stream): 40 rounds; round r draws a cohort of m devices,
20% with loss exactly 0 (devices the model fits), the others exp(-r / 20) x log-normal(0, 1) rounded to 2
decimals (ties, more of them as the losses shrink); weights = example counts round(exp(N(4, 1))) >= 1
(skewed: a few devices hold most of the weight). 5 seeds; cohorts of 10 and 100; theta 0.8, 0.5, 0.1.
The rounding spaces distinct losses 0.01 apart, wider than the histogram's last bin below a loss of about 3.7
(0.0027 in asinh), so two distinct losses never share it there: the rows marked "losses not rounded" run the
histogram search on the same stream without the rounding, where they can.
"""

import numpy as np

from tff_robust.core import histogram_quantile
from tff_robust.core import superquantile

_THETAS = (0.8, 0.5, 0.1)
_COHORTS = (10, 100)
_ROUNDS = 40
_SEEDS = 5
_SMOOTHING = 1e-2  # Delta-FL's default quantile_smoothing
_MM_PASSES = (1, 2, 3, 5, 10, 20, 30, 40)
_HISTOGRAM_PASSES = (1, 2, 3)
_HISTOGRAM_BINS = (16, 64, 256)


def loss_stream(cohort: int, seed: int, rounded: bool = True):
  """The synthetic mix of the module docstring: [(losses float32, weights float32)] for `_ROUNDS` rounds; the
  losses rounded to 2 decimals unless `rounded` is False (the same draws otherwise)."""
  rng = np.random.default_rng(seed)
  stream = []
  for round_num in range(_ROUNDS):
    losses = np.exp(-round_num / 20) * rng.lognormal(size=cohort)
    losses = np.round(losses, 2) if rounded else losses
    losses = np.where(rng.random(cohort) < 0.2, 0.0, losses)
    weights = np.maximum(1, np.round(np.exp(rng.normal(4.0, 1.0, cohort))))
    stream.append((losses.astype(np.float32), weights.astype(np.float32)))
  return stream


def _mm_warm(stream, level, passes):
  estimate, distance, thresholds = 0.0, 0.0, []
  for losses, weights in stream:
    total = float(weights.sum())
    iterates = superquantile.mm_quantile_iterates(
        losses, weights, level, initial_estimate=estimate, num_passes=passes,
        relative_smoothing=_SMOOTHING, initial_distance=distance,
    )
    estimate, guard = iterates[-1]
    # The factory keeps the mean distance of the last pass: the one measured at the previous iterate.
    previous = iterates[-2][0] if passes > 1 else thresholds[-1][1] if thresholds else 0.0
    distance = float(weights @ np.abs(losses - previous) / total)
    thresholds.append((estimate - guard, estimate))
  return [threshold for threshold, _ in thresholds]


def _mm_mean_start(stream, level, passes):
  thresholds = []
  for losses, weights in stream:
    mean = float(weights @ losses / weights.sum())
    if passes == 1:
      thresholds.append(mean)
      continue
    estimate, guard = superquantile.mm_quantile_iterates(
        losses, weights, level, initial_estimate=mean, num_passes=passes - 1, relative_smoothing=_SMOOTHING
    )[-1]
    thresholds.append(estimate - guard)
  return thresholds


def _histogram(num_bins):
  def thresholds(stream, level, passes):
    return [
        histogram_quantile.histogram_quantile_passes(
            losses, weights, level, num_bins=num_bins, num_passes=passes
        )[-1][0]
        for losses, weights in stream
    ]
  return thresholds


def agreement(method, passes, cohort, theta, rounded: bool = True) -> float:
  """Mean share of devices whose secure decision equals the exact one, over the rounds and seeds."""
  level, shares = 1.0 - theta, []
  for seed in range(_SEEDS):
    stream = loss_stream(cohort, seed, rounded)
    for (losses, weights), threshold in zip(stream, method(stream, level, passes)):
      exact = superquantile.weighted_quantile(losses, weights, level, end='upper')
      shares.append(np.mean((losses >= threshold) == (losses >= exact)))
  return float(np.mean(shares))


def section() -> str:
  """The pass-count / agreement table (see the module docstring) as markdown, with the smallest pass counts."""
  methods = [('MM, warm start', _mm_warm, _MM_PASSES, True), ('MM, mean start', _mm_mean_start, _MM_PASSES, True)]
  methods += [(f'histogram, {b} bins', _histogram(b), _HISTOGRAM_PASSES, True) for b in _HISTOGRAM_BINS]
  methods += [(f'histogram, {b} bins, losses not rounded', _histogram(b), _HISTOGRAM_PASSES, False)
              for b in _HISTOGRAM_BINS[-1:]]
  columns = [(m, theta) for m in _COHORTS for theta in _THETAS]
  lines = [
      '## 4. Secure quantile (Delta-FL): passes per round vs agreement with the exact filter',
      '',
      'Generated by `python -m benchmarks.quantile_passes` (also a section of `benchmarks.scaling`); the '
      'module docstring defines the methods and the synthetic loss mix (zeros, ties, skewed weights, '
      'shrinking losses). Agreement in %: devices whose kept/dropped decision equals the exact quantile\'s, '
      f'mean over {_ROUNDS} rounds x {_SEEDS} seeds; m = cohort size.',
      '',
      '| method | passes | ' + ' | '.join(f'm={m} theta={t}' for m, t in columns) + ' | worst |',
      '| --- | ---: |' + ' ---: |' * (len(columns) + 1),
  ]
  smallest = {}
  for name, method, pass_counts, rounded in methods:
    for passes in pass_counts:
      cells = [agreement(method, passes, m, theta, rounded) for m, theta in columns]
      if min(cells) >= 0.98:
        smallest.setdefault(name, passes)
      lines.append(f'| {name} | {passes} | ' + ' | '.join(f'{100 * c:.1f}' for c in cells)
                   + f' | {100 * min(cells):.1f} |')
  lines.append('')
  lines += [f'- {name}: smallest pass count with >= 98% in every column: {smallest.get(name, "none listed")}'
            for name, _, _, _ in methods]
  return '\n'.join(lines)


if __name__ == '__main__':
  print(section())
