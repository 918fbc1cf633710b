"""Sign flipping: a corrupted client sends minus its own update (e.g. Allen-Zhu et al. 2021; Karimireddy, He,
Jaggi, ICML 2021 and ICLR 2022 use it as a baseline). Knows: only its own update."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.attacks import base


class SignFlippingAttack(base.UpdateAttack):
  """Sign flipping as an `UpdateAttack`: a corrupted client sends minus its own update."""

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: a per-client `tf.cond` that negates the update of a corrupted client (no aggregation)."""
    del weight_type, seed

    @tff.tensorflow.computation(update_type, np.bool_)
    def flip_sign_if_corrupted(update, corrupted):
      return tf.cond(corrupted, lambda: tf.nest.map_structure(tf.negative, update), lambda: update)

    def corrupt(update, corrupted, weight, round_num, previous):
      del weight, round_num, previous
      return tff.federated_map(flip_sign_if_corrupted, (update, corrupted))

    return corrupt
