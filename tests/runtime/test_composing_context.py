"""The composing context: dependent aggregations over several workers equal their closed forms."""

import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.runtime import composing_context
from tff_robust.runtime import execution_context
from tff_robust.runtime import simulation_compiler


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


_TABLE_TYPE = tff.TensorType(np.float32, [4])


@tff.tensorflow.computation(tff.SequenceType(np.float32))
def _sequence_total(dataset):
  return dataset.reduce(np.float32(0), lambda total, value: total + value)


@tff.federated_computation(tff.FederatedType(tff.TensorType(np.int32, [2]), tff.CLIENTS),
                           tff.FederatedType(_TABLE_TYPE, tff.SERVER))
def _selected_totals(keys, table):
  select_fn = tff.tensorflow.computation(lambda table, key: tf.gather(table, key), _TABLE_TYPE, np.int32)
  selected = tff.federated_select(keys, tff.federated_value(np.int32(4), tff.SERVER), table, select_fn)
  return tff.federated_map(_sequence_total, selected)


def test_federated_select_runs_per_shard(two_worker_context):
  keys, table = [[0, 1], [2, 3], [1, 1]], np.array([1.0, 2.0, 4.0, 8.0], np.float32)  # shards of 2 and 1
  assert _selected_totals(keys, table) == [table[k].sum() for k in keys]


@tff.federated_computation(tff.SequenceType(np.int32))
def _sequence_sum(values):
  return tff.sequence_sum(values)


def test_an_intrinsic_it_cannot_split_is_refused_by_name_before_anything_runs(two_worker_context):
  with pytest.raises(composing_context.UnsupportedIntrinsicError, match='^sequence_sum cannot run over TFF workers'):
    composing_context.check_supported(_sequence_sum, simulation_compiler.compile_for_simulation)
  with pytest.raises(composing_context.UnsupportedIntrinsicError, match='sequence_sum'):
    _sequence_sum([1, 2, 3])


def test_tensorflow_computations_with_and_without_a_parameter_run(two_worker_context):
  assert tff.tensorflow.computation(lambda x: x + 1.0, np.float32)(np.float32(2.0)) == 3.0
  assert tff.tensorflow.computation(lambda: tf.constant(7))() == 7


def test_a_worker_that_stops_fails_the_next_computation_at_once_naming_it():
  workers = [execution_context.LocalWorker() for _ in range(2)]
  try:
    stubs = [execution_context._ready_stub(worker.address) for worker in workers]  # pylint: disable=protected-access
    context = composing_context.ComposingContext(
        stubs, simulation_compiler.compile_for_simulation, worker_names=['w0', 'w1'])
    with tff.framework.get_context_stack().install(context):
      assert _mean_then_mean_deviation([1.0, 3.0], [1.0, 1.0])[0] == pytest.approx(2.0)
      workers[1].stop()
      start = time.monotonic()
      with pytest.raises(composing_context.WorkerUnavailable, match='the TFF worker w1 became unreachable'):
        _mean_then_mean_deviation([1.0, 3.0], [1.0, 1.0])
      assert time.monotonic() - start < 10.0
  finally:
    for worker in workers:
      worker.stop()
