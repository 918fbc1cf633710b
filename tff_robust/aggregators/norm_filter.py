"""Norm filtering before a robust rule: clients whose update norm exceeds `multiplier` times a secure quantile
of the cohort's update norms take no part in the round.

Each round, with r_q the weighted `level`-quantile of the clients' L2 norms ||w_i|| (over all tensors of the
value together), found by `quantile_factory` (by default `SecureHistogramQuantileFactory`: secure histograms,
no norm leaves a client), client i keeps its weight alpha_i when ||w_i|| <= k r_q (k = `multiplier`) and
otherwise sends zeros with weight 0, as Delta-FL's filter drops clients; `inner_factory` aggregates the rest.
With `level` = 1/2 the threshold is k times the weighted median norm, so while honest clients hold more than
half the weight the threshold is set by honest norms: updates k times longer than a typical honest one (the
omniscient attack of the RFA paper sends -(2 S_G + S_C) / A_C, several times the honest mean's length) are
left out instead of pulling the inner rule. Norm bounds before aggregation are the usual defence against
large updates (Sun et al., "Can you really backdoor federated learning?", 2019, use a fixed bound); here the
bound follows the cohort's own scale, which shrinks as training converges.

What it does not do: an attacker that sends at most k r_q passes, and then only `inner_factory` (centered
clipping, the geometric median) stands against it; rounds whose corrupted clients hold half the weight or
more set r_q themselves. Like every client-side step under secure aggregation it trusts clients to run it
(a deployment would prove the norm bound inside the secure sum).

Secure aggregation: the quantile's passes are weighted means of 0/1 indicators and the dropped count a sum of
0/1 flags, so with secure factories there (`quantile_factory`'s `mean_factory` of `SecureSumFactory`s,
`count_factory=SecureSumFactory(1, 0)`) and a secure `inner_factory` (`CenteredClippingFactory` with
`centered_clipping.secure_mean_factory`) every client value reaches the server through a secure sum
(`privacy.assert_client_values_aggregated_securely`). The server learns r_q, how many clients were dropped and
the histogram search's shares: per pass, the weight share of norms below each of its B + 1 edges (the first pass
spans every scale, so it tells the norms apart within about a factor of 2; the second within 0.27% near r_q).
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import nonfinite
from tff_robust.aggregators import norm_gating
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


class NormFilterFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` running `inner_factory` over the clients with ||w_i|| <= multiplier r_level.

  Clients with a non-finite value or norm (or a non-finite or negative weight) are dropped too. The quantile is taken in
  float32 (float64 for float64 values); `SecureHistogramQuantileFactory` returns the lower edge of a bin
  holding the exact quantile, of relative width 0.27% in float32 for norms above 1 (0.0027 absolute below; in
  float64, whose range is wider, about 2.2% and 0.022), so the threshold is at most that much below k r_q.

  State and measurements: `norm_gating`'s; `threshold` is k r_q, the largest norm kept, and `num_dropped_clients`
  counts the clients whose weight was set to 0 (summed by `count_factory`).
  """

  def __init__(
      self,
      inner_factory: tff.aggregators.WeightedAggregationFactory,
      multiplier: float,
      level: float = 0.5,
      quantile_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      inner_factory: a `tff.aggregators.WeightedAggregationFactory`, the rule over the kept clients.
      multiplier: k >= 1, the largest kept norm as a multiple of the quantile.
      level: the quantile level q in (0, 1].
      quantile_factory: a weighted aggregation factory of a float scalar returning its weighted quantile at
        `level`; defaults to `histogram_quantile.SecureHistogramQuantileFactory(level)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 0/1 flags; defaults to
        `tff.aggregators.SumFactory()`.

    Raises:
      ValueError: if `multiplier` or `level` is outside its range.
      TypeError: if a factory has the wrong type.
    """
    self._inner_factory = type_checks.weighted_factory('inner_factory', inner_factory)
    self._multiplier = type_checks.check_number('multiplier', multiplier, minimum=1.0)
    self._level = type_checks.check_number('level', level, minimum=0.0, strict=True, maximum=1.0)
    if quantile_factory is None:
      quantile_factory = histogram_quantile.SecureHistogramQuantileFactory(self._level)
    self._quantile_factory = type_checks.weighted_factory('quantile_factory', quantile_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    norm_type = tff.TensorType(widening.value_dtype(value_type))
    inner_process = self._inner_factory.create(value_type, weight_type)
    quantile_process = self._quantile_factory.create(norm_type, weight_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    multiplier = self._multiplier

    @tff.tensorflow.computation(value_type)
    def norm(value):
      """||w||_2 over all tensors, in the norm dtype (inf or NaN for a non-finite value)."""
      leaves = [tf.cast(t, norm_type.dtype) for t in tf.nest.flatten(value)]
      return tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(t)) for t in leaves]))

    @tff.tensorflow.computation(norm_type)
    def threshold_of(quantile):
      return tf.constant(multiplier, norm_type.dtype) * quantile

    @tff.tensorflow.computation(value_type, weight_type, norm_type, norm_type)
    def filtered(value, weight, value_norm, threshold):
      """(value, weight, 0) if ||w|| <= threshold and the weight is finite and >= 0, else (zeros, 0, 1)."""
      keep = tf.logical_and(value_norm <= threshold, nonfinite.valid_weight(tf.cast(weight, norm_type.dtype)))
      kept_value = tf.nest.map_structure(lambda t: tf.where(keep, t, tf.zeros_like(t)), value)
      return kept_value, tf.where(keep, weight, tf.zeros_like(weight)), tf.cast(tf.logical_not(keep), tf.int32)

    init_fn = norm_gating.initialize(quantile_process, inner_process)

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      norms = tff.federated_map(norm, value)
      quantile = quantile_process.next(state[0], norms, weight)
      threshold = tff.federated_map(threshold_of, quantile.result)
      kept = tff.federated_map(filtered, (value, weight, norms, tff.federated_broadcast(threshold)))
      inner = inner_process.next(state[1], kept[0], kept[1])
      return norm_gating.output(
          quantile, quantile_process, inner, inner_process, threshold=threshold,
          count_name='num_dropped_clients', count=count_process.next(count_process.initialize(), kept[2]).result,
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)

