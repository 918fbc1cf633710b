"""Relocated orthogonal perturbation, ROP (Ozfatura et al., "Byzantines can also learn from history: Fall of
centered clipping in federated learning", IEEE TIFS 2024): every corrupted client sends
a + r p / ||p||, a = pi v_{t-1} + (1 - pi) mu, p = sin(theta) p_perp + cos(theta) u / ||u||, u = lam v_{t-1} +
(1 - lam) mu (mu in the first round), p_perp the all-ones vector orthogonalised against u and normalised, v_{t-1}
the previous round's aggregate (kept in the wrapper's state). The maths, the defaults (pi = 1, lam = 0.9,
theta = 90 degrees, r = 1) and what the attacker knows: `tff_robust.core.attacks.rop` (the NumPy reference).
Gathers the updates (simulation only).
"""

import math

import tensorflow as tf

from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


class RopAttack(gathered.GatheredAttack):
  """ROP as a gathered attack: a point at `radius` from pi v_{t-1} + (1 - pi) mu, at `angle` degrees from lam v_{t-1} +
  (1 - lam) mu."""

  uses_previous_aggregate = True

  def __init__(self, radius: float, pi: float, lam: float, angle: float):
    self._radius, self._pi, self._lam, self._angle = float(radius), float(pi), float(lam), float(angle)

  def payload(self, points, weights, corrupted, previous):
    """The corrupted update a + r p / ||p|| [d] of the module docstring."""
    honest = stacked_statistics.honest_mask(points, weights, corrupted)
    mean, _ = stacked_statistics.mean_and_std(points, weights, honest)
    location = self._pi * previous + (1 - self._pi) * mean
    first_round = tf.reduce_all(tf.equal(previous, 0))
    reference = tf.where(first_round, mean, self._lam * previous + (1 - self._lam) * mean)
    squared = tf.reduce_sum(tf.square(reference))
    ones = tf.ones_like(mean)
    orthogonal = ones - tf.math.divide_no_nan(tf.reduce_sum(ones * reference), squared) * reference
    orthogonal = tf.math.divide_no_nan(orthogonal, tf.norm(orthogonal))
    unit_reference = tf.math.divide_no_nan(reference, tf.sqrt(squared))
    angle = math.radians(self._angle)
    direction = math.sin(angle) * orthogonal + math.cos(angle) * unit_reference
    return location + self._radius * tf.math.divide_no_nan(direction, tf.norm(direction))
