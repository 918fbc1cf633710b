"""Client values that are not finite, and negative weights: zeroed, weighted 0 and counted, never propagated into an
aggregate."""

import tensorflow as tf

from tff_robust.aggregators import structure_math


def valid_weight(weight):
  """TensorFlow: whether the floating `weight` (a scalar or a tensor of them) is finite and >= 0, the weights every
  weighted rule here takes."""
  return tf.logical_and(tf.math.is_finite(weight), weight >= tf.zeros_like(weight))


def leave_out_if_nonfinite(value, weight, also_checked=()):
  """TensorFlow: (value, weight) -> (value', weight', nonfinite), the rule every client-side filter shares.

  `nonfinite` is True when a floating entry of `value` or of `also_checked` (e.g. a client's new state) is
  NaN or Inf, or `weight` is not finite or is negative; then value' = 0 and weight' = 0, otherwise both pass
  unchanged. Integer tensors cannot be non-finite and are skipped. A negative weight is left out with the
  non-finite ones because every weighted rule here needs alpha_i >= 0 (RFA's eq. (6) takes alpha_i > 0): one
  client of weight -W would turn a weighted mean's denominator towards 0 and its sum away from every client.
  """
  floats = [t for t in tf.nest.flatten([value, also_checked]) if t.dtype.is_floating]
  nonfinite = tf.logical_not(tf.logical_and(structure_math.all_finite(floats), valid_weight(weight)))
  return (
      structure_math.zeros_where(nonfinite, value),
      tf.where(nonfinite, tf.zeros_like(weight), weight),
      nonfinite,
  )

