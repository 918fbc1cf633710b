"""What a training task is: a model, federated training data and held-out evaluation."""

import collections
import dataclasses
from typing import Callable, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.simulation.tasks import evaluation


Transform = Callable[[tf.data.Dataset], tf.data.Dataset]


class DataUnavailableError(RuntimeError):
  """A task's data cannot be loaded (no network and no local copy); the message says where to put it."""


@dataclasses.dataclass(frozen=True)
class Task:
  """A federated training task.

  Attributes:
    name: task name as given to the runner's `--task` flag.
    model_fn: no-arg callable returning a fresh `tff.learning.models.VariableModel`.
    train_data: per-client raw training data (unbatched elements).
    preprocess_train: local-training pipeline applied to a client's raw data (epochs, shuffling, batching).
    corrupt_train: the task's data poisoning (RFA paper, Sec. 5.1) applied to a corrupted client's raw data.
    flip_labels: label flipping y -> C - 1 - y of a raw dataset (`data_corruption.flip_labels`), the runner's
      `--corruption=label_flipping`; None where the task has no class labels (regression, next-character
      prediction). `task_names.LABEL_FLIPPING_TASK_NAMES` lists the tasks that set it.
    evaluate: maps `tff.learning.models.ModelWeights` to a flat dict of held-out metrics on clean data; it
      contains `loss` and either `accuracy` (classification) or `mse` (regression).
    device_evaluator: evaluates every training device and every unseen test device separately
      (`evaluation.DeviceEvaluator`), for tasks split by device; None where the task has no such split.
    personal_test_data: each training client's own held-out data (unbatched elements, same client ids as
      `train_data`), for evaluating personal models (Fed+, personalized RFA) client by client; None where
      the task has no within-client split.
  """

  name: str
  model_fn: Callable[[], tff.learning.models.VariableModel]
  train_data: tff.simulation.datasets.ClientData
  preprocess_train: Transform
  corrupt_train: Transform
  evaluate: Callable[[tff.learning.models.ModelWeights], dict[str, float]]
  device_evaluator: Optional[evaluation.DeviceEvaluator] = None
  personal_test_data: Optional[tff.simulation.datasets.ClientData] = None
  flip_labels: Optional[Transform] = None

  def client_dataset(self, client_id: str, corrupted: bool = False) -> tf.data.Dataset:
    """The dataset client `client_id` trains on, poisoned if `corrupted`."""
    raw = self.train_data.create_tf_dataset_for_client(client_id)
    return self.preprocess_train(self.corrupt_train(raw) if corrupted else raw)


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
