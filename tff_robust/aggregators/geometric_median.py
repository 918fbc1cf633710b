"""Weighted geometric median of client values, computed by smoothed Weiszfeld as secure averages.

Robust Federated Aggregation (RFA; Pillutla, Kakade, Harchaoui), Algorithms 2 and 3. The geometric median
(GM) of client values w_i with weights alpha_i minimises eq. (6), g(v) = sum_i alpha_i ||v - w_i||; its
breakdown point is 1/2 (the mean's is 0). Smoothed Weiszfeld, eq. (16), needs only weighted averages:
    server broadcasts v^(r);  client i computes beta_i = alpha_i / max(nu, ||v^(r) - w_i||);
    v^(r+1) = sum_i beta_i w_i / sum_i beta_i        (one call of the secure-average oracle),
so each pass is one call of an inner weighted-mean process and no individual w_i is revealed. The
measurements travel the same way: the objective as a weighted mean of the distances, the non-finite count as
a sum through an injectable factory, so a secure configuration sums nothing in plain (`privacy`).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening

INITS = ('mean', 'zero')


class GeometricMedianFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for the weighted geometric median (RFA's robust aggregation oracle).

  The created process runs `num_passes` calls of an inner weighted-mean process (the secure-average oracle)
  per aggregation:
    - `init='mean'` (the authors' code): the first call is the weighted mean v^(1) of the values, the
      remaining `num_passes - 1` calls are Weiszfeld re-weightings (Algorithm 2 started at the mean).
    - `init='zero'`: v^(0) = 0, so every call is a Weiszfeld step; `num_passes=1` is one-step RFA
      (Algorithm 3), beta_i = alpha_i / max(nu, ||w_i||). This only makes sense on model deltas.
  The start matters when clients may scale their updates: the mean follows a client sending c times the honest
  norm by its weight share times c, and the error after R passes grows with ||v^(0) - v*||^2 (Prop. 2), while
  from zero a client pulls the first step by at most its weight (alpha_i w_i / ||w_i||). On digits (3 seeds,
  results/robustness_large_scale_digits), updates scaled to 100 or 1000 times the honest median norm broke the
  mean start (3 passes) already at rho = 0.1 (0.612, 0.081) where 'zero' kept 0.923; but a white-box line
  search along IPM's direction breaks the zero start worse than the mean start (0.775 against 0.920 at
  rho = 0.1): neither holds both, a norm filter before a robust rule does (docs/guides/attacks.md).
  Norms are taken over the whole value (all tensors together), not per tensor. Every aggregation makes exactly
  `num_passes` calls: the paper's App. D also stops once the relative improvement of g_nu falls below 1e-6, but a
  federated computation cannot end early on data, and at its R = 3 the stop rarely fires first.

  Client values that contain NaN or Inf (or carry a non-finite or negative weight) get weight 0 and are counted; if no
  weight is left the aggregate is zero, never NaN.

  Finite values can still overflow a pass's float32 sums (3.4e38): the mean start's sum_i alpha_i w_i once
  alpha_i |w_ij| does (entries of 1e36 from a client of 340 examples), a Weiszfeld step's once the weights
  alpha_i / nu near the iterate meet large values (identical clients at 1e30). A pass whose iterate has a NaN or
  Inf entry is not taken: the iterate stays the one before it, which does not raise g, and the mean start's
  falls back to v = 0, from which no client adds more than alpha_i to an entry of the next sum (beta_i |w_ij| =
  alpha_i |w_ij| / max(nu, ||w_i||) <= alpha_i), so an overflowing client costs one pass, not the round. Only a
  single overflowing mean pass (`num_passes=1`, 'mean') leaves zero. Such passes are counted (`overflowed_passes`).

  Types: what `tff.aggregators.MeanFactory` takes (floating values of any width, also mixed in a structure;
  a floating or integer scalar weight). The values are averaged in float32 (float64 if a tensor is float64),
  weights, distances and the beta_i are float32 (float64 with float64 values or weights), and the result has
  the value's dtypes (`widening`); `mean_factory` is created for those widened types.

  Measurements:
    - `secure_average_calls`: inner weighted-mean calls used (= `num_passes`).
    - `objective`: g(v^(r)) / sum_i alpha_i, the unsmoothed eq. (6) (not App. D's g_nu, which differs only where
      a distance is below nu), at every iterate v^(r) broadcast to the clients (length
      `num_passes - 1` for 'mean', `num_passes` for 'zero'): the weighted mean of the distances
      ||v^(r) - w_i|| with weights alpha_i, through a scalar process of `mean_factory`, sent in the same
      pass as the re-weighting (not counted in `secure_average_calls`).
    - `num_nonfinite_clients`: clients whose value or weight reached this aggregator not finite, or with a negative
      weight. Behind TFF's model-delta client work (`build_weighted_fed_avg`, `build_rfa_process`) it is 0 for
      non-finite updates: that client work replaces them by zeros with weight 0 first; `build_rfa_process` and
      `tff_robust.processes.build_fed_avg_process` count those clients in `client_work/num_nonfinite_updates`.
      Summed by `count_factory`.
    - `overflowed_passes`: inner weighted-mean calls whose result had a NaN or Inf entry although every value
      and weight reaching them was finite (a float overflow), and which were therefore not taken (see above).
      Computed at the server from the calls' results: nothing more is summed.
    - `mean`: measurements of the last inner weighted-mean call (absent when empty, as TFF's `MeanFactory`'s are).

  Secure aggregation: pass `mean_factory=tff.aggregators.MeanFactory(value_sum_factory=
  tff.aggregators.SecureSumFactory(...), weight_sum_factory=..., no_nan_division=True)` and
  `count_factory=tff.aggregators.SecureSumFactory(1, 0)`. The Weiszfeld weights reach alpha_i / nu, so the
  secure sums' bounds depend on nu, the client weights and the values: `SecureGeometricMedianFactory`
  derives them and counts the clients beyond them.

  State: that of the inner weighted mean (the same as `MeanFactory`'s for the default, so a FedAvg state
  continues under RFA). The objective's scalar mean and the count start from their initial state every
  round; TFF's sums with fixed bounds (`SumFactory`, `SecureSumFactory` with constants) are stateless.
  """

  def __init__(
      self,
      num_passes: int = 3,
      smoothing: float = 1e-6,
      init: str = 'mean',
      mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      num_passes: inner weighted-mean (secure-average) calls per aggregation, an integer >= 1.
      smoothing: the smoothing nu > 0 of eq. (16); distances below it are treated as nu.
      init: 'mean' or 'zero', see the class docstring.
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for every pass; defaults to
        `tff.aggregators.MeanFactory(no_nan_division=True)`. It also averages the distances of the
        `objective` measurement (a scalar process).
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` that sums the clients' int32 0/1
        non-finite flags; defaults to `tff.aggregators.SumFactory()`.

    Raises:
      TypeError: if an argument has the wrong type.
      ValueError: if an argument is outside its allowed range.
    """
    if isinstance(num_passes, bool) or not isinstance(num_passes, (int, np.integer)):
      raise TypeError(f'num_passes must be an integer >= 1, got {num_passes!r}')
    if num_passes < 1:
      raise ValueError(f'num_passes must be an integer >= 1, got {num_passes}')
    type_checks.check_real_type('smoothing', smoothing)
    type_checks.check_number('smoothing', smoothing, minimum=0.0, strict=True)
    if init not in INITS:
      raise ValueError(f'init must be one of {INITS}, got {init!r}')
    self._num_passes = int(num_passes)
    self._smoothing = float(smoothing)
    self._init = init
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    # Computed in float32 or wider (`widening`): the Weiszfeld weights reach alpha / nu (1e6 by default).
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    weight_dtype = wide_weight_type.dtype
    mean_process = self._mean_factory.create(wide_type, wide_weight_type)
    objective_process = self._mean_factory.create(wide_weight_type, wide_weight_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    smoothing = self._smoothing

    def weiszfeld_weight(value, weight, center):
      """beta_i = alpha_i / max(nu, ||v - w_i||), and ||v - w_i|| (0 at weight 0) for the objective (eq. 6)."""
      distance = structure_math.global_l2_norm(tf.nest.map_structure(tf.subtract, value, center))
      distance = tf.cast(distance, weight_dtype)
      beta = weight / tf.maximum(tf.constant(smoothing, weight_dtype), distance)
      return beta, tf.where(weight > 0, distance, tf.zeros_like(distance))

    @tff.tensorflow.computation(wide_type, wide_weight_type, wide_type)
    def weiszfeld_weight_at(value, weight, center):
      return weiszfeld_weight(value, weight, center)

    @tff.tensorflow.computation(wide_type, wide_weight_type)
    def weiszfeld_weight_at_origin(value, weight):
      return weiszfeld_weight(value, weight, tf.nest.map_structure(tf.zeros_like, value))

    def finite_or(center, fallback):
      """(`center`, 0), or (`fallback`, 1) if `center` has a NaN or Inf entry."""
      overflowed = tf.logical_not(structure_math.all_finite(center))
      kept = tf.nest.map_structure(lambda new, old: tf.where(overflowed, old, new), center, fallback)
      return kept, tf.cast(overflowed, tf.int32)

    @tff.tensorflow.computation(wide_type, wide_type)
    def finite_or_previous(center, previous):
      return finite_or(center, previous)

    @tff.tensorflow.computation(wide_type)
    def finite_or_origin(center):
      return finite_or(center, tf.nest.map_structure(tf.zeros_like, center))

    @tff.federated_computation()
    def init_fn():
      return mean_process.initialize()

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      mean_state, objective_state = state, objective_process.initialize()
      count = count_process.next(count_process.initialize(), nonfinite)

      center, overflows = None, []

      def checked(output, previous):
        """The pass's new state and iterate: `previous` (v = 0 if None) if it overflowed, counted."""
        if previous is None:
          kept = tff.federated_map(finite_or_origin, output.result)
        else:
          kept = tff.federated_map(finite_or_previous, (output.result, previous))
        overflows.append(kept[1])
        return output.state, kept[0]

      if self._init == 'mean':
        output = mean_process.next(mean_state, value, weight)
        mean_state, center = checked(output, center)
      objectives = []
      while len(objectives) + (self._init == 'mean') < self._num_passes:
        if center is None:
          reweighted = tff.federated_map(weiszfeld_weight_at_origin, (value, weight))
        else:
          reweighted = tff.federated_map(
              weiszfeld_weight_at, (value, weight, tff.federated_broadcast(center))
          )
        objective = objective_process.next(objective_state, reweighted[1], weight)
        objective_state = objective.state
        objectives.append(objective.result)
        output = mean_process.next(mean_state, value, reweighted[0])
        mean_state, center = checked(output, center)

      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=tff.federated_value(self._num_passes, tff.SERVER),
          objective=_stack_at_server(objectives, weight_dtype),
          num_nonfinite_clients=count.result,
          overflowed_passes=_sum_at_server(overflows),
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=mean_state,
          result=widening.narrow_or_zeros_if_nonfinite_at_server(center, value_type),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)


def _stack_at_server(scalars_at_server, dtype):
  """Stacks a Python list of server-placed scalars into one server-placed vector (possibly empty)."""
  if not scalars_at_server:
    empty = tff.tensorflow.computation(lambda: tf.zeros([0], dtype))
    return tff.federated_eval(empty, tff.SERVER)
  zipped = tff.federated_zip(tuple(scalars_at_server))
  stack = tff.tensorflow.computation(
      lambda values: tf.stack(tf.nest.flatten(values)), zipped.type_signature.member
  )
  return tff.federated_map(stack, zipped)


def _sum_at_server(scalars_at_server):
  """The sum of a non-empty Python list of server-placed scalars, at the server."""
  zipped = tff.federated_zip(tuple(scalars_at_server))
  total = tff.tensorflow.computation(lambda values: tf.add_n(tf.nest.flatten(values)), zipped.type_signature.member)
  return tff.federated_map(total, zipped)
