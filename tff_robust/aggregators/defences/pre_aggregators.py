"""The pre-aggregators of the registry that already had factories: static clipping, bucketing, the norm filter
and nearest-neighbour mixing (NNM, NOT secure-aggregation compatible: it gathers the updates).

Each builds the existing factory around the factory of the rest of the chain; each stacked form maps the
stacked (points [m, d], weights [m]) to what that factory hands its inner factory.
"""

import math

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import bucketing
from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import nearest_neighbor_mixing
from tff_robust.aggregators import norm_clipping
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators.defences import implementations


def _secure_counts(context):
  return implementations.secure_count_factory() if context.secure_bounds is not None else None


def _clipping_factory(arguments, inner, context):
  return norm_clipping.NormClippingFactory(arguments['c'], mean_factory=inner, count_factory=_secure_counts(context))


def _stacked_clipping(arguments, context):
  del context
  return lambda points, weights: (implementations.clip_rows(points, arguments['c']), weights)


CLIPPING = implementations.Implementation(_clipping_factory, _stacked_clipping)


def _bucketing_factory(arguments, inner, context):
  bounds = context.secure_bounds
  sum_factory = None
  if bounds is not None:
    weight = bounds.max_client_weight
    sum_factory = tff.aggregators.SecureSumFactory(float(max(weight * bounds.value_bound, weight)))
  return bucketing.BucketingFactory(
      inner, bucket_size=arguments['s'], max_clients=context.clients_per_round, keys=arguments['keys'],
      sum_factory=sum_factory, count_factory=_secure_counts(context),
  )


def _stacked_bucketing(arguments, context):
  """The identity permutation: row i falls in bucket min(i // s, K - 1), K = ceil(clients_per_round / s), and
  is replaced by its bucket's weighted mean (0 for a bucket without weight), keeping its own weight. The
  factory draws a random permutation each round; this is the factory's result for clients in key order."""
  size = arguments['s']
  num_buckets = math.ceil(context.clients_per_round / size)

  def bucket_means(points, weights):
    buckets = tf.minimum(tf.range(tf.shape(points)[0]) // size, num_buckets - 1)
    sums = tf.math.unsorted_segment_sum(points * weights[:, None], buckets, num_buckets)
    totals = tf.math.unsorted_segment_sum(weights, buckets, num_buckets)
    return tf.gather(tf.math.divide_no_nan(sums, totals[:, None]), buckets), weights

  return bucket_means


BUCKETING = implementations.Implementation(_bucketing_factory, _stacked_bucketing)


def _norm_filter_factory(arguments, inner, context):
  bounds, quantile_factory = context.secure_bounds, None
  if bounds is not None:  # the quantile's summands are 0/1 indicators times the client weight
    quantile_factory = histogram_quantile.SecureHistogramQuantileFactory(
        0.5, mean_factory=implementations.secure_mean_factory(1.0, bounds.max_client_weight),
        count_factory=implementations.secure_count_factory(),
    )
  return norm_filter.NormFilterFactory(
      inner, arguments['k'], quantile_factory=quantile_factory, count_factory=_secure_counts(context)
  )


def _stacked_norm_filter(arguments, context):
  """Rows with norm above k times the upper weighted median norm become zeros with weight 0. The factory's
  secure quantile is the lower edge of a bin of relative width 0.27% below that median
  (`SecureHistogramQuantileFactory`); this uses the exact median, as the factory does with
  `quantile.exact_quantile_factory(0.5)`."""
  del context
  multiplier = arguments['k']

  def filtered(points, weights):
    norms = implementations.row_norms(points)
    positive = weights > 0
    median = implementations.upper_quantile_among(
        norms, weights, positive, 0.5, otherwise=tf.zeros([], norms.dtype))
    keep = norms <= multiplier * median
    return tf.where(keep[:, None], points, tf.zeros_like(points)), tf.where(keep, weights, tf.zeros_like(weights))

  return filtered


NORM_FILTER = implementations.Implementation(_norm_filter_factory, _stacked_norm_filter)


def _nnm_factory(arguments, inner, context):
  del context
  return nearest_neighbor_mixing.NearestNeighborMixingFactory(inner, arguments['f'])


def _stacked_nnm(arguments, context):
  """Each row of positive weight replaced by the mean of the max(m - f, 1) rows of positive weight nearest to
  it (`nearest_neighbor_mixing.mix_one`); rows of weight 0 become zeros, as the factory's left-out clients."""
  del context
  num_byzantine = arguments['f']

  def mixed(points, weights):
    usable = weights > 0
    rows = tf.boolean_mask(points, usable)
    mixed_rows = tf.map_fn(lambda own: nearest_neighbor_mixing.mix_one(own, rows, num_byzantine), points)
    return tf.where(usable[:, None], mixed_rows, tf.zeros_like(points)), weights

  return mixed


NNM = implementations.Implementation(_nnm_factory, _stacked_nnm)
