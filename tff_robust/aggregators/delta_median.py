"""Fed+'s robust server steps: the delta-geometric median and the delta-coordinate-wise median, by secure sums.

Fed+ (Kundu, Yu, Wynter, Lim), eq. (7): with Psi = sigma*delta*||.||_2 (FedGeoMed+) or sigma*delta*||.||_1
(FedCoMed+) the aggregate of client values w_k is
    A(W) = argmin_w sum_k a_k Psihat(w_k - w),   Psihat = sigma * H_delta(||.||_2)  or  sigma * sum_i H_delta(.),
a Huber-smoothed geometric or coordinate-wise median (delta -> 0: the median; delta -> infinity: the mean).
Two solvers share its fixed point (eq. (49): w = Mean{w_k} - Mean{prox(w_k - w)}), each step one secure sum:
  - 'fixed_point', the paper's iteration (25) (eqs. (16) and (22) on the cohort): the server broadcasts w,
    each client sends its residual r_k = w_k - w - prox(w_k - w), clipped to norm delta ('l2') or to
    [-delta, delta] per coordinate ('l1'), and w <- w + sum_k a_k r_k / sum_k a_k. Every summand is bounded
    by delta, so a `SecureSumFactory` range is known in advance; but each step moves w by at most delta,
    so a client at distance D needs about D / delta steps.
  - 'irls', iteratively reweighted means with the same fixed point: omega_k = a_k min(1, delta / ||w_k - w||)
    (per coordinate for 'l1') and w <- sum_k omega_k w_k / sum_k omega_k; tens of steps for any outlier.
Both start from the weighted mean of the values (one more sum). The aggregation is translation-equivariant,
so Fed+ aggregates model deltas and adds the result to the global model.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import prox_ops
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening

NORMS = ('l2', 'l1')
SOLVERS = ('irls', 'fixed_point')
DEFAULT_MAX_ITERATIONS = 30


class DeltaMedianFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for Fed+'s delta-approximate geometric ('l2') or coordinate-wise ('l1')
  median, `max_iterations` secure sums after a first weighted mean.

  A federated computation cannot loop until convergence, so every call runs all `max_iterations` sums;
  once a step moves the iterate by at most `tolerance` (Euclidean norm) the server keeps that iterate.

  Client values that contain NaN or Inf (or carry a non-finite or negative weight) get weight 0 and are counted; with
  no weight left the aggregate is zero.

  Types: what `tff.aggregators.MeanFactory` takes (floating values of any width, also mixed in a structure;
  a floating or integer scalar weight). The values are summed in float32 (float64 if a tensor is float64),
  weights are float32 (float64 with float64 values or weights), and the result has the value's dtypes
  (`widening`); `sum_factory` is created for those widened types.

  Measurements:
    - `secure_average_calls`: sum-process calls per aggregation, `max_iterations + 1`.
    - `iterations`: steps taken before convergence (= `max_iterations` if it did not converge).
    - `converged`: 1 if a step moved the iterate by at most `tolerance`, else 0.
    - `step_norm`: norm of the last step taken.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative.

  Secure aggregation: pass `sum_factory=tff.aggregators.SecureSumFactory(...)`; each summand is a pair
  (a_k x_k, a_k) with x_k the value (first sum, and 'irls' steps) or the residual (bounded by delta,
  'fixed_point' steps); for 'l1' with 'irls' the second element has the value's shape.
  """

  def __init__(
      self,
      norm: str,
      delta: float,
      *,
      solver: str = 'irls',
      max_iterations: int = DEFAULT_MAX_ITERATIONS,
      tolerance: float = 1e-6,
      sum_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      norm: 'l2' (FedGeoMed+, the norm over the whole value) or 'l1' (FedCoMed+, coordinate by coordinate).
      delta: the smoothing delta > 0 of Psi; residuals are clipped to it.
      solver: 'irls' (reweighted means) or 'fixed_point' (the paper's iteration (25)).
      max_iterations: sums after the first weighted mean, an integer >= 1.
      tolerance: a step of norm <= tolerance (>= 0) ends the iteration.
      sum_factory: a `tff.aggregators.UnweightedAggregationFactory` for every sum; defaults to
        `tff.aggregators.SumFactory()`.

    Raises:
      TypeError: if `sum_factory` is not an `UnweightedAggregationFactory`.
      ValueError: if an argument is outside its allowed range.
    """
    if norm not in NORMS:
      raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')
    if solver not in SOLVERS:
      raise ValueError(f'solver must be one of {SOLVERS}, got {solver!r}')
    delta = type_checks.check_number('delta', delta, minimum=0.0, strict=True)
    tolerance = type_checks.check_number('tolerance', tolerance, minimum=0.0)
    type_checks.check_integer('max_iterations', max_iterations, minimum=1)
    sum_factory = type_checks.sum_factory_or_default(sum_factory)
    self._norm = norm
    self._delta = delta
    self._solver = solver
    self._max_iterations = int(max_iterations)
    self._tolerance = tolerance
    self._sum_factory = sum_factory

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    # Computed in float32 or wider (`widening`): a_k x_k and the sums overflow float16 long before float32.
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    weight_dtype = wide_weight_type.dtype
    norm, delta, solver, tolerance = self._norm, self._delta, self._solver, self._tolerance
    coordinate_weights = solver == 'irls' and norm == 'l1'
    mean_summand_type = tff.StructType([wide_type, wide_weight_type])
    step_summand_type = tff.StructType([wide_type, wide_type]) if coordinate_weights else mean_summand_type
    mean_sum = self._sum_factory.create(mean_summand_type)
    step_sum = self._sum_factory.create(step_summand_type)

    def times(scalar, tensor):
      return tf.cast(scalar, tensor.dtype) * tensor

    @tff.tensorflow.computation(wide_type, wide_weight_type)
    def weighted_value(value, weight):
      return tf.nest.map_structure(lambda v: times(weight, v), value), weight

    @tff.tensorflow.computation(wide_type, wide_weight_type, wide_type)
    def step_summand(value, weight, center):
      """'fixed_point': (a_k r_k, a_k), r_k the clipped residual; 'irls': (omega_k w_k, omega_k)."""
      difference = tf.nest.map_structure(tf.subtract, value, center)
      factor = prox_ops.clip_factor(difference, norm, delta)
      source = difference if solver == 'fixed_point' else value
      if norm == 'l2':
        scaled = weight * tf.cast(factor, weight_dtype)
        numerator = tf.nest.map_structure(lambda x: times(scaled, x), source)
      else:
        scaled = tf.nest.map_structure(lambda f: times(weight, f), factor)
        numerator = tf.nest.map_structure(tf.multiply, scaled, source)
      return numerator, (weight if solver == 'fixed_point' else scaled)

    def as_nest(structure):
      """A `tff.structure.Struct` as Python containers (which tf.nest walks); a tensor as it is."""
      if isinstance(structure, tff.structure.Struct):
        return tff.structure.to_odict_or_tuple(structure)
      return structure

    def divide_no_nan(numerator, denominator):
      return tf.math.divide_no_nan(numerator, tf.cast(denominator, numerator.dtype))

    def quotient(sums, per_coordinate):
      """numerator / denominator (0 where the denominator is 0), flattened in tf.nest's order."""
      numerator, denominator = sums
      numerator = tf.nest.flatten(as_nest(numerator))
      if per_coordinate:
        return [divide_no_nan(n, d) for n, d in zip(numerator, tf.nest.flatten(as_nest(denominator)))]
      return [divide_no_nan(n, denominator) for n in numerator]

    @tff.tensorflow.computation(mean_summand_type)
    def weighted_mean(sums):
      # The value's own structure: tf.nest sorts mapping keys, so a flat list would not follow value_type.
      numerator, denominator = sums
      return tf.nest.map_structure(lambda n: divide_no_nan(n, denominator), as_nest(numerator))

    @tff.tensorflow.computation(wide_type, step_summand_type, tff.TensorType(np.int32),
                                tff.TensorType(np.float32))
    def server_step(center, sums, iterations, step_norm):
      """The next iterate, unless the iteration has converged (then everything is kept)."""
      candidate = tf.nest.pack_sequence_as(center, quotient(sums, per_coordinate=coordinate_weights))
      if solver == 'fixed_point':
        candidate = tf.nest.map_structure(tf.add, center, candidate)
      converged = step_norm <= tolerance
      new_step_norm = tf.cast(
          structure_math.global_l2_norm(tf.nest.map_structure(tf.subtract, candidate, center)), tf.float32
      )
      return (
          tf.nest.map_structure(lambda old, new: tf.where(converged, old, new), center, candidate),
          tf.where(converged, iterations, iterations + 1),
          tf.where(converged, step_norm, new_step_norm),
      )

    @tff.tensorflow.computation(tff.TensorType(np.float32), wide_type)
    def finish(step_norm, center):
      """(converged flag, the aggregate in the value's dtypes, a non-finite one replaced by zeros)."""
      return tf.cast(step_norm <= tolerance, tf.int32), widening.narrow_or_zeros_if_nonfinite(center, value_type)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip((mean_sum.initialize(), step_sum.initialize()))

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      mean_output = mean_sum.next(state[0], tff.federated_map(weighted_value, (value, weight)))
      center = tff.federated_map(weighted_mean, mean_output.result)
      step_state = state[1]
      iterations = tff.federated_value(np.int32(0), tff.SERVER)
      step_norm = tff.federated_value(np.float32(np.inf), tff.SERVER)
      for _ in range(self._max_iterations):
        summands = tff.federated_map(step_summand, (value, weight, tff.federated_broadcast(center)))
        step_output = step_sum.next(step_state, summands)
        step_state = step_output.state
        center, iterations, step_norm = tff.federated_map(
            server_step, (center, step_output.result, iterations, step_norm)
        )
      converged, result = tff.federated_map(finish, (step_norm, center))
      measurements = collections.OrderedDict(
          secure_average_calls=tff.federated_value(self._max_iterations + 1, tff.SERVER),
          iterations=iterations,
          converged=converged,
          step_norm=step_norm,
          num_nonfinite_clients=tff.federated_sum(nonfinite),
      )
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip((mean_output.state, step_state)),
          result=result,
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
