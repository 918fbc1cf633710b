"""Norm clipping (Sun et al., 2019): each client update scaled to L2 norm at most C, then the weighted mean.

Client k sends w_k min(1, C / ||w_k||), the norm taken over the whole update (all tensors together), and the
server gets the weighted mean of the clipped updates from an inner mean process, which may be a
`SecureSumFactory`-backed `MeanFactory`: every clipped entry lies in [-C, C].

`tff.aggregators.clipping_factory(C, MeanFactory())` computes the same thing, but takes each tensor's norm in
the tensor's own dtype and its square in float32: a float16 update of norm above 256 or a float32 one above
~1.8e19 gets an infinite norm and is zeroed instead of clipped, and float64 updates are clipped to float32
precision. Here the norm is `structure_math.global_l2_norm` (overflow- and underflow-safe) and the
arithmetic is float32 or wider (`widening`).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import call_counts
from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


class NormClippingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for the weighted mean of client updates clipped to L2 norm `clipping_norm`.

  Client values that contain NaN or Inf (or carry a non-finite or negative weight) get weight 0 and are counted; with
  no weight left the aggregate is zero.

  Types: what `tff.aggregators.MeanFactory` takes (floating values of any width, also mixed in a structure;
  a floating or integer scalar weight). Updates are clipped and averaged in float32 (float64 if a tensor is
  float64), weights are float32 (float64 with float64 values or weights), and the result has the value's
  dtypes (`widening`); `mean_factory` is created for those widened types.

  `mean_factory` may be any weighted factory, e.g. a robust rule: clipping is then the static pre-aggregation
  clipping of robust-FL frameworks (ByzFL's `Clipping`) before that rule.

  Measurements:
    - `secure_average_calls`: those of `mean_factory`'s process (1 if it reports none: a mean).
    - `clipped_count`: clients whose update had norm above `clipping_norm`.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative.
    - `mean`: measurements of the inner weighted-mean call (absent when empty, as TFF's `MeanFactory`'s are).

  Secure aggregation: a `mean_factory` of secure sums (every clipped entry lies in [-C, C]) and
  `count_factory=tff.aggregators.SecureSumFactory(1, 0)`.
  """

  def __init__(
      self,
      clipping_norm: float,
      mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      clipping_norm: the bound C > 0 on each client update's L2 norm.
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for the mean of the clipped updates;
        defaults to `tff.aggregators.MeanFactory(no_nan_division=True)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing the int32 0/1 clipped and
        non-finite flags; defaults to `tff.aggregators.SumFactory()`.

    Raises:
      TypeError: if a factory has the wrong type.
      ValueError: if `clipping_norm` is not a finite number > 0.
    """
    self._clipping_norm = type_checks.check_number('clipping_norm', clipping_norm, minimum=0.0, strict=True)
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    mean_process = self._mean_factory.create(wide_type, wide_weight_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    clipping_norm = self._clipping_norm

    @tff.tensorflow.computation(wide_type)
    def clip(value):
      """(w min(1, C / ||w||), 1 if ||w|| > C else 0)."""
      norm = structure_math.global_l2_norm(value)
      factor = tf.minimum(clipping_norm / norm, 1.0)  # C / 0 = inf: a zero update is kept as it is
      clipped = tf.nest.map_structure(lambda tensor: tf.cast(factor, tensor.dtype) * tensor, value)
      return clipped, tf.cast(norm > clipping_norm, tf.int32)

    @tff.federated_computation()
    def init_fn():
      return mean_process.initialize()

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      clipped, was_clipped = tff.federated_map(clip, value)
      output = mean_process.next(state, clipped, weight)
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=call_counts.total_calls((output.measurements, mean_process)),
          clipped_count=count_process.next(count_process.initialize(), was_clipped).result,
          num_nonfinite_clients=count_process.next(count_process.initialize(), nonfinite).result,
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=output.state,
          result=widening.narrow_or_zeros_if_nonfinite_at_server(output.result, value_type),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
