"""The TFF types a learning process derives from its model."""

import tensorflow as tf
import tensorflow_federated as tff


def model_types(model_fn, metrics_aggregator):
  """(dataset type, `ModelWeights` type, metrics aggregation function) of the model `model_fn` builds."""
  with tf.Graph().as_default():
    model = model_fn()
    if not isinstance(model, tff.learning.models.VariableModel):
      raise TypeError(f'model_fn must return a tff.learning.models.VariableModel, got {type(model)}')
    metrics_aggregation_fn = metrics_aggregator(model.metric_finalizers())
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
  return data_type, tff.learning.models.weights_type_from_model(model), metrics_aggregation_fn
