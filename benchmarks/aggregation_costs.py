"""Aggregation-only cost: federated computations that draw client updates from seeds and aggregate them.

Feeding many large updates from Python would time gRPC transfer, not aggregation, so each client draws its
update inside the computation (`tf.random.stateless_uniform` from its seed, weight seed % 10 + 1); a
generation-only computation is timed alongside and subtracted, leaving the aggregation's own cost. The
aggregate comes back as a checksum, so no large value crosses back to Python.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import geometric_median

AGGREGATORS = ('mean', 'geometric_median', 'coordinate_median', 'trimmed_mean', 'multi_krum', 'bulyan')


def aggregator_factory(name: str):
  if name == 'mean':
    return tff.aggregators.MeanFactory()
  if name == 'geometric_median':
    return geometric_median.GeometricMedianFactory(num_passes=3)
  if name == 'coordinate_median':
    return baselines.coordinate_median_factory()
  if name == 'trimmed_mean':
    return baselines.trimmed_mean_factory(0.1)
  if name == 'multi_krum':
    return baselines.multi_krum_factory(1)
  if name == 'bulyan':
    return baselines.bulyan_factory(1)
  raise ValueError(f'aggregator must be one of {AGGREGATORS}, got {name!r}')


def aggregation_computations(dimension: int, names) -> dict:
  """{'generation_only' or aggregator name: federated computation of the clients' int32 seeds -> float32}."""
  value_type = tff.TensorType(np.float32, [dimension])
  weight_type = tff.TensorType(np.float32)

  @tff.tensorflow.computation(np.int32)
  def client_update(seed):
    update = tf.random.stateless_uniform([dimension], seed=tf.stack([seed, 0]), minval=-1.0)
    return update, tf.cast(seed % 10 + 1, tf.float32)

  @tff.tensorflow.computation(value_type)
  def first_entry(update):
    return update[0]

  @tff.tensorflow.computation(value_type)
  def checksum(aggregate):
    return tf.reduce_sum(aggregate)

  @tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
  def generation_only(seeds):
    return tff.federated_sum(tff.federated_map(first_entry, tff.federated_map(client_update, seeds)[0]))

  def generate_and_aggregate(factory):
    process = factory.create(value_type, weight_type)
    state = process.initialize()

    @tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
    def run(seeds):
      updates = tff.federated_map(client_update, seeds)
      output = process.next(tff.federated_value(state, tff.SERVER), updates[0], updates[1])
      return tff.federated_map(checksum, output.result)

    return run

  computations = {'generation_only': generation_only}
  computations.update({name: generate_and_aggregate(aggregator_factory(name)) for name in names})
  return computations
