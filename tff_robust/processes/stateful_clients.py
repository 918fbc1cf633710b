"""Learning processes whose clients keep a state between rounds (personal models): the shared template.

A `tff.learning.templates.LearningProcess` cannot carry per-client state: its `next` takes exactly
(server state, client data). A `StatefulClientProcess` is a `tff.templates.IterativeProcess` with
    next(server_state, cohort data, cohort client states) -> (server_state, cohort client states, metrics),
in the pattern of TFF's stateful-clients example. A round is FedAvg's structure around a client update that
also reads and rewrites the client's state:
    broadcast the global model w -> each client k: (update_k, weight_k, new state_k, metrics_k)
    = client_update(w, state_k, data_k) -> aggregate the updates -> server optimizer on w.
The simulation driver (`tff_robust.simulation.training_loop.run_training`) keeps every client's state in a
`ClientStateStore` between its visits.

A client whose update, update weight or new state has a NaN or Inf entry (e.g. from NaN or Inf features) is
left out of the round as TFF's model-delta client work leaves it out: update zeros with weight 0, metrics
zeros (TFF resets them); besides, it keeps its previous state, so that one bad visit does not make its state
(a personal model) non-finite for good. Such clients are counted in `client_work/num_nonfinite_updates`.
"""

import collections
from typing import Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import nonfinite
from tff_robust.aggregators import structure_math
from tff_robust.processes import counting_client_work
from tff_robust.processes import model_types


class StatefulClientOutput(NamedTuple):
  """The result of `StatefulClientProcess.next`."""

  state: object
  client_states: list
  metrics: object


class StatefulClientProcess(tff.templates.IterativeProcess):
  """`IterativeProcess` with `next(state, client_data, client_states) -> StatefulClientOutput`.

  Besides `initialize` and `next`:
    - `get_model_weights(state)`: the global model (a `tff.learning.models.ModelWeights`);
    - `initial_client_state(state)`: the state of a client before its first visit, from the server state
      (e.g. the initial global model: Fed+ Algorithm 1, line 2);
    - `personal_model_weights(global_weights, client_state)`: the model a client predicts with;
    - `anchor_model_weights(global_weights, client_state)`: where the algorithm has one, the other personal model
      a client could predict with (Fed+'s anchor w~ + theta_k, eq. (2)), else None;
    - `set_model_weights(state, model_weights)`: the state with another global model (e.g. drawn per seed);
    - `next_computation`: the federated computation `next` calls, e.g. for
      `privacy.assert_client_values_aggregated_securely`.
  """

  def __init__(self, initialize_fn, next_fn, *, get_model_weights, initial_client_state,
               personal_model_weights: Callable, anchor_model_weights: Optional[Callable] = None):
    super().__init__(initialize_fn, next_fn)
    self._get_model_weights = get_model_weights
    self._initial_client_state = initial_client_state
    self._personal_model_weights = personal_model_weights
    self._anchor_model_weights = anchor_model_weights

  def next(self, state, client_data, client_states) -> StatefulClientOutput:
    """One round: `StatefulClientOutput(state, client_states, metrics)`, the cohort's new states in the order of
    `client_data`; ValueError unless there is one state per dataset."""
    if len(client_data) != len(client_states):
      raise ValueError(
          f'client_data and client_states must have one entry per cohort client, got {len(client_data)} '
          f'and {len(client_states)}'
      )
    state, client_states, metrics = super().next(state, client_data, client_states)
    return StatefulClientOutput(state, list(client_states), metrics)

  @property
  def next_computation(self) -> tff.Computation:
    """The federated computation (state, client data, client states) -> (state, client states, metrics) that
    `next` calls."""
    return super().next

  def get_model_weights(self, state) -> tff.learning.models.ModelWeights:
    """The global model of the server `state`."""
    return self._get_model_weights(state)

  def set_model_weights(self, state, model_weights: tff.learning.models.ModelWeights):
    """The server `state` with its global model replaced by `model_weights`."""
    return collections.OrderedDict(state, global_model_weights=model_weights)

  def initial_client_state(self, state):
    """The state a client starts from, given the server `state` (before its first round)."""
    return self._initial_client_state(state)

  def personal_model_weights(self, global_weights, client_state) -> tff.learning.models.ModelWeights:
    """The model a client with `client_state` predicts with, given the global weights."""
    return self._personal_model_weights(global_weights, client_state)

  @property
  def has_anchor(self) -> bool:
    """Whether `anchor_model_weights` gives a second personal model (the runner then evaluates it too)."""
    return self._anchor_model_weights is not None

  def anchor_model_weights(self, global_weights, client_state) -> tff.learning.models.ModelWeights:
    """The algorithm's other personal model of a client with `client_state` (`has_anchor`); ValueError without."""
    if self._anchor_model_weights is None:
      raise ValueError('this process has no anchor model (has_anchor is False)')
    return self._anchor_model_weights(global_weights, client_state)


