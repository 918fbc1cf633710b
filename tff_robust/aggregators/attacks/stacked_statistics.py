"""TensorFlow versions of `tff_robust.core.attacks.honest_statistics` and `directions` over the gathered rows.

`points` [m, d] float64, `weights` [m], `corrupted` [m] bool; the honest rows are the uncorrupted ones with a
positive weight and finite values.
"""

import tensorflow as tf

from tff_robust.aggregators import robust_rules


def honest_mask(points, weights, corrupted):
  """Rows that count as honest: not corrupted, positive weight and every coordinate finite."""
  finite = tf.reduce_all(tf.math.is_finite(points), axis=1)
  return tf.logical_and(tf.logical_not(corrupted), tf.logical_and(weights > 0, finite))


def mean_and_std(points, weights, honest):
  """The honest weighted mean and coordinate-wise std (ddof = 0); zeros with no honest weight."""
  w = tf.where(honest, weights, tf.zeros_like(weights))
  clean = tf.where(honest[:, None], points, tf.zeros_like(points))
  total = tf.reduce_sum(w)
  mean = tf.math.divide_no_nan(tf.linalg.matvec(clean, w, transpose_a=True), total)
  variance = tf.math.divide_no_nan(tf.linalg.matvec(tf.square(clean - mean), w, transpose_a=True), total)
  return mean, tf.sqrt(variance)


def alie_z_max(cohort_size, num_corrupted):
  """Phi^{-1}((n - s) / n), s = max(floor(n/2 + 1) - m, 1) (Baruch et al. 2019, Algorithm 3), float64; -inf for
  n = 1 (Phi^{-1}(0))."""
  supporters = tf.maximum(cohort_size // 2 + 1 - num_corrupted, 1)
  return tf.math.ndtri(tf.cast(cohort_size - supporters, tf.float64) / tf.cast(cohort_size, tf.float64))


def median_norm(points, weights, honest):
  """The honest rows' weighted median norm (`robust_rules.coordinate_median` of the norms); 0 without one."""
  norms = tf.norm(tf.boolean_mask(points, honest), axis=1)
  honest_weights = tf.boolean_mask(weights, honest)
  return tf.cond(
      tf.size(norms) > 0,
      lambda: robust_rules.coordinate_median(norms[:, None], honest_weights)[0],
      lambda: tf.constant(0.0, points.dtype),
  )


def omniscient_target(points, weights, corrupted):
  """-(2 S_G + S_C) / A_C (zeros without corrupted weight)."""
  corrupted_weights = tf.where(corrupted, weights, tf.zeros_like(weights))
  honest_sum = tf.linalg.matvec(points, weights - corrupted_weights, transpose_a=True)
  corrupted_sum = tf.linalg.matvec(points, corrupted_weights, transpose_a=True)
  return tf.math.divide_no_nan(-(2 * honest_sum + corrupted_sum), tf.reduce_sum(corrupted_weights))


def alie_target(points, weights, corrupted, honest):
  """mu - z_max sigma of the round (n the gathered rows, m the corrupted ones)."""
  mean, std = mean_and_std(points, weights, honest)
  z = alie_z_max(tf.shape(points)[0], tf.reduce_sum(tf.cast(corrupted, tf.int32)))
  return mean - tf.math.multiply_no_nan(tf.cast(z, points.dtype), std)


def perturbation(direction: str, mean, std):
  """Shejwalkar & Houmansadr's p: -mu/||mu|| (0 if mu = 0), -sigma or -sign(mu)."""
  if direction == 'unit_vec':
    return -tf.math.divide_no_nan(mean, tf.norm(mean))
  if direction == 'std':
    return -std
  if direction == 'sign':
    return -tf.sign(mean)
  raise ValueError(f'direction must be unit_vec, std or sign, got {direction!r}')
