"""NumPy reference of the secure histogram quantile: a B-ary search by weighted histograms (notes, section 2.6).

The weighted tau-quantile of Delta-FL (`superquantile.weighted_quantile`, 'upper' end) is
    q = min {x_k : F(x_k) > tau W},   F(t) = sum_{x_k <= t} alpha_k,   W = sum_k alpha_k,
and for any t, q >= t exactly when G(t) = sum_{x_k < t} alpha_k <= tau W. A pass evaluates G at B + 1 edges
at once: each client sends (1, [x_k < e_0], ..., [x_k < e_B]), a bounded value in {0, 1}^(B+2), and one
weighted mean of these vectors gives (1, G(e_0) / W, ..., G(e_B) / W) (one secure sum; the leading 1 tells a
cohort with positive weight from one without, whose mean is 0). Each share is one weighted mean of
indicators, not a cumulative sum of bin shares, so its rounding does not grow with B. The largest edge e_j* with G(e_j*) / W <= tau lower-bounds q and the
next edge exceeds it: q lies in the bin [e_j*, e_j*+1), which the next pass splits into B bins again.

Edges are uniform in t = asinh(x) (order-preserving, so signs and every scale share one grid): the first pass
spans [-T, T], T = asinh(largest finite value of the dtype), and each pass divides the bin width in t by B.
After P passes the result is the lower edge eta = e_j* and q is in [eta, eta + width): the filter
{x_k >= eta} differs from {x_k >= q} only for values in [eta, q), none once the last bin holds one distinct
value. In t the last width is 2T / B^P (float32: T = 89.4; B = 256, P = 2: 0.0027, i.e. 0.27% of |x| for
|x| > 1 and 0.0027 absolute below).

Ties: shares within `superquantile.TIE_TOLERANCE` of tau count as reaching it, as in the exact quantile;
with tau = 1 (or shares above 1 - TIE_TOLERANCE) the search stays at or below the largest value. A cohort
with no positive weight gives 0.

The TFF factory `tff_robust.aggregators.histogram_quantile.SecureHistogramQuantileFactory` is tested against
the exact quantile within this precision; `benchmarks/quantile_passes.py` uses this file for its table.
"""

import numpy as np

from tff_robust.core import superquantile


def asinh_limit(dtype) -> float:
  """T = asinh(largest finite value of `dtype`), in `dtype`: the first pass spans [-T, T] in asinh(x)."""
  return np.asarray(np.arcsinh(np.finfo(dtype).max), dtype)


def bin_edges(low, high, num_bins: int, dtype=np.float32):
  """(t, sinh(t)): the B + 1 edges t_j = min(low + (high - low) j / B, high), t_B = high, nondecreasing."""
  low, high = np.asarray(low, dtype), np.asarray(high, dtype)
  fractions = (np.arange(num_bins + 1) / num_bins).astype(dtype)
  t = np.minimum(low + (high - low) * fractions, high)
  t[-1] = high
  with np.errstate(over='ignore'):
    return t, np.sinh(t)


def search_step(below, level: float, num_bins: int) -> int:
  """j* = max {j : G(e_j) / W <= min(tau + tol, 1 - tol)}, clamped to [0, B - 1]; `below` = G(e_j) / W."""
  target = min(level + superquantile.TIE_TOLERANCE, 1.0 - superquantile.TIE_TOLERANCE)
  return int(np.clip(np.count_nonzero(below <= target) - 1, 0, num_bins - 1))


def histogram_quantile_passes(values, weights, level: float, *, num_bins: int, num_passes: int, dtype=np.float32):
  """The passes' bins [(eta_1, upper_1), ..., (eta_P, upper_P)]: the bin of q found by each pass, in `dtype`.

  Clients with zero weight count for nothing; if no weight is positive every bin is (0, 0).
  """
  values = np.asarray(values, dtype).reshape(-1)
  weights = np.asarray(weights, np.float64).reshape(-1)
  total = weights.sum()
  limit = asinh_limit(dtype)
  low, high = -limit, limit
  bins = []
  for _ in range(num_passes):
    t, edges = bin_edges(low, high, num_bins, dtype)
    if total <= 0:
      bins.append((0.0, 0.0))
      continue
    below = weights @ (values[:, None] < edges[None, :]) / total
    j = search_step(below, level, num_bins)
    low, high = t[j], t[j + 1]
    bins.append((float(edges[j]), float(edges[j + 1])))
  return bins
