"""Fang, Cao, Jia, Gong, "Local Model Poisoning Attacks to Byzantine-Robust Federated Learning", USENIX Security
2020: the full-knowledge attacks (NumPy references), written for model updates.

The paper crafts local *models* w'_i against the direction s_j in which the global model's parameter j would
change without attack. Our clients send updates x_i = w - w_i (TFF's model delta; the server steps against the
aggregate), so the honest change of parameter j has the sign of -mu_j (mu the honest weighted mean update): the
paper's s_j is -sign(mu_j), and "against s" means pushing the aggregate's coordinate j to the side opposite to
sign(mu_j).

Trimmed mean and median (Sec. 3.3, "Attacking Trimmed mean"; the same attack for the median, Sec. 3.4): with
x_max,j and x_min,j the largest and smallest honest values of coordinate j and b > 1 (the paper: b = 2), each
corrupted client draws its coordinate j uniformly from
  - [x_min,j / b, x_min,j] if mu_j > 0 and x_min,j > 0, else [b x_min,j, x_min,j] if mu_j > 0;
  - [x_max,j, b x_max,j] if mu_j < 0 and x_max,j > 0, else [x_max,j, x_max,j / b] if mu_j < 0;
  - mu_j where mu_j = 0 (as Blades does).
So every corrupted value lies beyond the honest extreme on the side opposite to sign(mu_j). The paper applies b to
the local models' parameters; like Blades (`AdaptiveAdversary`) we apply it to the update values, whose extremes
are what the trimmed mean and the median of updates trim.

Krum (Sec. 3.2, full knowledge): every corrupted client sends x' = -lambda sign(mu) (the paper's
w'_1 = w - lambda s with the other c - 1 crafted models equal to it). lambda starts at the paper's bound (its
Sec. 3.2, with D the Euclidean distance and D(w_i, w) = ||x_i||)
  lambda_0 = min_{i honest} sum_{l in Gamma_i} ||x_l - x_i|| / ((m - 2c - 1) sqrt(d))
             + max_{i honest} ||x_i|| / sqrt(d),
Gamma_i the m - c - 2 honest updates nearest to x_i (the first term 0 where m - 2c - 1 <= 0 or m - c - 2 <= 0),
m the cohort, c its corrupted count and d the dimension, and is halved until Krum with f = c
(`robust_statistics.krum_scores`) selects a corrupted update or lambda falls below `threshold` (the paper: 1e-5).

Knows: the round's honest updates and weights (full knowledge); for Krum also that the defence is Krum with f = c.
"""

import numpy as np

from tff_robust.core import robust_statistics
from tff_robust.core.attacks import honest_statistics


def trimmed_mean_bounds(updates, weights, corrupted, b: float) -> tuple[np.ndarray, np.ndarray]:
  """(low, high) per coordinate of the interval the corrupted values are drawn from."""
  _, _, corrupted, honest, _ = honest_statistics.split(updates, weights, corrupted)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  if len(honest) == 0:
    return mean, mean
  top, bottom = honest.max(axis=0), honest.min(axis=0)
  below = (np.where(bottom > 0, bottom / b, b * bottom), bottom)  # mu_j > 0: push down
  above = (top, np.where(top > 0, b * top, top / b))  # mu_j < 0: push up
  low = np.select([mean > 0, mean < 0], [below[0], above[0]], mean)
  high = np.select([mean > 0, mean < 0], [below[1], above[1]], mean)
  return low, high


def trimmed_mean_values(low, high, uniform) -> np.ndarray:
  """Corrupted rows low + u (high - low) for draws `uniform` [c, d] in [0, 1)."""
  return low + np.asarray(uniform) * (high - low)


def krum_lambda_bound(updates, weights, corrupted) -> float:
  """lambda_0 of the module docstring: the paper's starting scale of the Krum attack."""
  _, _, corrupted, honest, _ = honest_statistics.split(updates, weights, corrupted)
  m, c, d = len(corrupted), int(corrupted.sum()), honest.shape[1]
  neighbours = m - c - 2
  first = 0.0
  if m - 2 * c - 1 > 0 and neighbours > 0:
    distances = np.sqrt(np.sum((honest[:, None, :] - honest[None, :, :]) ** 2, axis=-1))
    np.fill_diagonal(distances, np.inf)
    first = np.sort(distances, axis=1)[:, :neighbours].sum(axis=1).min() / ((m - 2 * c - 1) * np.sqrt(d))
  return float(first + np.linalg.norm(honest, axis=1).max() / np.sqrt(d))


def krum_target(updates, weights, corrupted, threshold: float) -> np.ndarray:
  """The Krum attack's update -lambda sign(mu): lambda halved from lambda_0 until Krum with f = c picks a corrupted row,
  or below `threshold`."""
  updates, weights, corrupted, honest, _ = honest_statistics.split(updates, weights, corrupted)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  if len(honest) == 0 or not corrupted.any():
    return mean
  direction, lam = -np.sign(mean), krum_lambda_bound(updates, weights, corrupted)
  while lam >= threshold:
    attacked = updates.copy()
    attacked[corrupted] = lam * direction
    if corrupted[np.argmin(robust_statistics.krum_scores(attacked, int(corrupted.sum())))]:
      break
    lam /= 2
  return lam * direction
