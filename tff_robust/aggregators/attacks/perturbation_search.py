"""Min-max and min-sum (Shejwalkar & Houmansadr, NDSS 2021: their AGR-agnostic Min-Max and Min-Sum problems, Algorithm 1) over the
gathered updates: x_m = mu + gamma p with the largest gamma the paper's halving search finds such that
  - min-max: max_{i honest} ||x_m - x_i||^2 <= max_{i, j honest} ||x_i - x_j||^2,
  - min-sum: sum_{i honest} ||x_m - x_i||^2 <= max_{i honest} sum_{j honest} ||x_i - x_j||^2,
p the inverse unit vector, inverse standard deviation or inverse sign of the honest updates. The search, the
defaults (gamma_init = 10, tau = 1e-5) and what the attacker knows: `tff_robust.core.attacks.perturbation_search`
(the NumPy reference). Gathers the updates (simulation only).
"""

import tensorflow as tf

from tff_robust.aggregators import robust_rules
from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


def halving_search(holds, gamma_init: float, tau: float):
  """The paper's Algorithm 1 as a `tf.while_loop`: the largest gamma (float64) found with `holds(gamma)`."""

  def step(gamma, width, gamma_succ):
    ok = holds(gamma)
    return (tf.where(ok, gamma + width / 2, gamma - width / 2), width / 2, tf.where(ok, gamma, gamma_succ))

  _, _, gamma_succ = tf.while_loop(
      lambda gamma, width, gamma_succ: tf.abs(gamma_succ - gamma) > tau, step,
      (tf.constant(gamma_init, tf.float64), tf.constant(gamma_init, tf.float64), tf.constant(0.0, tf.float64)),
  )
  return gamma_succ


def _squared_distances_to(point, rows):
  return tf.reduce_sum(tf.square(rows - point), axis=1)


class PerturbationSearchAttack(gathered.GatheredAttack):
  """`objective` 'min_max' or 'min_sum'."""

  def __init__(self, objective: str, direction: str, gamma_init: float, tau: float):
    if objective not in ('min_max', 'min_sum'):
      raise ValueError(f'objective must be min_max or min_sum, got {objective!r}')
    self._objective, self._direction = objective, direction
    self._gamma_init, self._tau = float(gamma_init), float(tau)

  def payload(self, points, weights, corrupted, previous):
    """The corrupted update mu + gamma p [d], gamma from the halving search (0 when no client is honest)."""
    honest_mask = stacked_statistics.honest_mask(points, weights, corrupted)
    mean, std = stacked_statistics.mean_and_std(points, weights, honest_mask)
    honest = tf.boolean_mask(points, honest_mask)
    p = stacked_statistics.perturbation(self._direction, mean, std)
    pairwise = robust_rules.pairwise_squared_distances(honest)
    if self._objective == 'min_max':
      threshold = tf.reduce_max(pairwise)
      holds = lambda gamma: tf.reduce_max(_squared_distances_to(mean + gamma * p, honest)) <= threshold
    else:
      threshold = tf.reduce_max(tf.reduce_sum(pairwise, axis=1))
      holds = lambda gamma: tf.reduce_sum(_squared_distances_to(mean + gamma * p, honest)) <= threshold
    gamma = tf.cond(tf.shape(honest)[0] > 0, lambda: halving_search(holds, self._gamma_init, self._tau),
                    lambda: tf.constant(0.0, tf.float64))
    return mean + gamma * p
