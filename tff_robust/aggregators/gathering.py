"""Aggregation factories that gather every client update: NOT secure-aggregation compatible.

Coordinate-wise median, trimmed mean, multi-Krum and Bulyan need the individual updates, which secure
aggregation exists to hide. `GatheringRobustFactory` gathers them to the server with
`tff.federated_aggregate` (accumulate = append a row), so these are simulation baselines;
`privacy.non_secure_intrinsics` flags them. Each update is flattened to one vector, float64 if a value
tensor or the weight is float64 and float32 otherwise (`widening.scalar_dtype`: the types
`tff.aggregators.MeanFactory` takes, float16 values and integer weights included), and the result is cast
back to the value's dtypes; rows that are not finite or have weight <= 0 are dropped and counted; a round with
fewer usable rows than the rule needs returns a zero update (a no-op server step) and reports
`insufficient_clients = 1` instead of failing.
"""

import collections
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


class GatheringRobustFactory(tff.aggregators.WeightedAggregationFactory):
  """Applies `rule(points [m, d], weights [m]) -> [d]` to the gathered, flattened client updates.

  Measurements: `num_nonfinite_clients` (rows dropped as non-finite or with weight <= 0),
  `num_clients_used`, `insufficient_clients` (1 when the round was skipped).
  """

  def __init__(self, name: str, rule: Callable, accepts_num_clients: Callable, requirement: str):
    """Initializes the factory.

    Args:
      name: the rule's name, used in error messages.
      rule: a TensorFlow function of (points, weights) accepting a dynamic number of rows.
      accepts_num_clients: TensorFlow predicate of the number m of usable rows: can `rule` run on m rows?
      requirement: the predicate in words, for error messages (e.g. 'm >= 2 * num_byzantine + 3').
    """
    self.name = name
    self._rule = rule
    self._accepts = accepts_num_clients
    self._requirement = requirement

  @property
  def rule(self) -> Callable:
    """The TensorFlow rule (points [m, d], weights [m]) -> [d]."""
    return self._rule

  @property
  def accepts_num_clients(self) -> Callable:
    """The TensorFlow predicate of the number of usable rows."""
    return self._accepts

  @property
  def requirement(self) -> str:
    """The predicate in words."""
    return self._requirement

  def check_clients_per_round(self, clients_per_round: int) -> None:
    """Raises ValueError naming the rule and its requirement if `clients_per_round` clients cannot work."""
    if not bool(self._accepts(tf.constant(clients_per_round, tf.int32))):
      raise ValueError(
          f'{self.name} cannot aggregate {clients_per_round} clients per round: it needs {self._requirement}'
      )

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. It gathers every client's row (not secure)."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    rows = FlatRows(value_type, weight_type)
    rule, accepts = self._rule, self._accepts

    @tff.tensorflow.computation(rows.gathered_type)
    def apply_rule(gathered):
      vector, usable, num_used, enough = apply_to_usable_rows(rule, accepts, *gathered)
      measurements = collections.OrderedDict(
          num_nonfinite_clients=tf.reduce_sum(tf.cast(tf.logical_not(usable), tf.int32)),
          num_clients_used=num_used,
          insufficient_clients=tf.cast(tf.logical_not(enough), tf.int32),
      )
      leaves = widening.leaves(rows.unflatten(vector), value_type)
      leaves = [tf.where(tf.math.is_finite(leaf), leaf, tf.zeros_like(leaf)) for leaf in leaves]
      return widening.pack(value_type, iter(leaves)), measurements

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      output = tff.federated_map(apply_rule, rows.gather(value, weight))
      return tff.templates.MeasuredProcessOutput(state=state, result=output[0], measurements=output[1])

    return tff.templates.AggregationProcess(init_fn, next_fn)


def usable_rows(rows, weights):
  """TensorFlow: the bool [m] mask of the rows that are finite and have a finite weight > 0."""
  usable = tf.reduce_all(tf.math.is_finite(rows), axis=1)
  return tf.logical_and(usable, tf.logical_and(tf.math.is_finite(weights), weights > 0))


