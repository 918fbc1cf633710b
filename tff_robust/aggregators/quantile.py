"""Weighted quantile of scalar client values: exact (gathered) or by secure averages (MM, eq. 17).

Superquantile FL (Laguel et al.) filters devices by the weighted (1 - theta)-quantile of their losses.
Both factories take a float scalar per client with a float weight and return the quantile at the server,
with the semantics of `tff_robust.core.superquantile` (the 'upper' end of a tied interval):

* `exact_quantile_factory` (Algorithm 2): gathers the (value, weight) pairs with `tff.federated_aggregate`,
  which reveals every value to the server: NOT secure-aggregation compatible.
* `SecureQuantileFactory` (Algorithm 3): majorization-minimization of the check loss, corrected eq. (17),
  each pass one call of an inner weighted-mean process on the 3-vector (x_k / e_k, 1 / e_k, |x_k - mu_t|):
      e_k = max(nu_t, |x_k - mu_t|),   (N_t, D_t, d_t) = weighted mean,   mu_{t+1} = (N_t + 2 tau - 1) / D_t,
  with the guard nu_t = max(1e-12, relative_smoothing max(|mu_t|, d_{t-1})) at the scale of the values
  (`core.superquantile`), so no individual value leaves a client. The estimate and the mean distance
  warm-start from the previous call's.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import gathering
from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import robust_rules
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening
from tff_robust.core import superquantile


def _check_level(level) -> float:
  return type_checks.check_number('level', level, minimum=0.0, maximum=1.0)


def exact_quantile_factory(level: float) -> gathering.GatheringRobustFactory:
  """The exact weighted `level`-quantile (Property 7, upper end at ties) of the gathered client values.

  Clients whose value or weight is not finite, or whose weight is <= 0, are dropped and counted; a cohort with
  nobody left gives 0 and `insufficient_clients = 1` (see `gathering.GatheringRobustFactory`).
  """
  level = _check_level(level)
  return gathering.GatheringRobustFactory(
      'exact_quantile',
      lambda points, weights: robust_rules.coordinate_upper_quantile(
          points, weights, level, superquantile.TIE_TOLERANCE
      ),
      lambda m: m >= 1,
      'at least 1 client',
  )


class SecureQuantileFactory(tff.aggregators.WeightedAggregationFactory):
  """Weighted `level`-quantile of scalar client values from `num_passes` secure weighted averages.

  State: the inner mean process's state, the current estimate (`initial_estimate` before the first call)
  and the mean distance d of the last pass (0 before the first call), from which the next call starts
  (warm start).

  Measurements:
    - `secure_average_calls`: inner weighted-mean calls (= `num_passes`).
    - `tolerance`: the guard nu_K = max(1e-12, relative_smoothing max(|mu_K|, d_{K-1})) at the result. The
      smoothed MM fixed point lies within nu of the exact quantile, so a filter `x >= result - tolerance`
      keeps the value at the quantile.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative (they get
      weight 0), summed by `count_factory`.
    - `mean`: measurements of the last inner mean call (absent when empty, as TFF's `MeanFactory`'s are).

  Types: a floating scalar value of any width and a floating or integer scalar weight. The MM arithmetic,
  the state's estimate and `tolerance` are float32 (float64 with a float64 value or weight: the weights
  1 / e_k reach 1 / nu), `mean_factory` is created for that dtype, and the result has the value's dtype.
  """

  def __init__(
      self,
      level: float,
      num_passes: int = 30,
      relative_smoothing: float = 1e-2,
      initial_estimate: float = 0.0,
      mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      level: the quantile level tau in [0, 1] (Delta-FL uses tau = 1 - theta).
      num_passes: MM passes (secure-average calls) per aggregation, an integer >= 1.
      relative_smoothing: s in (0, 1), the smoothing nu_t = max(1e-12, s max(|mu_t|, d_{t-1})) (d_{t-1}: the
        previous pass's weighted mean distance |x_k - mu|): distances below nu_t count as nu_t. Larger values
        converge in fewer passes but blur values closer than nu_t to the quantile.
      initial_estimate: mu_0 of the first call (0 suits nonnegative losses).
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for every pass, e.g. a
        `SecureSumFactory`-backed `MeanFactory`; defaults to `tff.aggregators.MeanFactory(no_nan_division=True)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing the int32 0/1 non-finite flags;
        defaults to `tff.aggregators.SumFactory()`. Secure: `tff.aggregators.SecureSumFactory(1, 0)`.

    Raises:
      TypeError: if `mean_factory` is not a weighted aggregation factory, or `count_factory` not an
        unweighted one.
      ValueError: if an argument is outside its allowed range.
    """
    self._level = _check_level(level)
    self._num_passes = type_checks.check_integer('num_passes', num_passes, minimum=1)
    self._relative_smoothing = type_checks.check_number(
        'relative_smoothing', relative_smoothing, minimum=0.0, strict=True, maximum=1.0, strict_maximum=True
    )
    self._initial_estimate = type_checks.check_number('initial_estimate', initial_estimate)
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. `value_type` must be a float scalar."""
    type_checks.check_float_scalar('value_type', value_type)
    type_checks.check_weight_type(weight_type)
    # The MM weights 1 / e_k reach 1 / nu: computed in float32 or wider whatever the value's dtype.
    dtype = widening.scalar_dtype(value_type, weight_type)
    scalar_type, pair_type, triple_type = (tff.TensorType(dtype, shape) for shape in ([], [2], [3]))
    mean_process = self._mean_factory.create(triple_type, scalar_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    level, relative_smoothing, num_passes = self._level, self._relative_smoothing, self._num_passes

    @tff.tensorflow.computation(scalar_type, scalar_type)
    def guard(estimate, distance):
      """nu_t = max(1e-12, relative_smoothing max(|mu_t|, d_{t-1}))."""
      scale = tf.maximum(tf.abs(estimate), distance)
      return tf.maximum(tf.constant(superquantile.MIN_SMOOTHING, dtype), relative_smoothing * scale)

    @tff.tensorflow.computation(widening.wide_value_type(value_type), pair_type)
    def mm_terms(value, estimate_and_guard):
      """(x_k / e_k, 1 / e_k, |x_k - mu_t|) with e_k = max(nu_t, |x_k - mu_t|)."""
      value = tf.cast(value, dtype)
      distance = tf.abs(value - estimate_and_guard[0])
      inverse = 1.0 / tf.maximum(estimate_and_guard[1], distance)
      return tf.stack([value * inverse, inverse, distance])

    @tff.tensorflow.computation(scalar_type, scalar_type)
    def pair(estimate, smoothing):
      return tf.stack([estimate, smoothing])

    @tff.tensorflow.computation(triple_type, scalar_type, scalar_type)
    def mm_step(means, estimate, distance):
      """(mu_{t+1}, d_t) = ((N_t + (2 tau - 1)) / D_t, d_t); keeps (mu_t, d_{t-1}) if D_t = 0."""
      numerator, denominator = means[0], means[1]
      positive = denominator > 0
      safe = tf.where(positive, denominator, tf.ones_like(denominator))
      return (
          tf.where(positive, (numerator + (2 * level - 1)) / safe, estimate),
          tf.where(positive, means[2], distance),
      )

    @tff.tensorflow.computation(scalar_type)
    def narrow(estimate):
      return tf.cast(estimate, value_type.dtype)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip(collections.OrderedDict(
          mean=mean_process.initialize(),
          estimate=tff.federated_value(np.asarray(self._initial_estimate, dtype), tff.SERVER),
          distance=tff.federated_value(np.zeros([], dtype), tff.SERVER),
      ))

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      mean_state, estimate, distance = state.mean, state.estimate, state.distance
      for _ in range(num_passes):
        smoothing = tff.federated_map(guard, (estimate, distance))
        broadcast = tff.federated_broadcast(tff.federated_map(pair, (estimate, smoothing)))
        output = mean_process.next(mean_state, tff.federated_map(mm_terms, (value, broadcast)), weight)
        mean_state = output.state
        estimate, distance = tff.federated_map(mm_step, (output.result, estimate, distance))
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=tff.federated_value(num_passes, tff.SERVER),
          tolerance=tff.federated_map(guard, (estimate, distance)),
          num_nonfinite_clients=count_process.next(count_process.initialize(), nonfinite).result,
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip(
              collections.OrderedDict(mean=mean_state, estimate=estimate, distance=distance)
          ),
          result=tff.federated_map(narrow, estimate),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
