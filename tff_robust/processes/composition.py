"""FedAvg's round structure around a custom client work: the shared composition of our learning processes."""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import client_loop
from tff_robust.processes import counting_client_work


def compose_with_fedavg_parts(
    model_fn,
    client_work: tff.learning.templates.ClientWorkProcess,
    aggregator_factory: tff.aggregators.WeightedAggregationFactory,
    server_optimizer_fn: tff.learning.optimizers.Optimizer,
    model_distributor: Optional[tff.learning.templates.DistributionProcess] = None,
) -> tff.learning.templates.LearningProcess:
  """`tff.learning.templates.compose_learning_process` of TFF's own model initialisation, broadcast (or
  `model_distributor`) and optimizer finalizer with `client_work` and `aggregator_factory` (created for the
  client work's update type with float32 weights), so the result has `build_weighted_fed_avg`'s state and
  accessors."""

  @tff.tensorflow.computation
  def initial_model_weights_fn():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  model_weights_type = initial_model_weights_fn.type_signature.result
  update_type = client_work.next.type_signature.result.result.member.update
  if model_distributor is None:
    model_distributor = tff.learning.templates.build_broadcast_process(model_weights_type)
  return tff.learning.templates.compose_learning_process(
      initial_model_weights_fn,
      model_distributor,
      client_work,
      aggregator_factory.create(update_type, tff.TensorType(np.float32)),
      tff.learning.templates.build_apply_optimizer_finalizer(server_optimizer_fn, model_weights_type),
  )


def with_fedavg_defaults(server_optimizer_fn, model_aggregator, metrics_aggregator):
  """The three arguments, each None replaced by `build_weighted_fed_avg`'s default: server SGD with learning
  rate 1, `tff.aggregators.MeanFactory()`, `tff.learning.metrics.sum_then_finalize`."""
  if server_optimizer_fn is None:
    server_optimizer_fn = tff.learning.optimizers.build_sgdm(learning_rate=1.0)
  if model_aggregator is None:
    model_aggregator = tff.aggregators.MeanFactory()
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize
  return server_optimizer_fn, model_aggregator, metrics_aggregator


def build_fed_avg_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    model_distributor=None,
    model_aggregator: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    metrics_aggregator=None,
    loop_implementation: tff.learning.LoopImplementation = client_loop.LOOP_IMPLEMENTATION,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.LearningProcess:
  """`tff.learning.algorithms.build_weighted_fed_avg`, arguments, defaults and parts included, whose client
  work also reports `num_nonfinite_updates` and `num_empty_datasets` from the same client call
  (`counting_client_work`): metrics `client_work/num_nonfinite_updates` count the clients left out of the round
  for a non-finite update. `count_factory` sums those 0/1 counts (default `tff.aggregators.SumFactory()`); with
  `tff.aggregators.SecureSumFactory(1, 0)`, a secure `model_aggregator` (e.g.
  `tff_robust.aggregators.SecureGeometricMedianFactory`: RFA) and
  `metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize`, every client value reaches the server
  through a secure sum (`privacy.assert_client_values_aggregated_securely(process.next)`).
  The one default that differs is the client loop: `DATASET_ITERATOR` (`client_loop`), the same steps on the
  same batches at a fraction of `DATASET_REDUCE`'s cost per client in TFF's worker.

  `model_fn` is a no-arg callable returning a `tff.learning.models.VariableModel`, or a
  `tff.learning.models.FunctionalModel`; the server optimizer defaults to SGD with learning rate 1 and the
  aggregator to `tff.aggregators.MeanFactory()`, as in TFF.
  """
  server_optimizer_fn, model_aggregator, metrics_aggregator = with_fedavg_defaults(
      server_optimizer_fn, model_aggregator, metrics_aggregator
  )
  functional = isinstance(model_fn, tff.learning.models.FunctionalModel)
  if functional:

    @tff.tensorflow.computation
    def initial_model_weights_fn():
      trainable, non_trainable = model_fn.initial_weights
      return tff.learning.models.ModelWeights(
          tuple(tf.convert_to_tensor(w) for w in trainable), tuple(tf.convert_to_tensor(w) for w in non_trainable)
      )

    client_work = counting_client_work.build_functional_model_delta_client_work(
        model_fn, client_optimizer_fn, client_weighting, metrics_aggregator, loop_implementation=loop_implementation,
        count_factory=count_factory,
    )
  else:
    if not callable(model_fn):
      raise TypeError(
          f'model_fn must be a no-arg callable returning a VariableModel, or a FunctionalModel, got {model_fn!r}'
      )

    @tff.tensorflow.computation
    def initial_model_weights_fn():
      return tff.learning.models.ModelWeights.from_model(model_fn())

    client_work = counting_client_work.build_model_delta_client_work(
        model_fn, client_optimizer_fn, client_weighting, metrics_aggregator, loop_implementation=loop_implementation,
        count_factory=count_factory,
    )
  model_weights_type = initial_model_weights_fn.type_signature.result
  if model_distributor is None:
    model_distributor = tff.learning.templates.build_broadcast_process(model_weights_type)
  return tff.learning.templates.compose_learning_process(
      initial_model_weights_fn,
      model_distributor,
      client_work,
      model_aggregator.create(model_weights_type.trainable, tff.TensorType(np.float32)),
      tff.learning.templates.build_apply_optimizer_finalizer(server_optimizer_fn, model_weights_type),
  )


def build_fed_sgd_process(
    model_fn,
    server_optimizer_fn: tff.learning.optimizers.Optimizer,
    *,
    model_aggregator: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    metrics_aggregator=None,
    loop_implementation: tff.learning.LoopImplementation = client_loop.LOOP_IMPLEMENTATION,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.LearningProcess:
  """`tff.learning.algorithms.build_fed_sgd` for a no-arg `model_fn` returning a `VariableModel`, whose client work
  also reports `num_nonfinite_updates` and `num_empty_datasets` (`counting_client_work`), summed by `count_factory`
  as in `build_fed_avg_process`; its client loop defaults to `DATASET_ITERATOR` (`client_loop`), TFF's to
  `DATASET_REDUCE`.

  TFF's FedSGD client update, like its model-delta one, returns a mean gradient with a NaN or Inf entry as zeros
  with weight 0 (it keeps the client's metrics), and an empty dataset's 0/0 gradient the same way: a client with a
  batch and weight 0 had a non-finite gradient. TFF 0.87's `build_fed_sgd` builds its client work with
  `fed_sgd._build_fed_sgd_client_work`, whose client update is used here; the rest is the same composition. The aggregator
  defaults to `tff.aggregators.MeanFactory()` and the metrics to `tff.learning.metrics.sum_then_finalize`.
  """
  if not callable(model_fn) or isinstance(model_fn, tff.learning.models.FunctionalModel):
    raise TypeError(f'model_fn must be a no-arg callable returning a VariableModel, got {model_fn!r}')
  server_optimizer_fn, model_aggregator, metrics_aggregator = with_fedavg_defaults(
      server_optimizer_fn, model_aggregator, metrics_aggregator
  )
  client_work = counting_client_work.build_fed_sgd_client_work(
      model_fn, metrics_aggregator, loop_implementation=loop_implementation, count_factory=count_factory
  )
  return compose_with_fedavg_parts(model_fn, client_work, model_aggregator, server_optimizer_fn)
