"""Nearest-neighbour mixing (NNM; Allouah et al., AISTATS 2023, "Fixing by mixing"), before any robust rule.

NOT secure-aggregation compatible: NNM needs every pair of client updates, so it gathers them
(`tff.federated_aggregate`), and `privacy.non_secure_intrinsics` names that gathering. A simulation baseline
for heterogeneous clients, beside the secure `BucketingFactory`. Two forms:
  - `nearest_neighbor_mixing_factory(f, then)`: mixing and a gather-based rule at the server, one gathering;
  - `NearestNeighborMixingFactory(inner_factory, f)`: before any factory (the geometric median, centered
    clipping, a mean): the server gathers the updates and broadcasts them back, each client replaces its own
    update by its mix and sends that to `inner_factory` with its weight. Every client then receives every
    update: a simulation of the defence, never a deployment.

Algorithm 1 of the paper: with n gathered points and f the number of Byzantine clients tolerated, every point
x_i is replaced by the plain average of its n - f nearest neighbours in L2 (itself included; ties to the
lower index), then the robust rule F runs on the mixed points with the clients' weights. The mixing is
unweighted, as in the paper.
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import call_counts
from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import gathering
from tff_robust.aggregators import robust_rules
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


def mix(points, num_byzantine: int):
  """TensorFlow: row i of `points` [m, d] replaced by the mean of its m - f nearest rows (itself first)."""
  distances = robust_rules.pairwise_squared_distances(points)
  distances = tf.linalg.set_diag(distances, -tf.ones_like(tf.linalg.diag_part(distances)))  # itself first
  num_neighbors = tf.shape(points)[0] - num_byzantine
  _, nearest = tf.math.top_k(-distances, k=num_neighbors)  # equal distances: the lower index first
  return tf.reduce_mean(tf.gather(points, nearest), axis=1)


def nearest_neighbor_mixing_factory(
    num_byzantine: int, then: gathering.GatheringRobustFactory
) -> gathering.GatheringRobustFactory:
  """NNM with f = `num_byzantine`, then the gather-based rule `then` (e.g. `baselines.coordinate_median_factory()`).

  Needs m > f usable clients and whatever `then` needs.

  Raises:
    ValueError: if `num_byzantine` is not an integer >= 0.
    TypeError: if `then` is not a `gathering.GatheringRobustFactory`.
  """
  num_byzantine = type_checks.check_integer('num_byzantine', num_byzantine, minimum=0)
  if not isinstance(then, gathering.GatheringRobustFactory):
    raise TypeError(f'then must be a gathering.GatheringRobustFactory, got {then!r}')
  return gathering.GatheringRobustFactory(
      f'nnm_{then.name}',
      lambda points, weights: then.rule(mix(points, num_byzantine), weights),
      lambda m: tf.logical_and(m > num_byzantine, then.accepts_num_clients(m)),
      f'more than num_byzantine = {num_byzantine} clients and {then.requirement}',
  )


def neighbor_count(num_rows, num_byzantine: int):
  """TensorFlow: the n - f neighbours each point is mixed with (itself included), at least 1."""
  return tf.maximum(num_rows - num_byzantine, 1)


def mix_one(own, rows, num_byzantine: int):
  """TensorFlow: the mean of the max(m - f, 1) rows of `rows` [m, d] nearest to `own` [d] (L2; ties to the lower
  index). `own` is one of the rows, at distance 0, so it is always among them."""
  distances = tf.reduce_sum(tf.square(rows - own[None]), axis=1)
  _, nearest = tf.math.top_k(-distances, k=neighbor_count(tf.shape(rows)[0], num_byzantine))
  return tf.reduce_mean(tf.gather(rows, nearest), axis=0)


class NearestNeighborMixingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory`: NNM (f = `num_byzantine`) before `inner_factory`, which may be any factory.

  The server gathers the usable updates (finite, with a finite weight > 0; `gathering.usable_rows`) as m flat
  rows and broadcasts them; client i sends `inner_factory` the mean of the max(m - f, 1) rows nearest to its own
  update (`mix_one`: the paper's n - f nearest neighbours, itself included; unweighted, as in the paper) with
  its own weight. A client that is not usable sends zeros with weight 0. Mixing runs in float32 (float64 with
  float64 values or weights) and the mixed update is cast back to the value's dtypes.

  Measurements: `secure_average_calls` (the inner process's, 1 if it reports none), `num_clients_mixed` (m),
  `inner` (the inner process's measurements).

  State: the inner process's state.
  """

  def __init__(self, inner_factory: tff.aggregators.WeightedAggregationFactory, num_byzantine: int):
    """Initializes the factory.

    Raises:
      TypeError: if `inner_factory` is not a `tff.aggregators.WeightedAggregationFactory`.
      ValueError: if `num_byzantine` is not an integer >= 0.
    """
    self._inner_factory = type_checks.weighted_factory('inner_factory', inner_factory)
    self._num_byzantine = type_checks.check_integer('num_byzantine', num_byzantine, minimum=0)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. It gathers every client's update (not secure)."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    inner_process = self._inner_factory.create(value_type, weight_type)
    rows = gathering.FlatRows(value_type, weight_type)
    num_byzantine = self._num_byzantine

    @tff.tensorflow.computation(rows.gathered_type)
    def usable(gathered):
      mask = gathering.usable_rows(*gathered)
      return tf.boolean_mask(gathered[0], mask), tf.reduce_sum(tf.cast(mask, tf.int32))

    @tff.tensorflow.computation(value_type, weight_type, rows.gathered_type[0])
    def mixed(value, weight, usable_rows):
      own = rows.flatten(value)
      keep = tf.logical_and(tf.reduce_all(tf.math.is_finite(own)), tf.math.is_finite(tf.cast(weight, rows.dtype)))
      keep = tf.logical_and(keep, weight > 0)
      vector = tf.cond(keep, lambda: mix_one(own, usable_rows, num_byzantine), lambda: tf.zeros_like(own))
      return rows.unflatten(vector), tf.where(keep, weight, tf.zeros_like(weight))

    @tff.federated_computation()
    def init_fn():
      return inner_process.initialize()

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      usable_rows, num_mixed = tff.federated_map(usable, rows.gather(value, weight))
      mixed_value, mixed_weight = tff.federated_map(mixed, (value, weight, tff.federated_broadcast(usable_rows)))
      inner = inner_process.next(state, mixed_value, mixed_weight)
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=call_counts.total_calls((inner.measurements, inner_process)),
          num_clients_mixed=num_mixed,
      ), 'inner', inner.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=inner.state, result=inner.result, measurements=tff.federated_zip(measurements)
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
