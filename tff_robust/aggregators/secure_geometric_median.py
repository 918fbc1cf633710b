"""The geometric median by smoothed Weiszfeld with every sum a secure sum, its bounds derived, clipping counted.

Each pass of RFA's Algorithm 2 is one weighted mean, eq. (16): v^(r+1) = sum_i beta_i w_i / sum_i beta_i with
beta_i = alpha_i / max(nu, ||v^(r) - w_i||). A secure sum (`tff.aggregators.SecureSumFactory`) clips each
summand into fixed bounds and quantises it to 32 bits, so the bounds must hold every summand of every pass and
be no wider than needed. With |w_ij| <= V (`value_bound`), 0 <= alpha_i <= W (`max_client_weight`) and the
iterates in the values' convex hull (so ||v - w_i|| <= 2 V sqrt(n) for n coordinates):
    weights:  alpha_i <= W (first pass),  beta_i <= W / nu                    -> W_b = W max(1, 1/nu)
    values:   alpha_i |w_ij| <= W V,  beta_i |w_ij| <= W V / nu,  and the objective's summands
              alpha_i ||v - w_i|| <= 2 W V sqrt(n)                           -> B = W V max(1, 1/nu, 2 sqrt(n)).
A client inside the stated bounds is therefore never clipped; one outside may be (its contribution is then
clipped, which biases the median), and is counted.

Quantisation: each pass moves the iterate by at most m (2B + |v| W_b) / ((2^32 - 1) sum_i beta_i), so the
error grows with W V / nu: keep nu no smaller than needed (e.g. 1e-3 to 1e-2 of the typical distance).

Execution context: the secure-sum intrinsics do not run in TFF 0.87's default context (it fails with a gRPC
"Cannot embed a federated value" error). Run under `tff_robust.runtime.execution_context`
(`set_local_execution_context()`), which compiles them to their exact simulation bodies, as TFF's test
context does.
"""

import collections
import math

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


def _checked_bounds(value_bound, max_client_weight, smoothing) -> tuple[float, float, float]:
  """(V, W, nu) as floats, each a finite number > 0; ValueError naming the one that is not."""
  return (
      type_checks.check_number('value_bound', value_bound, minimum=0.0, strict=True),
      type_checks.check_number('max_client_weight', max_client_weight, minimum=0.0, strict=True),
      type_checks.check_number('smoothing', smoothing, minimum=0.0, strict=True),
  )


def secure_sum_bounds(*, value_bound: float, max_client_weight: float, smoothing: float, num_elements: int):
  """(B, W_b): the bound on every value summand and on every weight summand (module docstring).

  Raises:
    ValueError: naming `value_bound`, `max_client_weight` or `smoothing` if it is not a finite number > 0.
  """
  value_bound, max_client_weight, smoothing = _checked_bounds(value_bound, max_client_weight, smoothing)
  value_sum_bound = max_client_weight * value_bound * max(1.0, 1.0 / smoothing, 2.0 * math.sqrt(num_elements))
  weight_sum_bound = max_client_weight * max(1.0, 1.0 / smoothing)
  return value_sum_bound, weight_sum_bound


