"""NumPy reference of the smoothed Weiszfeld algorithm (RFA paper, Algorithms 2 and 3).

The weighted geometric median of points w_1..w_m with weights alpha_i is the minimiser of eq. (6),
    g(v) = sum_i alpha_i ||v - w_i||.
Smoothed Weiszfeld, eq. (16), from an initial v^(0):
    beta_i^(r) = alpha_i / max(nu, ||v^(r) - w_i||),    v^(r+1) = sum_i beta_i^(r) w_i / sum_i beta_i^(r).
Each iteration is one weighted average, i.e. one call of the secure-average oracle. The TFF factory in
`tff_robust.aggregators.geometric_median` is tested against this file, so it stays deliberately plain.
"""

from typing import Literal, NamedTuple

import numpy as np


class WeiszfeldTrace(NamedTuple):
  """Every iterate produced, and the normalised objective g(v)/sum(alpha) at each broadcast iterate."""

  iterates: list[np.ndarray]  # v^(1), ..., v^(R): one per secure-average call.
  objectives: list[float]  # g(v^(r)) / sum(alpha) for each v^(r) that was broadcast to the clients.


def geometric_median_objective(center: np.ndarray, points: np.ndarray, weights: np.ndarray) -> float:
  """Normalised objective of eq. (6): sum_i alpha_i ||center - w_i|| / sum_i alpha_i (0 if no weight)."""
  points = np.asarray(points, np.float64)
  weights = np.asarray(weights, np.float64)
  total = weights.sum()
  if total == 0:
    return 0.0
  return float(weights @ np.linalg.norm(points - center, axis=1) / total)


def smoothed_weiszfeld(
    points: np.ndarray,
    weights: np.ndarray,
    *,
    num_passes: int,
    smoothing: float,
    init: Literal['mean', 'zero'],
) -> WeiszfeldTrace:
  """Runs `num_passes` weighted averages of smoothed Weiszfeld on the rows of `points`.

  init='mean': the first average is the plain weighted mean (the authors' code: R oracle calls are one mean
  plus R-1 Weiszfeld re-weightings). init='zero': v^(0) = 0 and every call is a Weiszfeld step, so
  num_passes=1 is one-step RFA (Algorithm 3), beta_i = alpha_i / max(nu, ||w_i||).
  """
  points = np.asarray(points, np.float64)
  weights = np.asarray(weights, np.float64)
  iterates, objectives = [], []
  if init == 'mean':
    center = _weighted_average(points, weights)
    iterates.append(center)
    weiszfeld_steps = num_passes - 1
  elif init == 'zero':
    center = np.zeros(points.shape[1])
    weiszfeld_steps = num_passes
  else:
    raise ValueError(f"init must be 'mean' or 'zero', got {init!r}")
  for _ in range(weiszfeld_steps):
    distances = np.linalg.norm(points - center, axis=1)
    objectives.append(geometric_median_objective(center, points, weights))
    center = _weighted_average(points, weights / np.maximum(smoothing, distances))
    iterates.append(center)
  return WeiszfeldTrace(iterates, objectives)


def _weighted_average(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
  total = weights.sum()
  if total == 0:
    return np.zeros(points.shape[1])
  return weights @ points / total
