"""What a training task is: a model, federated training data and held-out evaluation."""

import collections
import dataclasses
from typing import Callable, Mapping, Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.tasks import backdoor as backdoor_lib
from tff_robust.tasks import evaluation
from tff_robust.tasks import shakespeare_windows


Transform = Callable[[tf.data.Dataset], tf.data.Dataset]


def check_validation_fraction(fraction) -> None:
  """Refuses a `validation_fraction` that is not a number in (0, 1), naming the argument.

  Raises:
    ValueError: if `fraction` is not a real number (bools refused) strictly between 0 and 1.
  """
  if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
    raise ValueError(f'validation_fraction must be a number in (0, 1), got {fraction!r}')


def num_held_out(num_examples: int, fraction: float) -> int:
  """round(`fraction` n) of n examples held out, at least one and at most n - 1 (n >= 2)."""
  return min(max(1, round(fraction * num_examples)), num_examples - 1)


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
    pooled_evaluation_group: the device group ('personal': `personal_test_data`; 'eval': the device
      evaluator's test devices) whose examples, all together, are exactly what `evaluate` pools, scored with the
      same metric names; or None. Where that group is scored with the global model, the runner reads `eval/*`
      from the group's pooled metrics (`evaluation.DeviceMetrics.pooled`) instead of a second pass over the
      same examples.
    backdoor: what the task offers a targeted attack (`tasks.backdoor.PixelBackdoor`: poisoning with a pixel trigger
      and the attack success rate on the examples `evaluate` scores); None where it defines no trigger
      (`task_names.BACKDOOR_TASKS` lists the tasks that set it).
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
  pooled_evaluation_group: Optional[str] = None
  backdoor: Optional[backdoor_lib.PixelBackdoor] = None

  def client_dataset(self, client_id: str, corrupted: bool = False) -> tf.data.Dataset:
    """The dataset client `client_id` trains on, poisoned if `corrupted`."""
    raw = self.train_data.create_tf_dataset_for_client(client_id)
    return self.preprocess_train(self.corrupt_train(raw) if corrupted else raw)

  def client_data(self, client_id: str, corrupted: bool = False) -> Union['InMemoryClient', tf.data.Dataset]:
    """What `client_dataset` yields, as an `InMemoryClient` where the task's raw training examples are NumPy
    arrays (`in_memory_examples`) and its pipeline is `batching`, else as that dataset."""
    examples = in_memory_examples(self.train_data, client_id)
    if examples is None or not isinstance(self.preprocess_train, Batching):
      return self.client_dataset(client_id, corrupted)
    return InMemoryClient(examples, self.preprocess_train, self.corrupt_train if corrupted else None)


def client_data_from_arrays(clients: dict) -> tff.simulation.datasets.ClientData:
  """In-memory client data from {client_id: (x, y)} NumPy arrays, elements {'x': x_j, 'y': y_j}."""
  return tff.simulation.datasets.TestClientData(
      {cid: collections.OrderedDict(x=x, y=y) for cid, (x, y) in clients.items()}
  )


def test_dataset_from_arrays(x, y, batch_size: int = 256) -> tf.data.Dataset:
  """A batched held-out dataset with elements {'x', 'y'}, as the tasks' models take them."""
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(batch_size)


@dataclasses.dataclass(frozen=True)
class Batching:
  """Local-training pipeline: shuffle (seeded, reshuffled each epoch), repeat `epochs` times, batch by `batch_size`.

  The shuffle's buffer holds max(`SHUFFLE_BUFFER`, n) examples, n the client's number where the dataset knows it
  (its cardinality): every epoch is then a uniform permutation of the client's examples, as the papers' minibatch
  SGD draws them, however many it has (a 1,024-example buffer over a Shakespeare role's windows, which come in
  text order, swept the role from start to end). Where n is unknown the buffer is `SHUFFLE_BUFFER`.

  The order is TensorFlow's function of `seed` and TF's global seed at the time the client's dataset is made
  (`tf.data.Dataset.shuffle`): the same task seed gives another order after another `tf.random.set_seed`. The
  runner sets the global seed to `--seed` (`tf.keras.utils.set_random_seed`) before making any dataset, so a
  run is reproducible from its flags; code that compares runs made in two Python processes sets it in both."""

  SHUFFLE_BUFFER = 1024
  epochs: int
  batch_size: int
  seed: int

  def __post_init__(self):
    type_checks.check_integer('epochs', self.epochs, minimum=1)
    type_checks.check_integer('batch_size', self.batch_size, minimum=1)

  @classmethod
  def buffer_size(cls, num_examples: int) -> int:
    """The shuffle buffer of a client of `num_examples` (< 0: unknown, as tf.data's cardinality) examples."""
    return max(cls.SHUFFLE_BUFFER, num_examples)

  def __call__(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
    buffer = tf.maximum(tf.constant(self.SHUFFLE_BUFFER, tf.int64), dataset.cardinality())
    return dataset.shuffle(buffer, seed=self.seed, reshuffle_each_iteration=True).repeat(
        self.epochs).batch(self.batch_size)


def batching(*, epochs: int, batch_size: int, seed: int) -> Batching:
  """Local-training pipeline: reshuffle each epoch, repeat `epochs` (>= 1) times, batch by `batch_size` (>= 1)
  (`Batching`)."""
  return Batching(epochs, batch_size, seed)


@dataclasses.dataclass(frozen=True)
class InMemoryClient:
  """A client's training data given by its raw examples in memory: `dataset()` is `batching` of its
  `examples` (NumPy arrays, one row per example, in order), poisoned by `corrupt` first if given: the dataset
  `Task.client_dataset` builds. `client_pipelines.max_examples` builds a capped sample of it from the arrays."""

  examples: Mapping[str, np.ndarray]
  batching: Batching
  corrupt: Optional[Transform] = None

  @property
  def num_examples(self) -> int:
    return len(next(iter(self.examples.values())))

  def raw_dataset(self, indices: Optional[np.ndarray] = None) -> tf.data.Dataset:
    """The examples (those at `indices`, in that order, if given) as a dataset, poisoned if `corrupt`."""
    rows = self.examples if indices is None else {key: value[indices] for key, value in self.examples.items()}
    dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(rows))
    return dataset if self.corrupt is None else self.corrupt(dataset)

  def dataset(self) -> tf.data.Dataset:
    """The batched training dataset of this client: its raw examples through the task's batching."""
    return self.batching(self.raw_dataset())


def in_memory_examples(client_data: tff.simulation.datasets.ClientData, client_id: str) -> Optional[dict]:
  """A client's raw training examples as NumPy arrays, in dataset order, where the client data hold them so
  (the Shakespeare windows), else None."""
  if isinstance(client_data, shakespeare_windows.WindowsClientData):
    return shakespeare_windows.examples(client_data.windows(client_id))
  return None