class SecureGeometricMedianFactory(tff.aggregators.WeightedAggregationFactory):
  """`GeometricMedianFactory` whose every aggregation of client values is a secure sum with derived bounds.

  The inner weighted mean of every pass is `tff.aggregators.MeanFactory` with `SecureSumFactory` value and
  weight sums bounded by `secure_sum_bounds`, and the non-finite count is a secure sum too, so
  `privacy.assert_client_values_aggregated_securely` holds for the created process. Use it as the
  `model_aggregator` of `tff.learning.algorithms.build_weighted_fed_avg` or
  `tff_robust.processes.build_fed_avg_process`; `max_client_weight` is 1 with
  `client_weighting=tff.learning.ClientWeighting.UNIFORM`, and with `NUM_EXAMPLES` the most examples a client
  trains on in a round (epochs times its dataset's size).

  Measurements: those of `GeometricMedianFactory`, plus `num_clients_beyond_bounds`: the clients whose value
  had a finite entry with |w_ij| > `value_bound` or whose weight exceeded `max_client_weight` (securely
  summed). Non-zero means the secure sums may have clipped their contributions: the aggregate is biased, and
  the bounds should be raised. Non-finite clients are counted in `num_nonfinite_clients` instead.

  Types: as `GeometricMedianFactory` (the secure sums take its widened values: all float32, or all float64
  if a tensor is float64). Needs `tff_robust.runtime.execution_context` (module docstring).
  """

  def __init__(
      self,
      *,
      value_bound: float,
      max_client_weight: float,
      smoothing: float,
      num_passes: int = 3,
      init: str = 'mean',
  ):
    """Initializes the factory.

    Args:
      value_bound: V > 0, the largest |entry| of a client value (a model delta) the sums must hold.
      max_client_weight: W > 0, the largest client weight alpha_i (see the class docstring).
      smoothing: nu > 0 of eq. (16); the Weiszfeld weights reach W / nu.
      num_passes: secure-average calls per aggregation, an integer >= 1.
      init: 'mean' or 'zero', as for `GeometricMedianFactory`.

    Raises:
      ValueError: naming the argument, if it is outside its allowed range.
    """
    self._value_bound, self._max_client_weight, self._smoothing = _checked_bounds(
        value_bound, max_client_weight, smoothing
    )
    geometric_median.GeometricMedianFactory(num_passes=num_passes, smoothing=smoothing, init=init)  # checks them
    self._num_passes = num_passes
    self._init = init

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. The secure sums' bounds are derived here from
    the value bound, the largest client weight, nu and the number of elements of `value_type`."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    value_sum_bound, weight_sum_bound = secure_sum_bounds(
        value_bound=self._value_bound, max_client_weight=self._max_client_weight, smoothing=self._smoothing,
        num_elements=sum(int(np.prod(leaf.shape)) for leaf in widening.leaf_types(value_type)),
    )
    secure_mean = tff.aggregators.MeanFactory(
        value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=value_sum_bound),
        weight_sum_factory=tff.aggregators.SecureSumFactory(
            upper_bound_threshold=weight_sum_bound, lower_bound_threshold=0.0
        ),
        no_nan_division=True,
    )
    secure_count = tff.aggregators.SecureSumFactory(upper_bound_threshold=1, lower_bound_threshold=0)
    median_process = geometric_median.GeometricMedianFactory(
        num_passes=self._num_passes, smoothing=self._smoothing, init=self._init,
        mean_factory=secure_mean, count_factory=secure_count,
    ).create(value_type, weight_type)
    count_process = secure_count.create(tff.TensorType(np.int32))
    value_bound, max_client_weight = self._value_bound, self._max_client_weight

    @tff.tensorflow.computation(value_type, weight_type)
    def beyond_bounds(value, weight):
      """1 if a finite entry of the value exceeds V in absolute value or a finite weight exceeds W."""
      entries = [tf.reshape(tf.cast(t, tf.float64), [-1]) for t in widening.leaves(value, value_type)]
      entries = tf.concat(entries, axis=0)
      too_large = tf.logical_and(tf.math.is_finite(entries), tf.abs(entries) > value_bound)
      weight = tf.cast(weight, tf.float64)
      too_heavy = tf.logical_and(tf.math.is_finite(weight), weight > max_client_weight)
      return tf.cast(tf.logical_or(tf.reduce_any(too_large), too_heavy), tf.int32)

    @tff.federated_computation(
        median_process.initialize.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      beyond = count_process.next(count_process.initialize(), tff.federated_map(beyond_bounds, (value, weight)))
      output = median_process.next(state, value, weight)
      names = tff.structure.name_list(output.measurements.type_signature.member)
      measurements = collections.OrderedDict((name, output.measurements[name]) for name in names)
      measurements['num_clients_beyond_bounds'] = beyond.result
      return tff.templates.MeasuredProcessOutput(
          state=output.state, result=output.result, measurements=tff.federated_zip(measurements)
      )

    return tff.templates.AggregationProcess(median_process.initialize, next_fn)
