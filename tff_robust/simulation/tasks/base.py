"""What a training task is: a model, federated training data and a held-out evaluation."""

import collections
import dataclasses
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff


Transform = Callable[[tf.data.Dataset], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class Task:
  """A federated training task.

  Attributes:
    name: task name as given to the runner's `--task` flag.
    model_fn: no-arg callable returning a fresh `tff.learning.models.VariableModel`.
    train_data: per-client raw training data (unbatched elements).
    preprocess_train: local-training pipeline applied to a client's raw data (epochs, shuffling, batching).
    corrupt_train: the task's data poisoning (RFA paper, Sec. 5.1) applied to a corrupted client's raw data.
    evaluate: maps `tff.learning.models.ModelWeights` to a flat dict of held-out metrics on clean data; it
      contains `loss` and either `accuracy` (classification) or `mse` (regression).
  """

  name: str
  model_fn: Callable[[], tff.learning.models.VariableModel]
  train_data: tff.simulation.datasets.ClientData
  preprocess_train: Transform
  corrupt_train: Transform
  evaluate: Callable[[tff.learning.models.ModelWeights], dict[str, float]]

  def client_dataset(self, client_id: str, corrupted: bool = False) -> tf.data.Dataset:
    """The dataset client `client_id` trains on, poisoned if `corrupted`."""
    raw = self.train_data.create_tf_dataset_for_client(client_id)
    return self.preprocess_train(self.corrupt_train(raw) if corrupted else raw)


class CentralizedEvaluator:
  """Evaluates model weights on one held-out dataset with the task's own `VariableModel` metrics.

  `metric_names` renames the model's metrics to the runner's names (e.g. 'sparse_categorical_accuracy'
  -> 'accuracy'); metrics not named there keep their own name. Each call builds a fresh model: Keras
  invalidates eagerly built models whenever a model is built inside a graph, as TFF does when it traces.
  """

  def __init__(self, model_fn, dataset: tf.data.Dataset, metric_names: dict[str, str]):
    self._model_fn = model_fn
    self._dataset = dataset
    self._metric_names = metric_names
    self._finalize = None

  def __call__(self, model_weights: tff.learning.models.ModelWeights) -> dict[str, float]:
    model = self._model_fn()
    model_weights.assign_weights_to(model)
    for batch in self._dataset:
      model.forward_pass(batch, training=False)
    unfinalized = model.report_local_unfinalized_metrics()
    if self._finalize is None:
      self._finalize = self._build_finalize(model.metric_finalizers(), unfinalized)
    finalized = self._finalize(tf.nest.map_structure(lambda t: t.numpy(), unfinalized))
    return collections.OrderedDict(
        (self._metric_names.get(name, name), float(value)) for name, value in finalized.items()
    )

  @staticmethod
  def _build_finalize(finalizers, unfinalized):
    # Keras metric finalizers create variables, which tf.function refuses on retracing; a TFF TensorFlow
    # computation (graph mode, traced once) runs them the way TFF's own evaluation does.
    unfinalized_type = tff.to_type(
        tf.nest.map_structure(lambda t: tff.TensorType(t.dtype.as_numpy_dtype, t.shape), unfinalized)
    )
    return tff.tensorflow.computation(
        lambda metrics: collections.OrderedDict((n, finalizers[n](metrics[n])) for n in finalizers),
        unfinalized_type,
    )


def client_data_from_arrays(clients: dict) -> tff.simulation.datasets.ClientData:
  """In-memory client data from {client_id: (x, y)} NumPy arrays, elements {'x': x_j, 'y': y_j}."""
  return tff.simulation.datasets.TestClientData(
      {cid: collections.OrderedDict(x=x, y=y) for cid, (x, y) in clients.items()}
  )


def test_dataset_from_arrays(x, y, batch_size: int = 256) -> tf.data.Dataset:
  """A batched held-out dataset with elements {'x', 'y'}, as the tasks' models take them."""
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(batch_size)


def batching(*, epochs: int, batch_size: int, seed: int) -> Transform:
  """Local-training pipeline: reshuffle each epoch, repeat `epochs` times, batch."""
  return lambda dataset: (
      dataset.shuffle(1024, seed=seed, reshuffle_each_iteration=True).repeat(epochs).batch(batch_size)
  )