def apply_to_usable_rows(rule, accepts, rows, weights):
  """TensorFlow: `rule` over the usable rows (`usable_rows`), or zeros if `accepts` refuses their number.

  Returns (the rule's vector, the usable mask, the number of usable rows, whether `accepts` took that number).
  `GatheringRobustFactory` runs this at the server; the defences' stacked rules run it on stacked points.
  """
  usable = usable_rows(rows, weights)
  rows, weights = tf.boolean_mask(rows, usable), tf.boolean_mask(weights, usable)
  num_used = tf.shape(rows)[0]
  enough = accepts(num_used)
  vector = tf.cond(enough, lambda: rule(rows, weights), lambda: tf.zeros(tf.shape(rows)[1:], rows.dtype))
  return tf.ensure_shape(vector, rows.shape[1:]), usable, num_used, enough


class FlatRows:
  """Client values of `value_type` as flat vectors of `widening.scalar_dtype`, gathered at the server.

  `gather(value, weight)` (federated) appends every client's (vector, weight) to a server-placed
  (rows [m, d], weights [m]) with `tff.federated_aggregate`: NOT secure. `flatten` and `unflatten` are the
  TensorFlow conversions (leaves in `widening.leaves` order), `unflatten` casting back to the value's
  dtypes.
  """

  def __init__(self, value_type, weight_type):
    self.value_type = value_type
    self.leaf_types = widening.leaf_types(value_type)
    self.sizes = [int(np.prod(t.shape, dtype=np.int64)) for t in self.leaf_types]
    self.dimension = sum(self.sizes)
    self.dtype = widening.scalar_dtype(value_type, weight_type)
    self.gathered_type = (tff.TensorType(self.dtype, [None, self.dimension]), tff.TensorType(self.dtype, [None]))
    self.row_type = (tff.TensorType(self.dtype, [self.dimension]), tff.TensorType(self.dtype))
    self._weight_type = weight_type

  def flatten(self, value):
    """TensorFlow: the value's leaves concatenated into one vector [d] of `dtype`."""
    return tf.concat([tf.reshape(tf.cast(t, self.dtype), [-1]) for t in widening.leaves(value, self.value_type)], 0)

  def unflatten(self, vector):
    """TensorFlow: a vector [d] back to `value_type` (its shapes, dtypes and containers)."""
    return widening.pack(self.value_type, iter([
        tf.cast(tf.reshape(piece, t.shape), t.dtype) for piece, t in zip(tf.split(vector, self.sizes), self.leaf_types)
    ]))

  def gather(self, value, weight):
    """Federated: every client's (flat value, weight) gathered at the server as (rows [m, d], weights [m])."""
    dimension, dtype, gathered_type, row_type = self.dimension, self.dtype, self.gathered_type, self.row_type

    @tff.tensorflow.computation(self.value_type, self._weight_type)
    def flatten(value, weight):
      return self.flatten(value), tf.cast(weight, dtype)

    @tff.tensorflow.computation
    def empty():
      return (
          tf.compat.v1.placeholder_with_default(tf.zeros([0, dimension], dtype), [None, dimension]),
          tf.compat.v1.placeholder_with_default(tf.zeros([0], dtype), [None]),
      )

    @tff.tensorflow.computation(gathered_type, row_type)
    def append(gathered, row):
      return tf.concat([gathered[0], row[0][None]], 0), tf.concat([gathered[1], row[1][None]], 0)

    @tff.tensorflow.computation(gathered_type, gathered_type)
    def merge(first, second):
      return tf.concat([first[0], second[0]], 0), tf.concat([first[1], second[1]], 0)

    @tff.tensorflow.computation(gathered_type)
    def report(gathered):
      return gathered

    return tff.federated_aggregate(tff.federated_map(flatten, (value, weight)), empty(), append, merge, report)
