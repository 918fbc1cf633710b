"""scikit-learn's handwritten digits (UCI optdigits, 1797 8x8 images) split non-IID over clients.

Works offline: the data ships inside scikit-learn. A fixed `split_seed` holds out a stratified test set and
gives each client a Dirichlet(`label_concentration`) mixture of the labels, so clients are heterogeneous;
the held-out set is also split the same way into unseen test devices for per-device evaluation. With a
`validation_fraction`, a share of each client's training examples replaces the held-out set in every
evaluation, so that hyperparameters can be chosen without touching the test data.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from sklearn import datasets as sklearn_datasets
from sklearn import model_selection

from tff_robust.tasks import backdoor
from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

NUM_CLASSES = 10
NUM_FEATURES = 64
IMAGE_SHAPE = (8, 8)
_MIN_EXAMPLES_PER_CLIENT = 10
_MAX_OWNER_DRAWS = 1000  # then refused: a concentration that small gives each label to one device


def load_arrays():
  """All 1797 digits: float32 pixels / 16 in [0, 1] of shape (1797, 64), and int32 labels of shape (1797,)."""
  data = sklearn_datasets.load_digits()
  return (data.data / 16.0).astype(np.float32), data.target.astype(np.int32)


def load_client_arrays(
    *, num_clients: int = 30, label_concentration: float = 0.5, test_fraction: float = 0.2, split_seed: int = 0
):
  """Returns ({client_id: (x, y)}, (x_test, y_test)) with pixels scaled to [0, 1]."""
  if num_clients < 1:
    raise ValueError(f'num_clients must be >= 1, got {num_clients}')
  x, y = load_arrays()
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      x, y, test_size=test_fraction, stratify=y, random_state=split_seed
  )
  if len(y_train) < num_clients * _MIN_EXAMPLES_PER_CLIENT:
    raise ValueError(
        f'num_clients must be at most {len(y_train) // _MIN_EXAMPLES_PER_CLIENT} for the digits task '
        f'({len(y_train)} training examples, >= {_MIN_EXAMPLES_PER_CLIENT} each), got {num_clients}'
    )
  owner = _dirichlet_owners(y_train, num_clients, label_concentration, np.random.default_rng(split_seed))
  clients = {
      f'client_{c:03d}': (x_train[owner == c], y_train[owner == c]) for c in range(num_clients)
  }
  return clients, (x_test, y_test)


def split_test_devices(x_test, y_test, *, num_devices: int = 12, label_concentration: float = 0.5,
                       split_seed: int = 0) -> dict:
  """Unseen test devices for per-device evaluation: the held-out examples split over `num_devices` devices
  with Dirichlet(`label_concentration`) label mixtures, like the training clients (Superquantile FL's
  split by device: no test device is ever trained on)."""
  if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
    raise ValueError(f'num_devices must be an integer >= 1, got {num_devices!r}')
  owner = _dirichlet_owners(y_test, num_devices, label_concentration, np.random.default_rng(split_seed + 1))
  return {f'test_device_{c:03d}': (x_test[owner == c], y_test[owner == c]) for c in range(num_devices)}


def split_personal_test_data(clients: dict, x_test, y_test, *, split_seed: int = 0) -> dict:
  """Each training client's own held-out data, for personal models (personalized RFA, Fed+): every held-out
  example of label c goes to client k with probability n_kc / n_c, its share of label c in training, so a
  client's held-out data follows its own label mixture (about 12 examples each for 30 clients). The
  training clients are unchanged."""
  client_ids = sorted(clients)
  counts = np.array([np.bincount(clients[cid][1], minlength=NUM_CLASSES) for cid in client_ids], np.float64)
  rng = np.random.default_rng(split_seed + 2)
  owner = np.array([rng.choice(len(client_ids), p=counts[:, label] / counts[:, label].sum()) for label in y_test])
  return {cid: (x_test[owner == k], y_test[owner == k]) for k, cid in enumerate(client_ids)}


def split_validation(clients: dict, fraction: float, *, split_seed: int = 0) -> tuple[dict, dict]:
  """({client: training part}, {client: validation part}): round(`fraction` n_k) of client k's n_k examples,
  at least one and at most n_k - 1, drawn without replacement as its validation data.

  Raises:
    ValueError: if `fraction` is not a number in (0, 1).
  """
  base.check_validation_fraction(fraction)
  rng = np.random.default_rng(split_seed + 3)
  training, validation = {}, {}
  for client_id in sorted(clients):
    x, y = clients[client_id]
    held = np.zeros(len(y), bool)
    held[rng.choice(len(y), size=base.num_held_out(len(y), fraction), replace=False)] = True
    training[client_id], validation[client_id] = (x[~held], y[~held]), (x[held], y[held])
  return training, validation


def _dirichlet_owners(labels, num_owners, concentration, rng):
  """Owner of each example: each label's examples are cut by Dirichlet shares; redrawn until every owner
  holds at least _MIN_EXAMPLES_PER_CLIENT examples (a few draws at concentrations >= 0.1 and 30 devices; 9,000 at
  0.05), at most _MAX_OWNER_DRAWS times."""
  if len(labels) < num_owners * _MIN_EXAMPLES_PER_CLIENT:
    raise ValueError(
        f'cannot give {num_owners} devices >= {_MIN_EXAMPLES_PER_CLIENT} examples each from {len(labels)}'
    )
  for _ in range(_MAX_OWNER_DRAWS):
    owner = np.empty(len(labels), np.int64)
    for label in range(NUM_CLASSES):
      indices = rng.permutation(np.flatnonzero(labels == label))
      shares = rng.dirichlet(np.full(num_owners, concentration))
      cuts = (np.cumsum(shares)[:-1] * len(indices)).astype(int)
      for client, part in enumerate(np.split(indices, cuts)):
        owner[part] = client
    if np.bincount(owner, minlength=num_owners).min() >= _MIN_EXAMPLES_PER_CLIENT:
      return owner
  raise ValueError(
      f'label_concentration {concentration} is too small for {num_owners} devices: no draw of {_MAX_OWNER_DRAWS} '
      f'gave every device >= {_MIN_EXAMPLES_PER_CLIENT} examples (each label goes almost whole to one device); '
      'use >= 0.1')


def create_keras_model() -> tf.keras.Model:
  """A small MLP: 64 -> 32 (ReLU) -> 10 logits (2,410 parameters)."""
  inputs = tf.keras.Input(shape=(NUM_FEATURES,))
  hidden = tf.keras.layers.Dense(32, activation='relu')(inputs)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(NUM_CLASSES)(hidden))


def _input_spec():
  return collections.OrderedDict(
      x=tf.TensorSpec([None, NUM_FEATURES], tf.float32), y=tf.TensorSpec([None], tf.int32)
  )


def model_fn() -> tff.learning.models.VariableModel:
  """A fresh `tff.learning` model of `create_keras_model` with sparse softmax cross-entropy and accuracy."""
  return tff.learning.models.from_keras_model(
      create_keras_model(),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=_input_spec(),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
  )


def create_task(*, client_epochs: int, client_batch_size: int, seed: int, num_clients: int = 30,
                label_concentration: float = 0.5, validation_fraction: Optional[float] = None) -> base.Task:
  """30 training clients; held-out data pooled (`evaluate`), split into 12 unseen test devices
  (`device_evaluator`) and, separately, over the training clients by their label mixtures
  (`personal_test_data`).

  `label_concentration` is the Dirichlet concentration of every client's and test device's label mixture: 0.5
  (the default) gives clients dominated by two or three digits; large values give every client nearly the
  population's label mixture, like the RFA paper's EMNIST writers, who each write every character.

  `validation_fraction` in (0, 1) holds that share of each client's examples out of its training data
  (`split_validation`); its validation parts then stand in for the held-out set everywhere: pooled
  (`evaluate`), as the `eval` devices (one per client) and as each client's personal test data. No held-out
  example is then read.

  `backdoor` (`tasks.backdoor.PixelBackdoor`) poisons with pixel triggers on the 8 x 8 images and measures the
  attack success rate on the same examples as `evaluate` (held-out or validation); for the edge-case backdoor it
  holds the clients' training examples (their training parts with a validation share), where the tail is fixed.
  """
  if not label_concentration > 0 or not np.isfinite(label_concentration):
    raise ValueError(f'label_concentration must be a finite number > 0, got {label_concentration!r}')
  clients, (x_test, y_test) = load_client_arrays(num_clients=num_clients, label_concentration=label_concentration)
  if validation_fraction is None:
    test_devices = split_test_devices(x_test, y_test, label_concentration=label_concentration)
    personal_test_data = split_personal_test_data(clients, x_test, y_test)
  else:
    clients, personal_test_data = split_validation(clients, validation_fraction)
    test_devices = personal_test_data
    x_test = np.concatenate([x for x, _ in personal_test_data.values()])
    y_test = np.concatenate([y for _, y in personal_test_data.values()])
  train_data = base.client_data_from_arrays(clients)
  batch = lambda dataset: dataset.batch(256)
  return base.Task(
      'digits', model_fn, train_data,
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.negate_images('x'),
      flip_labels=data_corruption.flip_labels('y', NUM_CLASSES),
      evaluate=evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x_test, y_test), {}),
      device_evaluator=evaluation.DeviceEvaluator(model_fn, {
          'train': evaluation.DeviceGroup(train_data, batch, weighted=True),
          'eval': evaluation.DeviceGroup(base.client_data_from_arrays(test_devices), batch, weighted=False),
      }, {}),
      personal_test_data=base.client_data_from_arrays(personal_test_data),
      backdoor=backdoor.PixelBackdoor(IMAGE_SHAPE, NUM_CLASSES, model_fn, x_test, y_test,
                                      train_x=np.concatenate([clients[cid][0] for cid in sorted(clients)]),
                                      train_y=np.concatenate([clients[cid][1] for cid in sorted(clients)])),
  )
