"""What a registered component provides: its factory and its stacked TensorFlow form, and their shared parts.

Each registry entry (`registry.REGISTRY`) names an `Implementation`:
  - `build(arguments, inner, context)` returns the component's `tff.aggregators.WeightedAggregationFactory`:
    a rule gets `inner=None`, a pre-aggregator wraps the factory `inner` of the rest of the chain. With
    `context.secure_bounds` set, every sum of client values is a `tff.aggregators.SecureSumFactory`.
  - `stacked(arguments, context)` returns its TensorFlow form over the round's stacked updates: a rule maps
    (points [m, d], weights [m], center [d]) to the aggregate [d] (`center` the previous aggregate, which only
    centered clipping reads); a pre-aggregator maps (points, weights) to new (points, weights).
`arguments` are the component's parameters (`registry.Component.arguments`). The stacked forms compute in
float32 what the factories compute on float32 updates; rows of weight 0 are clients that take no part.
"""

import dataclasses
from typing import Callable, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import nonfinite
from tff_robust.aggregators import robust_rules
from tff_robust.core import superquantile

StackedRule = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]
StackedPreAggregator = Callable[[tf.Tensor, tf.Tensor], tuple]


@dataclasses.dataclass(frozen=True)
class SecureBounds:
  """What the secure sums of a secure chain are bounded by: every entry of every update lies in
  [-value_bound, value_bound] and every client weight in [0, max_client_weight]."""

  value_bound: float
  max_client_weight: float


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """The round's cohort size n, the number f of Byzantine clients the parameters `f` default to, and the secure
  sums' bounds (None: plain sums)."""

  clients_per_round: int
  num_byzantine: int
  secure_bounds: Optional[SecureBounds] = None


@dataclasses.dataclass(frozen=True)
class Implementation:
  """A component's factory builder and stacked form (module docstring)."""

  build: Callable
  stacked: Callable


def secure_count_factory() -> tff.aggregators.SecureSumFactory:
  """Secure sum of int32 0/1 flags."""
  return tff.aggregators.SecureSumFactory(1, 0)


def secure_mean_factory(value_bound: float, max_client_weight: float) -> tff.aggregators.MeanFactory:
  """A `MeanFactory` of secure sums for values with entries in [-value_bound, value_bound] and weights in
  [0, max_client_weight] (the weighted value summands lie in [-W V, W V]): centered clipping's, whose residuals
  are bounded by its radius as these values are by V."""
  return centered_clipping.secure_mean_factory(value_bound, max_client_weight)


def weighted_mean(points, weights):
  """TensorFlow: sum_i w_i p_i / sum_i w_i, or zeros if no weight is positive (`no_nan_division`)."""
  total = tf.reduce_sum(weights)
  return tf.math.divide_no_nan(tf.reduce_sum(points * weights[:, None], axis=0), total)


def row_norms(points):
  """TensorFlow: the L2 norm of each row of `points` [m, d]."""
  return tf.norm(points, axis=1)


def upper_quantile_among(values, weights, counted, level, otherwise):
  """TensorFlow: the upper weighted `level` quantile (ties within `superquantile.TIE_TOLERANCE`) of the entries of
  `values` [m] where `counted` [m] holds, with `weights` [m]; `otherwise` if no entry counts. The stacked form of
  the quantile the norm-based pre-aggregators compute with their quantile factories."""
  return tf.cond(
      tf.reduce_any(counted),
      lambda: robust_rules.coordinate_upper_quantile(
          tf.boolean_mask(values, counted)[:, None], tf.boolean_mask(weights, counted), level,
          superquantile.TIE_TOLERANCE)[0],
      lambda: otherwise,
  )


def clip_rows(points, clip_norm):
  """TensorFlow: each row p scaled by min(1, clip_norm / ||p||) (a zero row stays zero)."""
  factors = tf.minimum(tf.math.divide_no_nan(clip_norm, row_norms(points)), 1.0)
  factors = tf.where(row_norms(points) > 0, factors, tf.ones_like(factors))
  return points * factors[:, None]


def without_nonfinite(points, weights):
  """TensorFlow: rows with a NaN or Inf entry or a non-finite or negative weight become zeros with weight 0, as
  every factory's `widening.widen_and_drop_nonfinite_at_clients` does."""
  finite = tf.logical_and(tf.reduce_all(tf.math.is_finite(points), axis=1), nonfinite.valid_weight(weights))
  return tf.where(finite[:, None], points, tf.zeros_like(points)), tf.where(finite, weights, tf.zeros_like(weights))


def zeros_if_nonfinite(vector):
  """TensorFlow: `vector`, or zeros if an entry is not finite (the factories' last step)."""
  return tf.where(tf.reduce_all(tf.math.is_finite(vector)), vector, tf.zeros_like(vector))
