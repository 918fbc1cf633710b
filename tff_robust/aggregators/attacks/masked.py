"""Neurotoxin's masked update (Zhang et al., ICML 2022): a corrupted client zeroes its own update on the
coordinates where the previous round's aggregate is largest in magnitude (the top ceil(top d) of the d
coordinates of the flattened update, those the aggregate left at 0 excepted: nothing is masked in round 1), and
keeps the others. The mask is computed at the server from the previous
aggregate the wrapper's state keeps (`uses_previous_aggregate`) and broadcast. NumPy reference:
`tff_robust.core.attacks.neurotoxin`. Knows: its own update and the previous aggregate (the last global update).
"""

import math

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import widening
from tff_robust.aggregators.attacks import base


class MaskedAttack(base.UpdateAttack):
  """Neurotoxin's mask as an `UpdateAttack`: the own update, zero on the previous aggregate's top `top` share of
  coordinates by magnitude."""

  uses_previous_aggregate = True

  def __init__(self, top: float):
    self._top = float(top)

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: the kept coordinates (1.0, or 0.0 on the top ones) at the server, broadcast, and a
    per-client `tf.cond` that multiplies a corrupted client's flattened update by them."""
    del weight_type, seed
    leaf_types = widening.leaf_types(update_type)
    size = sum(int(np.prod(t.shape)) for t in leaf_types)
    count = math.ceil(round(self._top * size, 9))
    flat_type = tff.TensorType(np.float32, [size])

    @tff.tensorflow.computation(update_type)
    def kept_coordinates(previous):  # the leaves in the type's order (tf.nest would sort mapping keys)
      # float64, as the NumPy reference: float32 would round a float64 leaf's magnitudes below ~1e-45 to 0 (kept)
      flat = tf.concat([tf.reshape(tf.cast(t, tf.float64), [-1]) for t in widening.leaves(previous, update_type)], 0)
      magnitudes, largest = tf.math.top_k(tf.abs(flat), k=count)
      masked = tf.cast(tf.equal(magnitudes, 0.0), tf.float32)  # 1: a coordinate the aggregate left at 0 is kept
      return tf.tensor_scatter_nd_update(tf.ones([size]), largest[:, tf.newaxis], masked)

    @tff.tensorflow.computation(update_type, np.bool_, flat_type)
    def mask_if_corrupted(update, corrupted, kept):
      parts, start = [], 0
      for leaf, leaf_type in zip(widening.leaves(update, update_type), leaf_types):
        length = int(np.prod(leaf_type.shape))
        parts.append(leaf * tf.cast(tf.reshape(kept[start:start + length], leaf_type.shape), leaf.dtype))
        start += length
      masked = widening.pack(update_type, iter(parts))
      return tf.cond(corrupted, lambda: masked, lambda: update)

    def corrupt(update, corrupted, weight, round_num, previous):
      del weight, round_num
      kept = tff.federated_map(kept_coordinates, previous)
      return tff.federated_map(mask_if_corrupted, (update, corrupted, tff.federated_broadcast(kept)))

    return corrupt
