"""Adaptive robust clipping (ARC; Allouah, Guerraoui, Gupta, Jellouli, Rizk, Stephan, 2024, "The Vital Role of
Gradient Clipping in Byzantine-Resilient Distributed Learning", arXiv:2405.14432, Algorithm 1) before any rule,
secure-aggregation compatible.

The paper: of n updates with at most f Byzantine, clip the k = floor(2 (f/n) (n - f)) of largest norm to the
norm C of the next one (the (k+1)-th largest), x_i -> x_i min(1, C / ||x_i||); then run the robust rule
(`tff_robust.core.arc` is the NumPy reference). C is the (n - k)-th smallest of the n norms: the 'upper'
quantile of the norms, each of weight 1, at level tau = (n - k - 1/2) / n (`core.arc.quantile_level`).

Here, as the norm filter does (`norm_filter`), no norm leaves a client: each client sends its norm only into
`quantile_factory` (by default `SecureHistogramQuantileFactory(tau)`: means of 0/1 indicators), the server
broadcasts the threshold, each client clips its own update and hands it, with its own weight, to
`inner_factory`. With secure sums in the quantile, the clipped count and `inner_factory`, every client value
reaches the server through a secure sum (`privacy.assert_client_values_aggregated_securely`); the server
learns the threshold, how many clients were clipped and the histogram search's shares (the weight share of
norms below each bin edge of each pass: `norm_filter`'s module docstring).

How this differs from the paper:
  - The secure quantile returns the lower edge eta of a bin of relative width 0.27% (|C| > 1; 0.0027 absolute below;
    about 2.2% and 0.022 in float64) holding C, so the threshold is eta in [C - bin_width, C]: the clients with norm in
    (eta, C] are clipped too (the client of norm C among them, so `num_clipped_clients` is k + 1 when eta < C), and each
    update moves by at most `bin_width`. `quantile.exact_quantile_factory(tau)` (gathers the norms: not secure) gives
    the paper's C exactly.
  - Weights: the paper counts vectors. So does this factory: every client with a finite update and a finite
    weight > 0 counts once in the quantile, whatever its weight (`tff.aggregators` weights only enter
    `inner_factory`). n is the cohort size given at construction; in a round where only m < n clients count
    (the others left out with weight 0), the threshold is the upper tau-quantile of their m norms.
  - With k = 0 (f = 0) ARC is the identity and the factory is `inner_factory` itself (no quantile passes).
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import norm_gating
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening
from tff_robust.aggregators.defences import implementations
from tff_robust.core import arc


class AdaptiveRobustClippingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory`: ARC with f = `num_byzantine` of n = `num_clients`, then `inner_factory`.

  State and measurements: `norm_gating`'s; `threshold` is the clipping norm (eta, see the module docstring), and
  `num_clipped_clients` counts the clients whose update norm exceeded it (summed by `count_factory`).
  """

  def __init__(
      self,
      inner_factory: tff.aggregators.WeightedAggregationFactory,
      *,
      num_byzantine: int,
      num_clients: int,
      quantile_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      inner_factory: a `tff.aggregators.WeightedAggregationFactory`, the rule over the clipped updates.
      num_byzantine: f, an integer with 0 <= f < num_clients / 2.
      num_clients: n, the cohort size, an integer >= 1.
      quantile_factory: a weighted aggregation factory of a float scalar returning its 'upper' weighted
        quantile at `core.arc.quantile_level(n, f)`; defaults to `SecureHistogramQuantileFactory` at that level.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 0/1 flags; defaults to
        `tff.aggregators.SumFactory()`. Secure: `tff.aggregators.SecureSumFactory(1, 0)`.

    Raises:
      ValueError: if the counts are out of range.
      TypeError: if a factory has the wrong type.
    """
    self._inner_factory = type_checks.weighted_factory('inner_factory', inner_factory)
    self.clipped_count = arc.clipped_count(num_clients, num_byzantine)
    self.level = arc.quantile_level(num_clients, num_byzantine)
    if quantile_factory is None:
      quantile_factory = histogram_quantile.SecureHistogramQuantileFactory(self.level)
    self._quantile_factory = type_checks.weighted_factory('quantile_factory', quantile_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. With no client to clip (`clipped_count == 0`)
    it is the inner factory's process."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    if self.clipped_count == 0:
      return self._inner_factory.create(value_type, weight_type)
    norm_type = tff.TensorType(widening.value_dtype(value_type))
    inner_process = self._inner_factory.create(value_type, weight_type)
    quantile_process = self._quantile_factory.create(norm_type, norm_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))

    @tff.tensorflow.computation(value_type, weight_type)
    def norm_and_count(value, weight):
      """(||w||_2 over all tensors, 1 if the client counts among the n, else 0), both of the norm dtype."""
      norm = tf.cast(structure_math.global_l2_norm(value), norm_type.dtype)
      counts = tf.logical_and(tf.math.is_finite(norm), tf.math.is_finite(tf.cast(weight, norm_type.dtype)))
      return norm, tf.cast(tf.logical_and(counts, weight > 0), norm_type.dtype)

    @tff.tensorflow.computation(value_type, norm_type, norm_type)
    def clip(value, norm, threshold):
      """(w min(1, threshold / ||w||), 1 if clipped); a zero or non-finite update passes unchanged."""
      clipped = tf.logical_and(tf.math.is_finite(norm), norm > threshold)
      factor = tf.where(clipped, threshold / tf.where(clipped, norm, tf.ones_like(norm)), tf.ones_like(norm))
      value = tf.nest.map_structure(lambda t: tf.cast(factor, t.dtype) * t, value)
      return value, tf.cast(clipped, tf.int32)

    init_fn = norm_gating.initialize(quantile_process, inner_process)

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      norms, counts = tff.federated_map(norm_and_count, (value, weight))
      quantile = quantile_process.next(state[0], norms, counts)
      clipped, was_clipped = tff.federated_map(clip, (value, norms, tff.federated_broadcast(quantile.result)))
      inner = inner_process.next(state[1], clipped, weight)
      return norm_gating.output(
          quantile, quantile_process, inner, inner_process, threshold=quantile.result,
          count_name='num_clipped_clients', count=count_process.next(count_process.initialize(), was_clipped).result,
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)


def _arc_factory(arguments, inner, context):
  quantile_factory, count_factory, bounds = None, None, context.secure_bounds
  level = arc.quantile_level(context.clients_per_round, arguments['f'])
  if bounds is not None:  # indicators in [0, 1] of weight 0 or 1
    quantile_factory = histogram_quantile.SecureHistogramQuantileFactory(
        level, mean_factory=implementations.secure_mean_factory(1.0, 1.0),
        count_factory=implementations.secure_count_factory(),
    )
    count_factory = implementations.secure_count_factory()
  return AdaptiveRobustClippingFactory(
      inner, num_byzantine=arguments['f'], num_clients=context.clients_per_round,
      quantile_factory=quantile_factory, count_factory=count_factory,
  )


def _stacked_arc(arguments, context):
  """Every row of positive weight clipped to the upper quantile, at `core.arc.quantile_level(n, f)` (n the
  cohort size given at build time), of the norms of those rows, each counted once: with n such rows, the
  (k+1)-th largest norm of `core.arc`; rows of weight 0 pass unchanged. The factory computes the same with
  `quantile.exact_quantile_factory`, and the lower edge of the quantile's bin with its default secure one."""
  level = arc.quantile_level(context.clients_per_round, arguments['f'])

  def clipped(points, weights):
    norms = implementations.row_norms(points)
    counted = weights > 0
    threshold = implementations.upper_quantile_among(
        norms, tf.ones_like(norms), counted, level, otherwise=tf.reduce_max(norms))
    return tf.where(counted[:, None], implementations.clip_rows(points, threshold), points), weights

  return clipped


ARC = implementations.Implementation(_arc_factory, _stacked_arc)