def build_stateful_client_process(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    client_update: Callable,
    client_state_type_fn: Callable,
    aggregator_factory: tff.aggregators.WeightedAggregationFactory,
    server_optimizer: tff.learning.optimizers.Optimizer,
    *,
    initial_client_state: Callable,
    personal_model_weights: Callable,
    anchor_model_weights: Optional[Callable] = None,
    metrics_aggregator=tff.learning.metrics.sum_then_finalize,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> StatefulClientProcess:
  """Builds the round above from an algorithm's client update.

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`.
    client_update: a Python function (global weights, client state, dataset) -> (update, update weight,
      new client state, unfinalized model metrics), traced inside the round's one TensorFlow computation per
      client (which also leaves out a non-finite result and reads whether the dataset is empty). The update
      has the trainable weights' structure and, as in TFF's model-delta client work, is the global model
      minus the client's model: the server optimizer applies the aggregate as a gradient.
    client_state_type_fn: maps the model's `ModelWeights` type to the `tff.Type` of one client's state.
    aggregator_factory: a `WeightedAggregationFactory` for the updates (created with float32 weights).
    server_optimizer: a `tff.learning.optimizers.Optimizer`; SGD with learning rate 1 adds the aggregate.
    initial_client_state: Python callable server state -> a client's state before its first visit.
    personal_model_weights: Python callable (global `ModelWeights`, client state) -> `ModelWeights`.
    anchor_model_weights: optional, the same kind of callable for a second personal model (Fed+'s anchor).
    metrics_aggregator: as for `tff.learning.algorithms.build_weighted_fed_avg`.
    count_factory: sums the two 0/1 counts below, one int32 [2] a client (`counting_client_work.counts_summer`):
      `tff.aggregators.SumFactory()` if None, `tff.aggregators.SecureSumFactory(1, 0)` to keep them secret.

  Returns:
    A `StatefulClientProcess`. Server state: `global_model_weights`, `aggregator`, `finalizer`. Metrics:
    `client_work/train` (the model's metrics over the cohort's local training, clients left out for a
    non-finite result excluded), `client_work/num_nonfinite_updates` (those clients),
    `client_work/num_empty_datasets`, `aggregator` and
    `finalizer` (the processes' measurements).
  """
  data_type, weights_type, metrics_aggregation_fn = model_types.model_types(model_fn, metrics_aggregator)
  client_state_type = client_state_type_fn(weights_type)

  @tff.tensorflow.computation(weights_type, client_state_type, data_type)
  def client_step(global_weights, client_state, dataset):
    """`client_update`, then: a non-finite (update, weight, new state) becomes (zeros, 0, the previous state)
    with zero metrics; also [1 if left out, 1 if the dataset is empty] (`federated_counting.is_empty_after`)."""
    update, weight, new_client_state, model_metrics = client_update(global_weights, client_state, dataset)
    update, weight, left_out = nonfinite.leave_out_if_nonfinite(update, weight, new_client_state)
    kept_state = tf.nest.pack_sequence_as(new_client_state, [
        tf.where(left_out, previous, new)
        for previous, new in zip(tf.nest.flatten(client_state), tf.nest.flatten(new_client_state))
    ])
    return (
        update,
        weight,
        kept_state,
        structure_math.zeros_where(left_out, model_metrics),
        tf.stack([tf.cast(left_out, tf.int32),
                  federated_counting.is_empty_after(dataset, (update, weight, kept_state))]),
    )

  sum_counts = counting_client_work.counts_summer(count_factory)

  aggregator = aggregator_factory.create(client_step.type_signature.result[0], tff.TensorType(np.float32))
  finalizer = tff.learning.templates.build_apply_optimizer_finalizer(server_optimizer, weights_type)

  @tff.tensorflow.computation
  def initial_model_weights_fn():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  @tff.federated_computation()
  def initialize_fn():
    return tff.federated_zip(collections.OrderedDict(
        global_model_weights=tff.federated_eval(initial_model_weights_fn, tff.SERVER),
        aggregator=aggregator.initialize(),
        finalizer=finalizer.initialize(),
    ))

  @tff.federated_computation(
      initialize_fn.type_signature.result,
      tff.FederatedType(data_type, tff.CLIENTS),
      tff.FederatedType(client_state_type, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_states):
    outputs = tff.federated_map(client_step, (
        tff.federated_broadcast(state.global_model_weights), client_states, client_data,
    ))
    update, weight, new_client_states, model_metrics = outputs[0], outputs[1], outputs[2], outputs[3]
    aggregated = aggregator.next(state.aggregator, update, weight)
    finalized = finalizer.next(state.finalizer, state.global_model_weights, aggregated.result)
    new_state = tff.federated_zip(collections.OrderedDict(
        global_model_weights=finalized.result, aggregator=aggregated.state, finalizer=finalized.state,
    ))
    num_nonfinite_updates, num_empty_datasets = sum_counts(outputs[4])
    metrics = tff.federated_zip(collections.OrderedDict(
        client_work=tff.federated_zip(collections.OrderedDict(
            train=metrics_aggregation_fn(model_metrics), num_nonfinite_updates=num_nonfinite_updates,
            num_empty_datasets=num_empty_datasets,
        )),
        aggregator=aggregated.measurements,
        finalizer=finalized.measurements,
    ))
    return new_state, new_client_states, metrics

  return StatefulClientProcess(
      initialize_fn, next_fn,
      get_model_weights=lambda state: state['global_model_weights'],
      initial_client_state=initial_client_state,
      personal_model_weights=personal_model_weights, anchor_model_weights=anchor_model_weights,
  )
