"""Fang et al.'s full-knowledge attack on Krum (USENIX Security 2020, Sec. 3.2): every corrupted client sends
-lambda sign(mu), lambda halved from the paper's bound lambda_0 until Krum with f = c (the round's corrupted
count) selects a corrupted update or lambda < `threshold` (1e-5). The bound, the translation to updates and what
the attacker knows: `tff_robust.core.attacks.fang` (NumPy reference `krum_target`). Gathers the updates
(simulation only).
"""

import math

import tensorflow as tf

from tff_robust.aggregators import robust_rules
from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


def krum_lambda_bound(points, honest_mask, num_corrupted):
  """The paper's starting lambda_0 (module docstring of `tff_robust.core.attacks.fang`), float64, from the stacked
  rows."""
  honest = tf.boolean_mask(points, honest_mask)
  m, c = tf.shape(points)[0], num_corrupted
  neighbours = m - c - 2
  dimension = tf.cast(tf.shape(points)[1], tf.float64)

  def first_term():
    distances = tf.sqrt(robust_rules.pairwise_squared_distances(honest))
    k = tf.shape(honest)[0]
    distances = tf.where(tf.eye(k, dtype=tf.bool), tf.constant(math.inf, tf.float64), distances)
    nearest = tf.sort(distances, axis=1)[:, :neighbours]
    return tf.reduce_min(tf.reduce_sum(nearest, axis=1)) / (tf.cast(m - 2 * c - 1, tf.float64) * tf.sqrt(dimension))

  first = tf.cond(tf.logical_and(m - 2 * c - 1 > 0, neighbours > 0), first_term,
                  lambda: tf.constant(0.0, tf.float64))
  return first + tf.reduce_max(tf.norm(honest, axis=1)) / tf.sqrt(dimension)


class FangKrumAttack(gathered.GatheredAttack):
  """Fang et al.'s attack on Krum as a gathered attack: -lambda sign(mu), lambda halved from the paper's bound until
  Krum picks it or lambda < `threshold`."""

  def __init__(self, threshold: float):
    self._threshold = float(threshold)

  def payload(self, points, weights, corrupted, previous):
    """The corrupted update -lambda sign(mu) [d] from the stacked rows (`GatheredAttack.payload`)."""
    honest_mask = stacked_statistics.honest_mask(points, weights, corrupted)
    mean, _ = stacked_statistics.mean_and_std(points, weights, honest_mask)
    direction = -tf.sign(mean)
    num_corrupted = tf.reduce_sum(tf.cast(corrupted, tf.int32))

    def krum_picks_a_corrupted_row(lam):
      attacked = tf.where(corrupted[:, None], lam * direction, points)
      chosen = tf.argmin(robust_rules.krum_scores(attacked, num_corrupted), output_type=tf.int32)
      return tf.gather(corrupted, chosen)

    def search():
      lam = krum_lambda_bound(points, honest_mask, num_corrupted)
      return tf.while_loop(
          lambda lam: tf.logical_and(lam >= self._threshold, tf.logical_not(krum_picks_a_corrupted_row(lam))),
          lambda lam: (lam / 2,), (lam,),
      )[0]

    usable = tf.logical_and(tf.reduce_any(honest_mask), num_corrupted > 0)
    return tf.cond(usable, lambda: search() * direction, lambda: mean)
