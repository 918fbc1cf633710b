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

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


class NormClippingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for the weighted mean of client updates clipped to L2 norm `clipping_norm`.

  Client values that contain NaN or Inf (or carry a non-finite weight) get weight 0 and are counted; with
  no weight left the aggregate is zero.

  Types: what `tff.aggregators.MeanFactory` takes (floating values of any width, also mixed in a structure;
  a floating or integer scalar weight). Updates are clipped and averaged in float32 (float64 if a tensor is
  float64), weights are float32 (float64 with float64 values or weights), and the result has the value's
  dtypes (`widening`); `mean_factory` is created for those widened types.

  Measurements:
    - `clipped_count`: clients whose update had norm above `clipping_norm`.
    - `num_nonfinite_clients`: clients whose value or weight was not finite.
    - `mean`: measurements of the inner weighted-mean call (absent when empty, as TFF's `MeanFactory`'s are).
  """

  def __init__(
      self, clipping_norm: float, mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None
  ):
    """Initializes the factory.

    Args:
      clipping_norm: the bound C > 0 on each client update's L2 norm.
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for the mean of the clipped updates;
        defaults to `tff.aggregators.MeanFactory(no_nan_division=True)`.

    Raises:
      TypeError: if `mean_factory` is not a `WeightedAggregationFactory`.
      ValueError: if `clipping_norm` is not a finite number > 0.
    """
    self._clipping_norm = type_checks.check_number('clipping_norm', clipping_norm, minimum=0.0, strict=True)
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    wide_type = widening.wide_value_type(value_type)
    wide_weight_type = tff.TensorType(widening.scalar_dtype(value_type, weight_type))
    mean_process = self._mean_factory.create(wide_type, wide_weight_type)
    widen_and_drop_nonfinite = widening.build_widen_and_drop_nonfinite(value_type, weight_type)
    clipping_norm = self._clipping_norm

    @tff.tensorflow.computation(wide_type)
    def clip(value):
      """(w min(1, C / ||w||), 1 if ||w|| > C else 0)."""
      norm = structure_math.global_l2_norm(value)
      factor = tf.minimum(clipping_norm / norm, 1.0)  # C / 0 = inf: a zero update is kept as it is
      clipped = tf.nest.map_structure(lambda tensor: tf.cast(factor, tensor.dtype) * tensor, value)
      return clipped, tf.cast(norm > clipping_norm, tf.int32)

    @tff.tensorflow.computation(wide_type)
    def narrow_or_zeros_if_nonfinite(mean):
      return widening.narrow_or_zeros_if_nonfinite(mean, value_type)

    @tff.federated_computation()
    def init_fn():
      return mean_process.initialize()

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      sanitized = tff.federated_map(widen_and_drop_nonfinite, (value, weight))
      clipped, was_clipped = tff.federated_map(clip, sanitized[0])
      output = mean_process.next(state, clipped, sanitized[1])
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          clipped_count=tff.federated_sum(was_clipped),
          num_nonfinite_clients=tff.federated_sum(sanitized[2]),
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=output.state,
          result=tff.federated_map(narrow_or_zeros_if_nonfinite, output.result),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
