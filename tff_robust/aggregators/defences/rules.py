"""The secure-compatible rules of the registry: the weighted mean, the geometric median, centered clipping.

Each factory is the existing one (`tff.aggregators.MeanFactory`, `GeometricMedianFactory` /
`SecureGeometricMedianFactory`, `CenteredClippingFactory`); each stacked form computes the same iteration on
the stacked updates.
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import secure_geometric_median
from tff_robust.aggregators.defences import implementations


def _mean_factory(arguments, inner, context):
  del arguments, inner
  bounds = context.secure_bounds
  if bounds is None:
    return tff.aggregators.MeanFactory(no_nan_division=True)
  return implementations.secure_mean_factory(bounds.value_bound, bounds.max_client_weight)


def _stacked_mean(arguments, context):
  del arguments, context
  return lambda points, weights, center: implementations.weighted_mean(points, weights)


MEAN = implementations.Implementation(_mean_factory, _stacked_mean)


def _gm_factory(arguments, inner, context):
  del inner
  bounds = context.secure_bounds
  if bounds is None:
    return geometric_median.GeometricMedianFactory(
        num_passes=arguments['passes'], smoothing=arguments['nu'], init=arguments['init']
    )
  return secure_geometric_median.SecureGeometricMedianFactory(
      value_bound=bounds.value_bound, max_client_weight=bounds.max_client_weight, smoothing=arguments['nu'],
      num_passes=arguments['passes'], init=arguments['init'],
  )


def _stacked_gm(arguments, context):
  """Smoothed Weiszfeld (RFA's eq. 16) as `GeometricMedianFactory` runs it: from the weighted mean (one pass)
  or from zero, then v <- sum_i beta_i w_i / sum_i beta_i with beta_i = alpha_i / max(nu, ||v - w_i||)."""
  del context
  passes, nu, init = arguments['passes'], arguments['nu'], arguments['init']

  def gm(points, weights, center):
    steps, estimate = passes, tf.zeros_like(center)  # `center` only gives the shape
    if init == 'mean':
      estimate, steps = implementations.weighted_mean(points, weights), passes - 1
    for _ in range(steps):
      distances = implementations.row_norms(points - estimate[None])
      beta = weights / tf.maximum(tf.constant(nu, weights.dtype), distances)
      estimate = implementations.weighted_mean(points, beta)
    return implementations.zeros_if_nonfinite(estimate)

  return gm


GM = implementations.Implementation(_gm_factory, _stacked_gm)


def _centered_clipping_factory(arguments, inner, context):
  del inner
  tau, iterations, bounds = arguments['tau'], arguments['iters'], context.secure_bounds
  if bounds is None:
    return centered_clipping.CenteredClippingFactory(tau, iterations)
  return centered_clipping.CenteredClippingFactory(
      tau, iterations, mean_factory=centered_clipping.secure_mean_factory(tau, bounds.max_client_weight),
      count_factory=implementations.secure_count_factory(),
  )


def _stacked_centered_clipping(arguments, context):
  """v <- v + sum_i alpha_i clip(w_i - v, tau) / sum_i alpha_i, `iters` times from `center` (the previous
  round's aggregate, the factory's state); no weight left leaves v where it is."""
  del context
  tau, iterations = arguments['tau'], arguments['iters']

  def cc(points, weights, center):
    for _ in range(iterations):
      residuals = implementations.clip_rows(points - center[None], tau)
      center = center + implementations.weighted_mean(residuals, weights)
    return implementations.zeros_if_nonfinite(center)

  return cc


CENTERED_CLIPPING = implementations.Implementation(_centered_clipping_factory, _stacked_centered_clipping)
