"""Fang et al.'s full-knowledge attack on the trimmed mean and the median (USENIX Security 2020, Sec. 3.3-3.4).

Per coordinate j, with mu the honest weighted mean and x_min,j, x_max,j the honest extremes, every corrupted
client draws its value uniformly from an interval beyond the extreme on the side opposite to sign(mu_j), within
a factor b (the paper: b = 2): [x_min,j / b, x_min,j] (or [b x_min,j, x_min,j] for x_min,j <= 0) where mu_j > 0,
[x_max,j, b x_max,j] (or [x_max,j, x_max,j / b] for x_max,j <= 0) where mu_j < 0, mu_j where mu_j = 0. The server
computes the intervals and broadcasts them; each corrupted client draws its own uniforms (stateless, seeded by
the run's seed + round and its update's fingerprint, as the Gaussian attack). The maths, the translation from the
paper's models to our updates and what the attacker knows: `tff_robust.core.attacks.fang` (the NumPy reference:
`trimmed_mean_bounds`, `trimmed_mean_values`). Gathers the updates (simulation only).
"""

import tensorflow as tf

from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


def trimmed_mean_bounds(points, weights, corrupted, b: float):
  """(low, high) per coordinate, float64."""
  honest_mask = stacked_statistics.honest_mask(points, weights, corrupted)
  mean, _ = stacked_statistics.mean_and_std(points, weights, honest_mask)
  inf = tf.constant(float('inf'), points.dtype)
  top = tf.reduce_max(tf.where(honest_mask[:, None], points, -inf), axis=0)
  bottom = tf.reduce_min(tf.where(honest_mask[:, None], points, inf), axis=0)
  push_down, push_up = mean > 0, mean < 0
  low = tf.where(push_down, tf.where(bottom > 0, bottom / b, b * bottom), tf.where(push_up, top, mean))
  high = tf.where(push_down, bottom, tf.where(push_up, tf.where(top > 0, b * top, top / b), mean))
  return low, high


class FangTrimmedMeanAttack(gathered.GatheredAttack):
  """Fang et al.'s attack on the trimmed mean and the median as a gathered attack: per coordinate, uniform values beyond
  the honest extreme opposite to sign(mu), within a factor `b`."""

  def __init__(self, b: float):
    self._b = float(b)

  def payload(self, points, weights, corrupted, previous):
    """The per-coordinate intervals (low [d], high [d]) the corrupted clients draw from."""
    return trimmed_mean_bounds(points, weights, corrupted, self._b)

  def client_value(self, own, payload, seed_pair):
    """A corrupted client's update: uniform in [low, high] per coordinate, drawn statelessly from `seed_pair`."""
    low, high = payload
    return low + tf.random.stateless_uniform(tf.shape(low), seed=seed_pair, dtype=tf.float64) * (high - low)
