"""The omniscient attack of the RFA paper (Pillutla, Kakade, Harchaoui, IEEE TSP 2022, Sec. 5.1): every corrupted
client sends -(2 S_G + S_C) / A_C (S_G, S_C the weighted sums of the honest and corrupted clients' updates, A_C the
corrupted weight), so that the cohort's weighted mean becomes the negative of what it would have been. NumPy
reference: `tff_robust.core.attacks.directions.omniscient_target`. Knows: the round's updates and weights
(through federated sums).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import honest_sums


class OmniscientAttack(base.UpdateAttack):
  """The RFA paper's omniscient attack as an `UpdateAttack`: -(2 S_G + S_C) / A_C, which turns the weighted mean into
  minus the honest one."""

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: honest and corrupted weighted sums by federated sums, the target broadcast to the corrupted
    clients."""
    del seed

    @tff.tensorflow.computation(update_type, update_type, weight_type)
    def omniscient_target(honest_sum, corrupted_sum, corrupted_weight):
      return tf.nest.map_structure(
          lambda g, c: tf.math.divide_no_nan(-(2 * g + c), tf.cast(corrupted_weight, g.dtype)),
          honest_sum, corrupted_sum,
      )

    def corrupt(update, corrupted, weight, round_num, previous):
      del round_num, previous
      sums = honest_sums.sums(update_type, weight_type, update, corrupted, weight)
      target = tff.federated_map(
          omniscient_target, (sums['honest_sum'], sums['corrupted_sum'], sums['corrupted_weight'])
      )
      return base.replace_with_target(update_type, update, corrupted, target)

    return corrupt
