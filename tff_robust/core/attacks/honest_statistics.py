"""What the simulated adversary computes from the round's honest updates (NumPy references).

Rows of `updates` [m, d] are the cohort's updates, `weights` [m] their aggregation weights alpha_i and
`corrupted` [m] which clients the adversary controls; the honest rows are the others. Statistics are weighted
like the aggregate: mu = sum_{i honest} alpha_i x_i / A_G, sigma^2 = sum_{i honest} alpha_i (x_i - mu)^2 / A_G
(A_G the honest weight, population variance). Honest rows with weight <= 0 or a non-finite value (TFF's
model-delta client work sends zeros with weight 0 for a non-finite update) take no part. The papers use the
unweighted mean and (torch, ddof = 1) std of the honest workers: with equal weights mu is the same and sigma
differs by sqrt((k - 1)/k) for k honest clients. With no honest client mu = sigma = 0.
"""

import math
import statistics

import numpy as np

from tff_robust.core import robust_statistics


def split(updates, weights, corrupted):
  """(updates, weights, corrupted) as float64 / float64 / bool arrays, and the honest rows and weights."""
  updates, weights = np.asarray(updates, np.float64), np.asarray(weights, np.float64)
  corrupted = np.asarray(corrupted, bool)
  honest = ~corrupted & (weights > 0) & np.all(np.isfinite(updates), axis=1)
  return updates, weights, corrupted, updates[honest], weights[honest]


def mean_and_std(updates, weights, corrupted):
  """The honest weighted mean mu and coordinate-wise standard deviation sigma (ddof = 0)."""
  _, _, _, honest, honest_weights = split(updates, weights, corrupted)
  if honest_weights.sum() <= 0:
    zeros = np.zeros(np.shape(updates)[1])
    return zeros, zeros
  mean = honest_weights @ honest / honest_weights.sum()
  return mean, np.sqrt(honest_weights @ (honest - mean) ** 2 / honest_weights.sum())


def alie_z_max(cohort_size: int, num_corrupted: int) -> float:
  """Baruch, Baruch, Goldberg (NeurIPS 2019), Algorithm 3: s = floor(n/2 + 1) - m supporters (at least 1),
  z_max = Phi^{-1}((n - s) / n); -inf for a one-client cohort (Phi^{-1}(0), as TensorFlow's `ndtri`)."""
  supporters = max(cohort_size // 2 + 1 - num_corrupted, 1)
  share = (cohort_size - supporters) / cohort_size
  return statistics.NormalDist().inv_cdf(share) if share > 0 else -math.inf


def median_norm(updates, weights, corrupted) -> float:
  """The honest updates' weighted median L2 norm (midpoint of the lower and upper weighted medians,
  `robust_statistics.weighted_coordinate_median` of the norms); 0 with no honest client."""
  _, _, _, honest, honest_weights = split(updates, weights, corrupted)
  if honest_weights.sum() <= 0:
    return 0.0
  norms = np.linalg.norm(honest, axis=1)
  return float(robust_statistics.weighted_coordinate_median(norms[:, None], honest_weights)[0])
