"""Client values that are not finite: zeroed, weighted 0 and counted, never propagated into an aggregate."""

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import structure_math


def build_drop_nonfinite(value_type, weight_type) -> tff.tensorflow.computation:
  """A TensorFlow computation (value, weight) -> (value', weight', flag).

  A client whose value has a NaN or Inf entry, or whose weight is not finite, gets value' = 0, weight' = 0
  and flag = 1; any other client passes through unchanged with flag = 0 (sum the flags to count them).
  """

  @tff.tensorflow.computation(value_type, weight_type)
  def drop_nonfinite(value, weight):
    nonfinite = tf.logical_not(tf.logical_and(structure_math.all_finite(value), tf.math.is_finite(weight)))
    return (
        structure_math.zeros_where(nonfinite, value),
        tf.where(nonfinite, tf.zeros_like(weight), weight),
        tf.cast(nonfinite, tf.int32),
    )

  return drop_nonfinite
