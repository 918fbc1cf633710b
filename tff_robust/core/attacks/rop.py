"""Relocated orthogonal perturbation, ROP (NumPy reference): Ozfatura, Ozfatura, Kupcu, Gunduz, "Byzantines can
also learn from history: Fall of centered clipping in federated learning", IEEE TIFS 2024 (arXiv 2208.09894),
the ROP attack as the authors' code computes it (parameters pi, lam, angle).

Centered clipping clips every update's residual around the previous round's aggregate v_{t-1}. ROP places the
corrupted updates relative to it:
  location  a = pi v_{t-1} + (1 - pi) mu                 (pi = 1: at the previous aggregate),
  reference u = lam v_{t-1} + (1 - lam) mu               (u = mu in the first round, where v_{t-1} = 0),
  p_perp    = (1 - <1, u> u / ||u||^2) normalised        (the all-ones vector with its component along u removed),
  p         = sin(theta) p_perp + cos(theta) u / ||u||   (theta = 90 degrees: orthogonal to the reference),
  x'        = a + r p / ||p||.
mu is the honest weighted mean. The paper scales p by ALIE's z_max in gradient units; here the distance r
(`radius`) is an explicit parameter: an attacker that knows centered clipping's tau sets r close to tau (larger r
is clipped to tau, so it gains nothing against CC alone but fails a norm filter sooner). Defaults pi = 1,
lam = 0.9, theta = 90 degrees (the paper's main setting); r = 1 is the runner's default tau. A zero u (first
round with mu = 0) leaves p = p_perp = the normalised ones vector.

Knows: the round's honest updates and weights, the server's previous aggregate and (through r) the defence's
clipping radius.
"""

import math

import numpy as np

from tff_robust.core.attacks import honest_statistics


def target(updates, weights, corrupted, previous, radius: float, pi: float, lam: float, angle: float) -> np.ndarray:
  """ROP's update a + r p / ||p|| of the module docstring (the location a where p = 0)."""
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  previous = np.asarray(previous, np.float64)
  location = pi * previous + (1 - pi) * mean
  reference = mean if not previous.any() else lam * previous + (1 - lam) * mean
  ones = np.ones_like(mean)
  squared = reference @ reference
  unit_reference = reference / np.sqrt(squared) if squared > 0 else np.zeros_like(mean)
  orthogonal = ones - (ones @ reference) / squared * reference if squared > 0 else ones
  orthogonal_norm = np.linalg.norm(orthogonal)
  orthogonal = orthogonal / orthogonal_norm if orthogonal_norm > 0 else orthogonal
  direction = math.sin(math.radians(angle)) * orthogonal + math.cos(math.radians(angle)) * unit_reference
  norm = np.linalg.norm(direction)
  return location + radius * direction / norm if norm > 0 else location
