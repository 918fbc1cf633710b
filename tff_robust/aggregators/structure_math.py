"""TensorFlow helpers on nested structures of tensors (a model update is a structure of tensors)."""

import tensorflow as tf


def global_l2_norm(structure) -> tf.Tensor:
  """Euclidean norm of all tensors of `structure` flattened and concatenated into one vector.

  Computed as s * ||x / s|| with s = max|x_j|, so neither tiny (1e-30) nor huge (1e30) entries underflow or
  overflow in the squares. Float64 inputs keep float64; everything else is computed in float32.
  """
  flat = tf.nest.flatten(structure)
  dtype = tf.float64 if any(t.dtype == tf.float64 for t in flat) else tf.float32
  vector = tf.concat([tf.reshape(tf.cast(t, dtype), [-1]) for t in flat], axis=0)
  scale = tf.reduce_max(tf.abs(vector))  # -inf for an empty structure, then treated as 0.
  safe_scale = tf.where(scale > 0, scale, tf.ones_like(scale))
  return safe_scale * tf.norm(vector / safe_scale)


def all_finite(structure) -> tf.Tensor:
  """Scalar bool: every entry of every tensor in `structure` is finite."""
  return tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)])


def zeros_where(condition: tf.Tensor, structure):
  """`structure` with every tensor replaced by zeros where the scalar `condition` is True."""
  return tf.nest.map_structure(lambda t: tf.where(condition, tf.zeros_like(t), t), structure)
