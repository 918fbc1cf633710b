"""Client values that are not finite: zeroed, weighted 0 and counted, never propagated into an aggregate."""

import tensorflow as tf

from tff_robust.aggregators import structure_math


def leave_out_if_nonfinite(value, weight, also_checked=()):
  """TensorFlow: (value, weight) -> (value', weight', nonfinite), the rule every client-side filter shares.

  `nonfinite` is True when a floating entry of `value` or of `also_checked` (e.g. a client's new state) is
  NaN or Inf, or `weight` is not finite; then value' = 0 and weight' = 0, otherwise both pass unchanged.
  Integer tensors cannot be non-finite and are skipped.
  """
  floats = [t for t in tf.nest.flatten([value, also_checked]) if t.dtype.is_floating]
  nonfinite = tf.logical_not(tf.logical_and(structure_math.all_finite(floats), tf.math.is_finite(weight)))
  return (
      structure_math.zeros_where(nonfinite, value),
      tf.where(nonfinite, tf.zeros_like(weight), weight),
      nonfinite,
  )

