"""Boosting: a corrupted client sends gamma times its own update, the update half of model replacement
(Bagdasaryan et al., AISTATS 2020, Sec. 4). With gamma unset it is W / (eta W_C), the cohort's total weight over eta
times the corrupted clients' weight (two federated sums of weights), so that FedAvg's step with server learning rate
eta moves the global model onto the corrupted clients' weighted mean model when the honest updates are zero. NumPy
reference: `tff_robust.core.attacks.boost`. Knows: its own update, the cohort's weights and eta.
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.attacks import base


class BoostAttack(base.UpdateAttack):
  """Boosting as an `UpdateAttack`: a corrupted client's update times `gamma` (None: W / (`eta` W_C))."""

  def __init__(self, gamma: Optional[float], eta: float):
    self._gamma = None if gamma is None else float(gamma)
    self._eta = float(eta)

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: the factor at the server (fixed, or from the sums of all and of the corrupted weights),
    broadcast, and a per-client `tf.cond` scaling the corrupted clients' updates."""
    del seed
    eta, gamma = self._eta, self._gamma

    @tff.tensorflow.computation(weight_type, np.bool_)
    def all_and_corrupted(weight, corrupted):
      weight = tf.cast(weight, tf.float64)
      return weight, tf.where(corrupted, weight, tf.zeros_like(weight))

    @tff.tensorflow.computation(tff.StructType([np.float64, np.float64]))
    def replacement_factor(sums):
      return tf.math.divide_no_nan(sums[0], eta * sums[1])

    @tff.tensorflow.computation(update_type, np.bool_, np.float64)
    def scale_if_corrupted(update, corrupted, factor):
      return tf.cond(corrupted, lambda: tf.nest.map_structure(lambda t: t * tf.cast(factor, t.dtype), update),
                     lambda: update)

    def corrupt(update, corrupted, weight, round_num, previous):
      del round_num, previous
      if gamma is None:
        factor = tff.federated_map(replacement_factor, tff.federated_sum(
            tff.federated_map(all_and_corrupted, (weight, corrupted))))
      else:
        factor = tff.federated_value(np.float64(gamma), tff.SERVER)
      return tff.federated_map(scale_if_corrupted, (update, corrupted, tff.federated_broadcast(factor)))

    return corrupt
