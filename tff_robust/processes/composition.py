"""FedAvg's round structure around a custom client work: the shared composition of our learning processes."""

import numpy as np
import tensorflow_federated as tff


def compose_with_fedavg_parts(
    model_fn,
    client_work: tff.learning.templates.ClientWorkProcess,
    aggregator_factory: tff.aggregators.WeightedAggregationFactory,
    server_optimizer_fn: tff.learning.optimizers.Optimizer,
) -> tff.learning.templates.LearningProcess:
  """`tff.learning.templates.compose_learning_process` of TFF's own model initialisation, broadcast and
  optimizer finalizer with `client_work` and `aggregator_factory` (created for the client work's update
  type with float32 weights), so the result has `build_weighted_fed_avg`'s state and accessors."""

  @tff.tensorflow.computation
  def initial_model_weights_fn():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  model_weights_type = initial_model_weights_fn.type_signature.result
  update_type = client_work.next.type_signature.result.result.member.update
  return tff.learning.templates.compose_learning_process(
      initial_model_weights_fn,
      tff.learning.templates.build_broadcast_process(model_weights_type),
      client_work,
      aggregator_factory.create(update_type, tff.TensorType(np.float32)),
      tff.learning.templates.build_apply_optimizer_finalizer(server_optimizer_fn, model_weights_type),
  )
