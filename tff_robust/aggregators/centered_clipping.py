"""Centered clipping (Karimireddy, He, Jaggi, ICML 2021, "Learning from history for Byzantine robust
optimization"), each iteration one secure average of bounded residuals.

Algorithm 2 (CC) of the paper: starting from the previous round's aggregate v, repeat L times
    v <- v + sum_i alpha_i clip(w_i - v, tau) / sum_i alpha_i,   clip(d, tau) = d min(1, tau / ||d||),
(the paper's eq. for CC with uniform weights 1/n; here the clients' weights alpha_i). Every summand
alpha_i clip(w_i - v, tau) has entries in [-alpha_i tau, alpha_i tau], so each iteration is one call of a
weighted-mean process that a `SecureSumFactory` with bound W tau (W the largest client weight) implements
without clipping anything: no gathering, no per-client value at the server (`secure_mean_factory`).

Start: the paper centres at the previous round's aggregate (its v_{t-1}, which with worker momentum is the
server's momentum); here the state keeps the previous round's result, zero in the first round. The paper's
clients send momenta; behind `tff.learning` model-delta client work they send model deltas, and the server
optimizer's momentum (if any) is applied after the aggregate. The clipping is the residual of Fed+'s 'l2'
proximal operator, `prox_ops.clip_factor`, as in Fed+'s fixed-point iteration.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import prox_ops
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


def secure_mean_factory(clip_radius: float, max_client_weight: float) -> tff.aggregators.MeanFactory:
  """A `MeanFactory` of secure sums that holds every summand of centered clipping without clipping it.

  Value summands alpha_i clip(w_i - v, tau) lie in [-W tau, W tau], weights in [0, W] (W =
  `max_client_weight`: 1 with uniform client weighting, else the most examples a client trains on).
  """
  tau = type_checks.check_number('clip_radius', clip_radius, minimum=0.0, strict=True)
  weight = type_checks.check_number('max_client_weight', max_client_weight, minimum=0.0, strict=True)
  return tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(weight * tau),
      weight_sum_factory=tff.aggregators.SecureSumFactory(weight, 0.0),
      no_nan_division=True,
  )


class CenteredClippingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for centered clipping: `num_iterations` secure averages of clipped residuals.

  Client values that contain NaN or Inf (or carry a non-finite or negative weight) get weight 0 and are counted. With no
  weight left the iterations do not move v (the previous round's aggregate is returned again). Norms are
  over the whole value (all tensors together).

  Types: what `tff.aggregators.MeanFactory` takes; computed in float32 or wider (`widening`), the result in
  the value's dtypes.

  Measurements:
    - `secure_average_calls`: inner weighted-mean calls (= `num_iterations`).
    - `clipped_count`: clients of positive weight whose residual w_i - v was clipped (||w_i - v|| > tau) in the
      last iteration.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative (summed
      by `count_factory`).
    - `mean`: measurements of the last inner weighted-mean call (absent when empty, as TFF's `MeanFactory`'s are).

  Secure aggregation: `mean_factory=secure_mean_factory(clip_radius, max_client_weight)` and
  `count_factory=tff.aggregators.SecureSumFactory(1, 0)`; then every client value reaches the server
  through a secure sum (`privacy.assert_client_values_aggregated_securely`). Run under
  `tff_robust.runtime.execution_context`.

  State: <the inner mean's state, the previous aggregate v (wide dtypes)>.
  """

  def __init__(
      self,
      clip_radius: float,
      num_iterations: int = 3,
      mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      clip_radius: tau > 0, the L2 bound of each client's residual w_i - v.
      num_iterations: L, secure averages per aggregation, an integer >= 1.
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for every iteration; defaults to
        `tff.aggregators.MeanFactory(no_nan_division=True)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 0/1 flags; defaults to
        `tff.aggregators.SumFactory()`.

    Raises:
      ValueError: if `clip_radius` or `num_iterations` is outside its range.
      TypeError: if a factory has the wrong type.
    """
    self._clip_radius = type_checks.check_number('clip_radius', clip_radius, minimum=0.0, strict=True)
    self._num_iterations = type_checks.check_integer('num_iterations', num_iterations, minimum=1)
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    mean_process = self._mean_factory.create(wide_type, wide_weight_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    clip_radius = self._clip_radius

    @tff.tensorflow.computation(wide_type, wide_type, wide_weight_type)
    def clipped_residual(value, center, weight):
      """(clip(w - v, tau), 1 if ||w - v|| > tau and the client has weight, else 0): a client left out with
      weight 0 (non-finite, or dropped by a norm filter before) is not counted as clipped."""
      residual = tf.nest.map_structure(tf.subtract, value, center)
      factor = prox_ops.clip_factor(residual, 'l2', clip_radius)
      clipped = tf.nest.map_structure(lambda t: tf.cast(factor, t.dtype) * t, residual)
      return clipped, tf.cast(tf.logical_and(factor < 1.0, weight > 0), tf.int32)

    @tff.tensorflow.computation(wide_type, wide_type)
    def step(center, mean_residual):
      return tf.nest.map_structure(tf.add, center, mean_residual)

    zeros = tff.tensorflow.computation(
        lambda: widening.pack(wide_type, iter([tf.zeros(t.shape, t.dtype) for t in widening.leaf_types(wide_type)]))
    )

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip((mean_process.initialize(), tff.federated_eval(zeros, tff.SERVER)))

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      count = count_process.next(count_process.initialize(), nonfinite)
      mean_state, center = state[0], state[1]
      for _ in range(self._num_iterations):
        residual = tff.federated_map(clipped_residual, (value, tff.federated_broadcast(center), weight))
        output = mean_process.next(mean_state, residual[0], weight)
        mean_state = output.state
        center = tff.federated_map(step, (center, output.result))
      clipped = count_process.next(count_process.initialize(), residual[1])
      center = widening.narrow_or_zeros_if_nonfinite_at_server(center, wide_type)
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=tff.federated_value(self._num_iterations, tff.SERVER),
          clipped_count=clipped.result,
          num_nonfinite_clients=count.result,
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip((mean_state, center)),
          result=widening.narrow_or_zeros_if_nonfinite_at_server(center, value_type),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
