"""The static attacks' targets and the perturbation directions the adaptive attacks scale (NumPy references).

Targets (what every corrupted client sends; mu, sigma: `honest_statistics.mean_and_std`):
  - omniscient (RFA paper, Pillutla, Kakade, Harchaoui, IEEE TSP 2022, Sec. 5.1): -(2 S_G + S_C) / A_C, S_G and
    S_C the weighted sums of the honest and corrupted rows and A_C the corrupted weight, so that the cohort's
    weighted sum becomes minus what honest behaviour would have given;
  - ipm (Xie, Koyejo, Gupta, UAI 2019): -eps mu;
  - alie (Baruch et al. 2019, Algorithm 3): mu - z sigma, z the paper's z_max unless given.
Perturbation directions p of Shejwalkar & Houmansadr (NDSS 2021, their "perturbation vectors"): the inverse
unit vector -mu / ||mu||, the inverse standard deviation -sigma and the inverse sign -sign(mu).
"""

from typing import Optional

import numpy as np

from tff_robust.core.attacks import honest_statistics


def omniscient_updates(updates, weights, corrupted) -> np.ndarray:
  """`updates` with every corrupted row replaced by the omniscient target (unchanged with no corrupted row)."""
  updates, weights, corrupted, _, _ = honest_statistics.split(updates, weights, corrupted)
  attacked = updates.copy()
  if corrupted.any():
    attacked[corrupted] = omniscient_target(updates, weights, corrupted)
  return attacked


def omniscient_target(updates, weights, corrupted) -> np.ndarray:
  """The omniscient update -(2 S_G + S_C) / A_C (zeros when no client is corrupted)."""
  updates, weights, corrupted, _, _ = honest_statistics.split(updates, weights, corrupted)
  honest_sum = weights[~corrupted] @ updates[~corrupted]
  corrupted_sum = weights[corrupted] @ updates[corrupted]
  corrupted_weight = weights[corrupted].sum()
  return -(2 * honest_sum + corrupted_sum) / corrupted_weight if corrupted_weight > 0 else np.zeros_like(honest_sum)


def ipm_target(updates, weights, corrupted, eps: float) -> np.ndarray:
  """IPM's update -eps mu, mu the honest weighted mean."""
  return -eps * honest_statistics.mean_and_std(updates, weights, corrupted)[0]


def alie_target(updates, weights, corrupted, z: Optional[float] = None) -> np.ndarray:
  """mu - z sigma; z = z_max(n, m) of the round (n the cohort size, m its corrupted count) when None."""
  corrupted = np.asarray(corrupted, bool)
  if z is None:
    z = honest_statistics.alie_z_max(len(corrupted), int(corrupted.sum()))
  mean, std = honest_statistics.mean_and_std(updates, weights, corrupted)
  return mean - np.where(std > 0, z * std, 0.0)


def perturbation(direction: str, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
  """Shejwalkar & Houmansadr's p: 'unit_vec' -mu/||mu|| (0 if mu = 0), 'std' -sigma, 'sign' -sign(mu)."""
  if direction == 'unit_vec':
    norm = np.linalg.norm(mean)
    return -mean / norm if norm > 0 else np.zeros_like(mean)
  if direction == 'std':
    return -std
  if direction == 'sign':
    return -np.sign(mean)
  raise ValueError(f'direction must be unit_vec, std or sign, got {direction!r}')
