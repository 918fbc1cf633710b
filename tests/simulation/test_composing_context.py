"""The composing context: dependent aggregations over several workers equal their closed forms."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.simulation import composing_context
from tff_robust.simulation import execution_context


@pytest.fixture
def two_worker_context():
  workers = [execution_context.LocalWorker() for _ in range(2)]
  try:
    stubs = [execution_context._ready_stub(worker.address) for worker in workers]  # pylint: disable=protected-access
    context = composing_context.ComposingContext(stubs, execution_context._compile_for_simulation)  # pylint: disable=protected-access
    with tff.framework.get_context_stack().install(context):
      yield
  finally:
    for worker in workers:
      worker.stop()
      assert not worker.is_running()


@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS), tff.FederatedType(np.float32, tff.CLIENTS))
def _mean_then_mean_deviation(values, weights):
  mean = tff.federated_mean(values, weights)
  deviations = tff.federated_map(tff.tensorflow.computation(lambda x, c: tf.abs(x - c)),
                                 (values, tff.federated_broadcast(mean)))
  return mean, tff.federated_mean(deviations, weights), tff.federated_sum(values), values


@pytest.mark.parametrize('values,weights', [
    ([1.0, 2.0, 4.0, 8.0, 16.0], [1.0, 3.0, 0.5, 2.0, 0.25]),  # shards of 3 and 2 clients
    ([1.0, 2.0, 4.0], [0.0, 0.0, 1.0]),  # the first shard's weights are all zero
])
def test_two_dependent_aggregations_on_two_workers_equal_the_closed_form(two_worker_context, values, weights):
  values_np, weights_np = np.array(values), np.array(weights)
  mean = np.dot(values_np, weights_np) / weights_np.sum()
  deviation = np.dot(np.abs(values_np - mean), weights_np) / weights_np.sum()
  got_mean, got_deviation, total, clients = _mean_then_mean_deviation(values, weights)
  assert got_mean == pytest.approx(mean, rel=1e-6)
  assert got_deviation == pytest.approx(deviation, rel=1e-6)
  assert total == pytest.approx(values_np.sum())
  assert clients == values


def test_shard_sizes_are_contiguous_and_never_empty():
  assert composing_context.shard_sizes(5, 2) == [3, 2]
  assert composing_context.shard_sizes(1, 3) == [1]
  assert composing_context.shard_sizes(0, 2) == [0]
