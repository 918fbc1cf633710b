"""TFF's model-delta and FedSGD client works, counting dropped updates and empty datasets in the same client call.

TFF's client updates (those of `build_weighted_fed_avg` and `build_fed_sgd`) replace an update that has a NaN
or Inf entry by zeros with weight 0, so the aggregator never sees it and no metric counts it. Otherwise a
model delta's weight is the number of examples trained on (`NUM_EXAMPLES`) or 1 (`UNIFORM`). Hence a client
whose dataset yields at least one batch and whose update weight is 0 had a non-finite update:
`num_nonfinite_updates` is the number of such clients. An empty dataset (a zero update, weight 0 or 1) is not
counted there but in `num_empty_datasets`; a dataset of zero-row batches, which `tf.data` batching never
produces, would be in neither.

Each client work here is TFF's own (the same client update function, optimizer hyperparameter state, metrics
aggregation and result) with one difference: the per-client TensorFlow computation also returns the two 0/1
counts, read from the dataset it has just trained on. One client call per client and round: a second
`federated_map` over the client datasets would serialise every dataset into the worker again and instantiate
one more graph per client (`benchmarks.shakespeare_round_cost`).

With `client_flags=True` each client's data is `<dataset, flag dataset>` (a one-element bool dataset; TFF client
data must be sequences) and its update leaves as `<update, flag>`, read in the same call: the shape
`tff_robust.simulation.update_corruption_process` feeds to an `UpdateCorruptionFactory`.

`count_factory` sums the two counts as one int32 [2] of 0/1 per client: `tff.aggregators.SumFactory()` by
default, `tff.aggregators.SecureSumFactory(1, 0)` for a process whose every client value is securely summed.
"""

import collections
import dataclasses
import functools
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.learning.algorithms import fed_sgd
from tensorflow_federated.python.learning.templates import model_delta_client_work

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import type_checks
from tff_robust.processes import model_types


@dataclasses.dataclass(frozen=True)
class _ClientTraining:
  """What a client work needs from one algorithm's client update.

  `train(hparams, weights, dataset)` is traced inside the per-client TensorFlow computation and returns
  TFF's `(ClientResult, metric outputs)`; `hparams` is the broadcast server state when `state_at_clients`,
  else None. `aggregate_metrics` is the federated metrics aggregation of the outputs.
  """

  initialize: tff.Computation
  weights_type: tff.Type
  dataset_type: tff.SequenceType
  train: Callable[[Any, Any, tf.data.Dataset], Any]
  aggregate_metrics: Callable[[Any], Any]
  state_at_clients: bool
  get_hparams: Optional[tff.Computation] = None
  set_hparams: Optional[tff.Computation] = None


@tf.function
def first_flag(flag_dataset: tf.data.Dataset) -> tf.Tensor:
  """The flag of a one-element bool dataset (False if empty), read through an iterator: no reduce function to
  instantiate at every client call (`tff_robust.processes.client_loop`)."""
  flag = iter(flag_dataset).get_next_as_optional()
  return tf.cond(flag.has_value(), flag.get_value, lambda: tf.constant(False))


def _dropped_and_empty(client_result, dataset: tf.data.Dataset):
  """(1 if the client update dropped this non-empty dataset's update, 1 if the dataset is empty), int32; the
  dataset read after training (`federated_counting.is_empty_after`)."""
  empty = federated_counting.is_empty_after(dataset, client_result)
  dropped = tf.logical_and(tf.equal(empty, 0), tf.equal(client_result.update_weight, 0.0))
  return tf.cast(dropped, tf.int32), empty


def _build(training: _ClientTraining, client_flags: bool, count_factory) -> tff.learning.templates.ClientWorkProcess:
  """The client work of `training`: one `federated_map` per round, whose per-client computation trains and
  returns `<result, metric outputs, [dropped, empty]>`; measurements `train`, `num_nonfinite_updates`,
  `num_empty_datasets` (one `count_factory` sum)."""
  sum_counts = counts_summer(count_factory)
  state_type = training.initialize.type_signature.result
  client_data_type = (
      tff.StructType([training.dataset_type, tff.SequenceType(np.bool_)]) if client_flags else training.dataset_type
  )

  def train_and_count(hparams, weights, client_data):
    dataset = client_data[0] if client_flags else client_data
    client_result, outputs = training.train(hparams, weights, dataset)
    dropped, empty = _dropped_and_empty(client_result, dataset)
    if client_flags:
      client_result = tff.learning.templates.ClientResult(
          update=(client_result.update, first_flag(client_data[1])), update_weight=client_result.update_weight
      )
    return client_result, outputs, tf.stack([dropped, empty])

  if training.state_at_clients:
    client_computation = tff.tensorflow.computation(
        train_and_count, state_type.member, training.weights_type, client_data_type
    )
  else:
    client_computation = tff.tensorflow.computation(
        lambda weights, client_data: train_and_count(None, weights, client_data), training.weights_type,
        client_data_type,
    )

  @tff.federated_computation(
      state_type, tff.FederatedType(training.weights_type, tff.CLIENTS), tff.FederatedType(client_data_type, tff.CLIENTS)
  )
  def next_fn(state, weights, client_data):
    client_arguments = (weights, client_data)
    if training.state_at_clients:
      client_arguments = (tff.federated_broadcast(state),) + client_arguments
    result, outputs, counts = tff.federated_map(client_computation, client_arguments)
    num_nonfinite_updates, num_empty_datasets = sum_counts(counts)
    measurements = collections.OrderedDict(
        train=training.aggregate_metrics(outputs),
        num_nonfinite_updates=num_nonfinite_updates,
        num_empty_datasets=num_empty_datasets,
    )
    return tff.templates.MeasuredProcessOutput(state, result, tff.federated_zip(measurements))

  return tff.learning.templates.ClientWorkProcess(
      training.initialize, next_fn, get_hparams_fn=training.get_hparams, set_hparams_fn=training.set_hparams
  )


