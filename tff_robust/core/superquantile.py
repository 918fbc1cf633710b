"""NumPy reference of the superquantile (Delta-FL) maths: weighted quantile, objective, MM quantile.

Laguel, Pillutla, Malick, Harchaoui, "Device Heterogeneity in Federated Learning: A Superquantile
Approach". For per-device losses x_k with weights alpha_k and conformity level theta in (0, 1]:

* Objective, eq. (2): Fbar_theta(eta) = eta + (1/theta) sum_k alpha_k (x_k - eta)_+ / sum_k alpha_k.
  Its minimum over eta is the superquantile S_theta = max {sum_k pi_k x_k : pi in the simplex,
  pi_k <= alpha_k / (theta sum alpha)} (Property 2, LP duality), attained at the weighted
  (1 - theta)-quantile (Property 7).
* Property 7 (inverted CDF, errata applied): sort x ascending, C_j = cumulative weight;
  eta = x_(j*) with j* = min {j : C_j >= tau W}, tau = 1 - theta, W = sum alpha.
  When C_j = tau W exactly for some j the minimisers form the interval [x_(j), x_(j+1)]. The 'upper' end
  x_(j+1) = x_(min {j : C_j > tau W}) makes the filter {x_k >= eta} keep exactly the worst theta of the
  weight; the 'lower' end keeps x_(j) too. Delta-FL uses 'upper' (see `tff_robust.processes.delta_fl`).
* Eq. (17), corrected (notes, section 2.6): majorization-minimization of the check loss
  H_tau(mu) = sum_k alpha_k h_tau(x_k - mu), each step one weighted average:
      e_k = max(nu_t, |x_k - mu_t|),   mu_{t+1} = (sum_k alpha_k x_k / e_k + (2 tau - 1) W) / sum_k alpha_k / e_k.
  The paper prints (2q - 1) in place of (2 tau - 1) W, which with unnormalised weights converges to the
  median whatever tau is. Here the guard
      nu_t = max(min_smoothing, relative_smoothing max(|mu_t|, d_{t-1})),  d_t = sum_k alpha_k |x_k - mu_t| / W,
  scales with the losses, so the smoothed fixed point lies within nu of the quantile. d_{t-1}, the mean
  distance measured in the pass that produced mu_t, keeps the guard at the losses' scale where mu_t is near
  0: with |mu_t| alone a loss of exactly 0 at mu_0 = 0 (a device the model fits) weighed 1 / 1e-12 and mu
  only doubled per pass from ~1e-12 (values [0, 1, 1], tau = 1/2: 0.00107 after 30 passes, 44 to pass 0.9).

The TFF factories in `tff_robust.aggregators.quantile` are tested against this file.
"""

from typing import Literal

import numpy as np

# Cumulative weights within this fraction of tau W count as reaching it exactly: float32 weights and
# conformity levels (2/3 is not representable) must land on the same end of a tied interval as exact ones.
TIE_TOLERANCE = 1e-6
MIN_SMOOTHING = 1e-12


def weighted_quantile(
    values, weights, level: float, end: Literal['lower', 'upper'] = 'lower'
) -> float:
  """Weighted `level`-quantile of `values` (Property 7); `end` picks the end of a tied interval.

  Points with zero weight never decide the quantile. Raises ValueError if `level` is outside [0, 1],
  a weight is negative, or no weight is positive.
  """
  values = np.asarray(values, np.float64).reshape(-1)
  weights = np.asarray(weights, np.float64).reshape(-1)
  if not 0.0 <= level <= 1.0:
    raise ValueError(f'level must be in [0, 1], got {level}')
  if values.shape != weights.shape:
    raise ValueError(f'values and weights must have the same length, got {values.shape} and {weights.shape}')
  if np.any(weights < 0):
    raise ValueError('weights must be >= 0')
  positive = weights > 0
  if not np.any(positive):
    raise ValueError('at least one weight must be positive')
  values, weights = values[positive], weights[positive]
  order = np.argsort(values, kind='stable')
  cumulative = np.cumsum(weights[order])
  total = cumulative[-1]
  target = level * total
  if end == 'upper':
    reached = cumulative > target + TIE_TOLERANCE * total
  elif end == 'lower':
    reached = cumulative >= target - TIE_TOLERANCE * total
  else:
    raise ValueError(f"end must be 'lower' or 'upper', got {end!r}")
  index = int(np.argmax(reached)) if np.any(reached) else len(values) - 1
  return float(values[order][index])


def _check_conformity_level(conformity_level) -> None:
  if not 0 < conformity_level <= 1:
    raise ValueError(f'conformity_level must be in (0, 1], got {conformity_level}')


def superquantile_objective(eta: float, values, weights, conformity_level: float) -> float:
  """Eq. (2) with normalised weights: eta + (1/theta) sum_k alpha_k (x_k - eta)_+ / sum_k alpha_k.

  Raises ValueError if `conformity_level` is outside (0, 1].
  """
  _check_conformity_level(conformity_level)
  values = np.asarray(values, np.float64)
  weights = np.asarray(weights, np.float64)
  excess = np.maximum(values - eta, 0.0)
  return float(eta + weights @ excess / (conformity_level * weights.sum()))


def superquantile(values, weights, conformity_level: float) -> float:
  """S_theta: eq. (2) at the weighted (1 - theta)-quantile (Properties 2 and 7)."""
  _check_conformity_level(conformity_level)
  eta = weighted_quantile(values, weights, 1.0 - conformity_level)
  return superquantile_objective(eta, values, weights, conformity_level)


def mm_quantile_iterates(
    values,
    weights,
    level: float,
    *,
    initial_estimate: float,
    num_passes: int,
    relative_smoothing: float,
    initial_distance: float = 0.0,
) -> list[tuple[float, float]]:
  """Corrected eq. (17) iterates: [(mu_1, nu_1), ..., (mu_K, nu_K)], nu_t the guard at mu_t.

  `initial_distance` is d_{-1}, the mean distance before the first pass (0: none measured yet). A pass with
  no positive weight keeps the estimate and the distance (the division is guarded).
  """
  values = np.asarray(values, np.float64)
  weights = np.asarray(weights, np.float64)
  total = weights.sum()
  estimate, distance = float(initial_estimate), float(initial_distance)

  def guard():
    return max(MIN_SMOOTHING, relative_smoothing * max(abs(estimate), distance))

  iterates = []
  for _ in range(num_passes):
    inverse_distance = weights / np.maximum(guard(), np.abs(values - estimate))
    denominator = inverse_distance.sum()
    if denominator > 0:
      distance = float(weights @ np.abs(values - estimate) / total)
      estimate = float((inverse_distance @ values + (2.0 * level - 1.0) * total) / denominator)
    iterates.append((estimate, guard()))
  return iterates


def check_loss(estimate: float, values, weights, level: float) -> float:
  """H_tau(mu) = sum_k alpha_k h_tau(x_k - mu), h_tau(r) = (|r| + (2 tau - 1) r) / 2 (App. B.1)."""
  residual = np.asarray(values, np.float64) - estimate
  return float(np.asarray(weights, np.float64) @ ((np.abs(residual) + (2 * level - 1) * residual) / 2))
