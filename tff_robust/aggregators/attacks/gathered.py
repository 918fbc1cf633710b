"""Base of the attacks that gather the round's updates at the server (simulation only, not secure-compatible).

The adversary is simulated at the server: it gathers every client's flattened update (float64), weight and
corrupted flag with `tff.federated_aggregate` (accumulate = append a row, so `privacy.non_secure_intrinsics`
names it: `federated_aggregate`), computes a payload from them and the previous round's aggregate (a TensorFlow
function over stacked rows, `payload`), broadcasts it, and every corrupted client replaces its update by
`client_value(own update, payload, seed pair)`, by default the payload itself (one target for all). Rows arrive
in no particular order; every attack here is invariant to it up to ties.
"""

import abc

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import widening
from tff_robust.aggregators.attacks import base


class GatheredAttack(base.UpdateAttack):
  """Subclasses define `payload`; those whose clients draw their own values also `client_value`."""

  @abc.abstractmethod
  def payload(self, points, weights, corrupted, previous):
    """From rows [m, d], weights [m], flags [m] (float64, float64, bool) and the previous aggregate [d]."""

  def client_value(self, own, payload, seed_pair):
    """The update [d] a corrupted client sends (`seed_pair`: int32 [2], per run, round and update)."""
    del own, seed_pair
    return payload

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: gather (row, weight, flag) of every client, compute `payload` at the server, broadcast it,
    and replace each corrupted update by `client_value`."""
    leaf_types = widening.leaf_types(update_type)
    sizes = [int(np.prod(t.shape, dtype=np.int64)) for t in leaf_types]
    dimension = sum(sizes)
    gathered_type = tff.TensorType(np.float64, [None, dimension + 2])

    def flat(update):
      return tf.concat([tf.reshape(tf.cast(t, tf.float64), [-1]) for t in widening.leaves(update, update_type)], 0)

    @tff.tensorflow.computation(update_type, np.bool_, weight_type)
    def row(update, corrupted, weight):
      return tf.concat([flat(update), tf.cast(tf.stack([weight, tf.cast(corrupted, weight.dtype)]), tf.float64)], 0)

    @tff.tensorflow.computation
    def empty():
      return tf.compat.v1.placeholder_with_default(tf.zeros([0, dimension + 2], tf.float64), [None, dimension + 2])

    @tff.tensorflow.computation(gathered_type, tff.TensorType(np.float64, [dimension + 2]))
    def append(gathered, one):
      return tf.concat([gathered, one[None]], 0)

    @tff.tensorflow.computation(gathered_type, gathered_type)
    def merge(first, second):
      return tf.concat([first, second], 0)

    @tff.tensorflow.computation(gathered_type)
    def report(gathered):
      return gathered

    @tff.tensorflow.computation(update_type)
    def flatten(update):
      return flat(update)

    @tff.tensorflow.computation(gathered_type, tff.TensorType(np.float64, [dimension]))
    def compute_payload(gathered, previous):
      return self.payload(gathered[:, :dimension], gathered[:, dimension], gathered[:, dimension + 1] > 0, previous)

    @tff.tensorflow.computation(update_type, np.bool_, compute_payload.type_signature.result, np.int32)
    def apply(update, corrupted, payload, round_num):
      def attacked():
        own = flat(update)
        fingerprint = tf.reduce_sum(tf.cast(tf.bitcast(tf.cast(own, tf.float32), tf.int32), tf.int64)) % 2147483647
        vector = self.client_value(own, payload, tf.stack([seed + round_num, tf.cast(fingerprint, tf.int32)]))
        leaves = [tf.cast(tf.reshape(piece, t.shape), t.dtype) for piece, t in zip(tf.split(vector, sizes), leaf_types)]
        return widening.pack(update_type, iter(leaves))
      unchanged = lambda: widening.pack(update_type, iter(widening.leaves(update, update_type)))
      return tf.cond(corrupted, attacked, unchanged)

    @tff.tensorflow.computation
    def no_previous():
      return tf.zeros([dimension], tf.float64)

    def corrupt(update, corrupted, weight, round_num, previous):
      gathered = tff.federated_aggregate(
          tff.federated_map(row, (update, corrupted, weight)), empty(), append, merge, report
      )
      previous_flat = (tff.federated_map(flatten, previous) if previous is not None
                       else tff.federated_eval(no_previous, tff.SERVER))
      payload = tff.federated_map(compute_payload, (gathered, previous_flat))
      return tff.federated_map(
          apply, (update, corrupted, tff.federated_broadcast(payload), tff.federated_broadcast(round_num))
      )

    return corrupt
