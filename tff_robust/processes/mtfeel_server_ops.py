"""MtFEEL's server-side TensorFlow ops: simplex projection, alpha-gradient of (7) and the objective.

The maths and its NumPy reference are in `tff_robust.core.mtfeel`; these are the same formulas on tensors.
"""

import tensorflow as tf


def project_to_simplex(v: tf.Tensor) -> tf.Tensor:
  """Euclidean projection of each row of a [rows, N] tensor onto the probability simplex (Duchi et al.)."""
  sorted_desc = tf.sort(v, axis=-1, direction='DESCENDING')
  cumulative = tf.cumsum(sorted_desc, axis=-1) - 1.0
  ranks = tf.cast(tf.range(1, tf.shape(v)[-1] + 1), v.dtype)
  rho = tf.reduce_sum(tf.cast(sorted_desc - cumulative / ranks > 0, tf.int32), axis=-1, keepdims=True)
  tau = tf.gather(cumulative, rho - 1, batch_dims=1) / tf.cast(rho, v.dtype)
  return tf.maximum(v - tau, 0.0)


def _penalty_root(alpha, lambdas, num_examples):
  return tf.sqrt(tf.reduce_sum(tf.square(lambdas[:, None] * alpha / num_examples[None, :])))


def alpha_gradient(losses, discrepancies, alpha, lambdas, num_examples, pen_scale):
  """lambda_k (L_km + dhat_km) + pen_scale lambda_k^2 alpha_km / (n_m^2 sqrt(S(alpha))): exact d(7)/dalpha."""
  penalty = pen_scale * tf.square(lambdas)[:, None] * alpha / tf.square(num_examples)[None, :]
  return lambdas[:, None] * (losses + discrepancies) + tf.math.divide_no_nan(
      penalty, _penalty_root(alpha, lambdas, num_examples)
  )


def objective(losses, discrepancies, alpha, lambdas, num_examples, pen_scale):
  """PsiHat of (7) with gamma = 0: sum lambda_k alpha_kj (L_kj + dhat_kj) + pen_scale sqrt(S(alpha))."""
  return (tf.reduce_sum(lambdas[:, None] * alpha * (losses + discrepancies))
          + pen_scale * _penalty_root(alpha, lambdas, num_examples))
