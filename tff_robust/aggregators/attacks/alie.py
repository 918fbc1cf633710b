"""A little is enough (Baruch, Baruch, Goldberg, NeurIPS 2019, Algorithm 3): every corrupted client sends
mu - z sigma, mu and sigma the coordinate-wise weighted mean and standard deviation of the honest updates.

The paper's z_max: with n workers of which m are corrupted, s = floor(n/2 + 1) - m "supporters" are needed and
z_max = max{z : Phi(z) < (n - s)/n} = Phi^{-1}((n - s)/n), Phi the standard normal CDF. Here n is the round's
cohort size and m its corrupted count (both change from round to round); where the corrupted clients are a
majority (s <= 0, Phi^{-1}(>= 1) = inf) s is taken as 1, the largest finite z the formula gives. A set `z`
replaces the formula. With no honest client mu = sigma = 0. NumPy reference:
`tff_robust.core.attacks.directions.alie_target`. Knows: the round's honest updates and weights (through
federated sums) and the number of corrupted clients.
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import honest_sums
from tff_robust.aggregators.attacks import stacked_statistics


class AlieAttack(base.UpdateAttack):
  """ALIE as an `UpdateAttack`: every corrupted client sends mu - z sigma (the module docstring); `z=None` uses the
  paper's z_max of each round's cohort."""

  def __init__(self, z: Optional[float] = None):
    self._z = z

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: honest weighted mean and spread by federated sums, then mu - z sigma broadcast to the
    corrupted clients."""
    del seed
    fixed_z = self._z

    @tff.tensorflow.computation(np.int32, np.int32)
    def alie_z_max(cohort_size, num_corrupted):
      if fixed_z is not None:
        return tf.constant(fixed_z, tf.float64)
      return stacked_statistics.alie_z_max(cohort_size, num_corrupted)

    @tff.tensorflow.computation(update_type, update_type, weight_type, np.float64)
    def alie_target(mean, squared_deviation_sum, honest_weight, z):
      # multiply_no_nan: a zero sigma (one or no honest client) gives mu even where z is infinite (n = m = 1).
      return tf.nest.map_structure(
          lambda m, v: m - tf.math.multiply_no_nan(
              tf.cast(z, m.dtype), tf.sqrt(tf.math.divide_no_nan(v, tf.cast(honest_weight, v.dtype)))
          ),
          mean, squared_deviation_sum,
      )

    @tff.tensorflow.computation(np.bool_)
    def one(_):
      return tf.constant(1, tf.int32)

    def corrupt(update, corrupted, weight, round_num, previous):
      del round_num, previous
      sums = honest_sums.sums(update_type, weight_type, update, corrupted, weight)
      mean = honest_sums.mean(update_type, weight_type, sums['honest_sum'], sums['honest_weight'])
      deviations = honest_sums.squared_deviation_sum(update_type, weight_type, update, corrupted, weight, mean)
      z = tff.federated_map(alie_z_max, (
          tff.federated_sum(tff.federated_map(one, corrupted)), federated_counting.count_flagged_clients(corrupted)
      ))
      target = tff.federated_map(alie_target, (mean, deviations, sums['honest_weight'], z))
      return base.replace_with_target(update_type, update, corrupted, target)

    return corrupt