def counts_summer(count_factory: Optional[tff.aggregators.UnweightedAggregationFactory]) -> Callable:
  """A function of the clients' int32 [2] 0/1 counts, to be called in a federated computation, that returns the
  two sums at the server, (sum of the first entries, sum of the second), summed at once by `count_factory`
  (`tff.aggregators.SumFactory()` if None; `tff.aggregators.SecureSumFactory(1, 0)` keeps every count secret).

  Raises:
    TypeError: for a `count_factory` that is not an unweighted aggregation factory.
  """
  counts_process = type_checks.sum_factory_or_default(count_factory, 'count_factory').create(
      tff.TensorType(np.int32, [2]))

  def sum_counts(counts_at_clients):
    summed = counts_process.next(counts_process.initialize(), counts_at_clients).result
    counts = tff.federated_map(_unstacked_counts(), summed)
    return counts[0], counts[1]

  return sum_counts


@functools.cache
def _unstacked_counts():
  return tff.tensorflow.computation(lambda counts: (counts[0], counts[1]), tff.TensorType(np.int32, [2]))


def _stateless_initialize() -> tff.Computation:
  return tff.federated_computation(lambda: tff.federated_value((), tff.SERVER))


def build_model_delta_client_work(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    optimizer: tff.learning.optimizers.Optimizer,
    client_weighting: tff.learning.ClientWeighting,
    metrics_aggregator,
    *,
    loop_implementation: tff.learning.LoopImplementation,
    client_flags: bool = False,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """`tff.learning.templates.build_model_delta_client_work` (the client optimizer's hyperparameters as state,
  `get_hparams`/`set_hparams` included) with the two counts; `metrics_aggregator` is required (TFF's default
  is `tff.learning.metrics.sum_then_finalize`)."""
  dataset_type, weights_type, aggregate_metrics = model_types.model_types(model_fn, metrics_aggregator)
  whimsy_state = optimizer.initialize(tf.TensorSpec(shape=(), dtype=tf.float32))
  initial_hparams = optimizer.get_hparams(whimsy_state)
  initialize = tff.federated_computation(lambda: tff.federated_value(initial_hparams, tff.SERVER))
  hparams_type = initialize.type_signature.result.member

  def train(hparams, weights, dataset):
    client_update = model_delta_client_work.build_model_delta_update_with_tff_optimizer(
        model_fn=model_fn, weighting=client_weighting, loop_implementation=loop_implementation
    )
    return client_update(optimizer, weights, dataset, hparams)

  return _build(
      _ClientTraining(
          initialize=initialize,
          weights_type=weights_type,
          dataset_type=dataset_type,
          train=train,
          aggregate_metrics=aggregate_metrics,
          state_at_clients=True,
          get_hparams=tff.tensorflow.computation(lambda state: state, hparams_type),
          set_hparams=tff.tensorflow.computation(lambda state, hparams: hparams, hparams_type, hparams_type),
      ),
      client_flags,
      count_factory,
  )


def build_functional_model_delta_client_work(
    model: tff.learning.models.FunctionalModel,
    optimizer: tff.learning.optimizers.Optimizer,
    client_weighting: tff.learning.ClientWeighting,
    metrics_aggregator,
    *,
    loop_implementation: tff.learning.LoopImplementation,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """TFF's `build_functional_model_delta_client_work` (stateless) with the two counts."""

  def train(hparams, weights, dataset):
    del hparams  # stateless
    client_update = model_delta_client_work.build_functional_model_delta_update(
        model=model, weighting=client_weighting, loop_implementation=loop_implementation
    )
    return client_update(optimizer, (weights.trainable, weights.non_trainable), dataset)

  trainable, non_trainable = model.initial_weights
  weights_type = tff.types.tensorflow_to_type(tff.learning.models.ModelWeights(
      tuple(tf.TensorSpec(w.shape, tf.dtypes.as_dtype(w.dtype)) for w in trainable),
      tuple(tf.TensorSpec(w.shape, tf.dtypes.as_dtype(w.dtype)) for w in non_trainable),
  ))
  return _build(
      _ClientTraining(
          initialize=_stateless_initialize(),
          weights_type=weights_type,
          dataset_type=tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec)),
          train=train,
          aggregate_metrics=metrics_aggregator(model.finalize_metrics),
          state_at_clients=False,
      ),
      client_flags=False,
      count_factory=count_factory,
  )


def build_fed_sgd_client_work(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    metrics_aggregator,
    *,
    loop_implementation: tff.learning.LoopImplementation,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """TFF 0.87's FedSGD client work (`fed_sgd._build_fed_sgd_client_work`, that of `build_fed_sgd`: stateless,
  a mean gradient weighted by the number of examples) with the two counts."""
  dataset_type, weights_type, aggregate_metrics = model_types.model_types(model_fn, metrics_aggregator)

  def train(hparams, weights, dataset):
    del hparams  # stateless
    client_update = fed_sgd._build_client_update(  # pylint: disable=protected-access
        model_fn(), loop_implementation=loop_implementation
    )
    return client_update(weights, dataset)

  return _build(
      _ClientTraining(
          initialize=_stateless_initialize(),
          weights_type=weights_type,
          dataset_type=dataset_type,
          train=train,
          aggregate_metrics=aggregate_metrics,
          state_at_clients=False,
      ),
      client_flags=False,
      count_factory=count_factory,
  )
