"""NumPy references of the gather-based robust aggregation rules (RFA paper, Sec. 5 and App. D.2.3).

Each rule maps client points w_1..w_m (rows of `points`) with weights alpha_i >= 0 to one point. They need
every individual update, so their TFF factories are not secure-aggregation compatible; these references
define what the factories must compute. Rows with weight 0 never influence the result.

Every rule is a function of the cohort as a multiset of (point, weight) pairs, whatever the clients' order:
Krum-based selections break exact score ties by `krum_order`, which looks at the points and weights only.
"""

import math

import numpy as np


def weighted_coordinate_median(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
  """Per coordinate, the weighted median (Yin et al., 2018), the midpoint of the lower and upper medians.

  The lower weighted median is the smallest value x with sum_{x_i <= x} alpha_i >= W/2, the upper the largest
  x with sum_{x_i >= x} alpha_i >= W/2 (W = sum alpha_i); with equal weights this is the usual median.
  """
  points, weights = _checked(points, weights)
  order = np.argsort(points, axis=0, kind='stable')
  sorted_points = np.take_along_axis(points, order, axis=0)
  sorted_weights = weights[order]
  half = weights.sum() / 2
  below = np.cumsum(sorted_weights, axis=0)
  above = np.cumsum(sorted_weights[::-1], axis=0)[::-1]
  lower_index = np.argmax(below >= half * (1 - 1e-6), axis=0)  # tolerance: float32 sums in TF
  upper_index = len(points) - 1 - np.argmax((above >= half * (1 - 1e-6))[::-1], axis=0)
  columns = np.arange(points.shape[1])
  return (sorted_points[lower_index, columns] + sorted_points[upper_index, columns]) / 2


def trimmed_mean_count(num_points: int, trim_fraction: float) -> int:
  """k = ceil(trim_fraction * m) values dropped from each end; at least one value must remain (2k < m)."""
  return math.ceil(trim_fraction * num_points - 1e-12)


def coordinate_trimmed_mean(points: np.ndarray, weights: np.ndarray, trim_fraction: float) -> np.ndarray:
  """Per coordinate, drop the k smallest and k largest values and take the weighted mean of the rest."""
  points, weights = _checked(points, weights)
  k = trimmed_mean_count(len(points), trim_fraction)
  if 2 * k >= len(points):
    raise ValueError(f'trimmed mean with trim_fraction={trim_fraction} needs more than {2 * k} points, got {len(points)}')
  order = np.argsort(points, axis=0, kind='stable')[k:len(points) - k]
  kept, kept_weights = np.take_along_axis(points, order, axis=0), weights[order]
  total = kept_weights.sum(axis=0)
  return np.where(total > 0, (kept * kept_weights).sum(axis=0) / np.where(total > 0, total, 1), 0.0)


def _squared_distances(points) -> np.ndarray:
  points = np.asarray(points, np.float64)
  return np.sum((points[:, None, :] - points[None, :, :]) ** 2, axis=-1)


def krum_scores(points: np.ndarray, num_byzantine: int) -> np.ndarray:
  """Krum score (Blanchard et al., 2017): sum of squared distances to the m - f - 2 nearest other points.

  At least one neighbour is used (as in Flower's Krum): Bulyan's repeated Krum ends with m - f - 2 <= 0
  for small f, where every score would be 0. Multi-Krum's m >= 2f + 3 always gives at least f + 1.
  """
  squared = _squared_distances(points)
  np.fill_diagonal(squared, np.inf)
  neighbours = max(1, len(points) - num_byzantine - 2)
  return np.sort(squared, axis=1)[:, :neighbours].sum(axis=1)


def krum_order(points: np.ndarray, weights: np.ndarray, scores: np.ndarray) -> np.ndarray:
  """The indices of the points by increasing Krum score. Exact ties go to the more central point, the smaller sum
  of squared distances to all the other points (summed in sorted order, so equal distances give equal sums); then
  to the point first in lexicographic order of its coordinates (the first coordinate that differs decides, the
  smaller value first); then to the smaller weight.

  The order depends on the cohort as a multiset, not on the clients' order: only rows equal in point and weight
  can trade places, and they are interchangeable. The first two keys are distances, so for points without exact
  symmetries the order also commutes with isometries and scalings, as Krum does; only ties that distances cannot
  break (mirror images) fall to the coordinates. (Score ties are not rare: with one Krum neighbour two mutual
  nearest neighbours score the same, and Bulyan's last selections for f = 1 and 2 score by one neighbour.)
  """
  totals = np.sort(_squared_distances(points), axis=1).sum(axis=1)
  return np.lexsort((weights, *np.asarray(points).T[::-1], totals, scores))


def multi_krum(points: np.ndarray, weights: np.ndarray, num_byzantine: int, num_selected: int) -> np.ndarray:
  """Weighted mean of the `num_selected` points first in `krum_order` (the lowest Krum scores)."""
  points, weights = _checked(points, weights)
  if len(points) < 2 * num_byzantine + 3:
    raise ValueError(f'multi-Krum with num_byzantine={num_byzantine} needs at least {2 * num_byzantine + 3} points')
  selected = krum_order(points, weights, krum_scores(points, num_byzantine))[:num_selected]
  return _weighted_mean(points[selected], weights[selected])


def bulyan(points: np.ndarray, weights: np.ndarray, num_byzantine: int) -> np.ndarray:
  """Bulyan (El Mhamdi et al., 2018) with a weighted final average.

  1. Select theta = m - 2f points by repeated Krum: each step removes the remaining point first in `krum_order`
     among the r remaining points (lowest Krum score over max(1, r - f - 2) neighbours; exact ties to the most
     central, then the lexicographically smallest). The paper's r - f - 2 is 0 at the last step for f = 1
     (r = 2f + 1 = 3), where every score would be 0 and the tie-break alone would choose; with one neighbour
     (as in Flower) a point of the closest pair goes.
  2. Per coordinate, keep the beta = theta - 2f selected values closest to the selected values' median (ties:
     the value selected first) and take their weighted mean.

  Flower's `aggregate_bulyan` breaks score ties by client index instead, so its result depends on the clients'
  order (flwr 1.42 on the 1-D cohort 4, 9, 10, 5, 2, 6, 3 with f = 1: 5 in that order, but 4 or 13/3 in 2583
  of the 5040 orders; ours: 5 in every order).
  """
  points, weights = _checked(points, weights)
  m, f = len(points), num_byzantine
  if m < 4 * f + 3:
    raise ValueError(f'Bulyan with num_byzantine={f} needs at least {4 * f + 3} points, got {m}')
  remaining, selected = list(range(m)), []
  for _ in range(m - 2 * f):
    scores = krum_scores(points[remaining], f) if len(remaining) > 1 else np.zeros(1)
    selected.append(remaining.pop(int(krum_order(points[remaining], weights[remaining], scores)[0])))
  chosen, chosen_weights = points[selected], weights[selected]
  beta = len(selected) - 2 * f
  median = np.median(chosen, axis=0)
  closest = np.argsort(np.abs(chosen - median), axis=0, kind='stable')[:beta]
  values, value_weights = np.take_along_axis(chosen, closest, axis=0), chosen_weights[closest]
  total = value_weights.sum(axis=0)
  return np.where(total > 0, (values * value_weights).sum(axis=0) / np.where(total > 0, total, 1), 0.0)


def _weighted_mean(points, weights):
  total = weights.sum()
  return weights @ points / total if total > 0 else np.zeros(points.shape[1])


def _checked(points, weights):
  points, weights = np.asarray(points, np.float64), np.asarray(weights, np.float64)
  if points.ndim != 2 or weights.shape != (len(points),):
    raise ValueError(f'points must be [m, d] and weights [m], got {points.shape} and {weights.shape}')
  if len(points) == 0:
    raise ValueError('at least one point is needed')
  return points, weights
