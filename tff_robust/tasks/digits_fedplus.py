"""The Fed+ paper's MNIST-robust and MNIST-personal (Kundu et al., Sec. 5.1) built on scikit-learn's digits.

All 1797 8x8 digits (pixels / 16, in [0, 1]) are shuffled and partitioned equally (sizes differ by at most
one) into N parties; each party's examples are split at random, half for training and half for its own
test set (the paper's 50% / 50%). Two independent transforms give the two datasets (notes Sec. 6 item 7):
  * robust (`negate_parties`): the images of 10% of the parties become their negative x -> 1 - x, in both
    halves, so those parties have their own input distribution (the paper uses 20% for N = 50);
  * personal (`add_class_noise`): every party chooses 2 different class labels and Laplace noise (scale
    0.5 by default; the paper gives none) is added to the images of those classes, then clipped to
    [0, 1], in both halves.
The model is multinomial logistic regression 64 -> 10 (the paper's 784 -> 10 on MNIST).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from sklearn import datasets as sklearn_datasets

from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import digits
from tff_robust.tasks import evaluation

NUM_PARTIES = 10
NEGATED_FRACTION = 0.1
NOISY_CLASSES_PER_PARTY = 2
LAPLACE_SCALE = 0.5
_MIN_EXAMPLES_PER_PARTY = 10
_NEGATION_STREAM = 1
_NOISE_STREAM = 2


def load_party_arrays(*, num_parties: int = NUM_PARTIES, split_seed: int = 0):
  """Clean per-party halves: ({client_id: (x_train, y_train)}, {client_id: (x_test, y_test)}).

  Args:
    num_parties: N, an integer in [1, 179] (every party gets at least 10 examples).
    split_seed: seed of the shuffle (`np.random.default_rng(split_seed)`); the first floor(n / 2) of a
      party's shuffled examples train, the rest test, so the split within a party is uniformly random.

  Returns:
    float32 x of shape (n, 64) in [0, 1] and int32 labels y of shape (n,); ids 'client_000', ...

  Raises:
    ValueError: if `num_parties` is out of range.
  """
  data = sklearn_datasets.load_digits()
  x = (data.data / 16.0).astype(np.float32)
  y = data.target.astype(np.int32)
  max_parties = len(y) // _MIN_EXAMPLES_PER_PARTY
  if isinstance(num_parties, bool) or not isinstance(num_parties, (int, np.integer)) or not (
      1 <= num_parties <= max_parties):
    raise ValueError(f'num_parties must be an integer in [1, {max_parties}], got {num_parties!r}')
  order = np.random.default_rng(split_seed).permutation(len(y))
  train, test = {}, {}
  for k, indices in enumerate(np.array_split(order, num_parties)):
    num_train = len(indices) // 2
    client_id = f'client_{k:03d}'
    train[client_id] = (x[indices[:num_train]], y[indices[:num_train]])
    test[client_id] = (x[indices[num_train:]], y[indices[num_train:]])
  return train, test


def negate_parties(train: dict, test: dict, *, fraction: float = NEGATED_FRACTION, seed: int = 0):
  """MNIST-robust: negates x -> 1 - x in both halves of max(1, round(fraction * N)) parties.

  The parties are drawn without replacement from `np.random.default_rng([seed, 1])`. Labels are kept.

  Returns:
    (train, test, negated client ids sorted); the input dicts are not modified.

  Raises:
    ValueError: if `fraction` is not in (0, 1].
  """
  if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
    raise ValueError(f'fraction must be a number in (0, 1], got {fraction!r}')
  client_ids = sorted(train)
  count = max(1, round(fraction * len(client_ids)))
  rng = np.random.default_rng([seed, _NEGATION_STREAM])
  negated = sorted(rng.choice(client_ids, size=count, replace=False).tolist())
  negate = lambda arrays, cid: (1.0 - arrays[cid][0], arrays[cid][1]) if cid in negated else arrays[cid]
  return {c: negate(train, c) for c in train}, {c: negate(test, c) for c in test}, negated


def add_class_noise(
    train: dict, test: dict, *, laplace_scale: float = LAPLACE_SCALE,
    classes_per_party: int = NOISY_CLASSES_PER_PARTY, seed: int = 0
):
  """MNIST-personal: per party, Laplace(0, laplace_scale) pixel noise on the images of its own classes.

  Each party (in client-id order) draws `classes_per_party` different labels, then the noise of its train
  and test images of those labels, from `np.random.default_rng([seed, 2])`; noisy pixels are clipped to
  [0, 1]. Images of other labels, and all labels, are unchanged.

  Returns:
    (train, test, {client_id: sorted noisy labels}); the input dicts are not modified.

  Raises:
    ValueError: if `laplace_scale` is not a finite number >= 0 or `classes_per_party` not in [1, 10].
  """
  if isinstance(laplace_scale, bool) or not isinstance(laplace_scale, (int, float)) or not (
      0 <= laplace_scale < np.inf):
    raise ValueError(f'laplace_scale must be a finite number >= 0, got {laplace_scale!r}')
  if isinstance(classes_per_party, bool) or not isinstance(classes_per_party, (int, np.integer)) or not (
      1 <= classes_per_party <= digits.NUM_CLASSES):
    raise ValueError(
        f'classes_per_party must be an integer in [1, {digits.NUM_CLASSES}], got {classes_per_party!r}'
    )
  rng = np.random.default_rng([seed, _NOISE_STREAM])

  def noisy(arrays, classes):
    x, y = arrays
    rows = np.isin(y, classes)
    x = x.copy()
    x[rows] = np.clip(x[rows] + rng.laplace(0.0, laplace_scale, x[rows].shape), 0.0, 1.0)
    return x, y

  noisy_train, noisy_test, chosen = {}, {}, {}
  for client_id in sorted(train):
    classes = np.sort(rng.choice(digits.NUM_CLASSES, size=classes_per_party, replace=False))
    chosen[client_id] = classes.tolist()
    noisy_train[client_id] = noisy(train[client_id], classes)
    noisy_test[client_id] = noisy(test[client_id], classes)
  return noisy_train, noisy_test, chosen


def _input_spec():
  return collections.OrderedDict(
      x=tf.TensorSpec([None, digits.NUM_FEATURES], tf.float32), y=tf.TensorSpec([None], tf.int32)
  )


def model_fn() -> tff.learning.models.VariableModel:
  """Multinomial logistic regression: one zero-initialised Dense layer 64 -> 10 logits (650 parameters)."""
  inputs = tf.keras.Input(shape=(digits.NUM_FEATURES,))
  logits = tf.keras.layers.Dense(digits.NUM_CLASSES, kernel_initializer='zeros')(inputs)
  return tff.learning.models.from_keras_model(
      tf.keras.Model(inputs, logits),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=_input_spec(),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
  )


def create_personal_task_from_arrays(
    name, train, test, *, client_epochs, client_batch_size, seed, validation_fraction: Optional[float] = None
) -> base.Task:
  """A logistic-regression digits task from {client_id: (x, y)} training and per-client held-out arrays:
  `personal_test_data` is each client's own held-out data and `evaluate` runs on all of it concatenated.

  `validation_fraction` in (0, 1) holds that share of each client's training examples out of training
  (`digits.split_validation`); the validation parts then replace `test` everywhere, so a hyperparameter
  can be chosen without reading a test example.
  """
  if validation_fraction is not None:
    train, test = digits.split_validation(train, validation_fraction)
  x_test = np.concatenate([x for x, _ in test.values()])
  y_test = np.concatenate([y for _, y in test.values()])
  return base.Task(
      name, model_fn, base.client_data_from_arrays(train),
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.negate_images('x'),
      evaluate=evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x_test, y_test), {}),
      personal_test_data=base.client_data_from_arrays(test),
      flip_labels=data_corruption.flip_labels('y', digits.NUM_CLASSES),
  )


def create_robust_task(
    *, client_epochs: int, client_batch_size: int, seed: int, num_parties: int = NUM_PARTIES,
    negated_fraction: float = NEGATED_FRACTION, split_seed: int = 0, validation_fraction: Optional[float] = None
) -> base.Task:
  """'digits_robust': `evaluate` on the pooled test halves (negated parties' halves included, negated),
  `personal_test_data` each party's own test half (or, with `validation_fraction`, its validation part)."""
  train, test = load_party_arrays(num_parties=num_parties, split_seed=split_seed)
  train, test, _ = negate_parties(train, test, fraction=negated_fraction, seed=split_seed)
  return create_personal_task_from_arrays(
      'digits_robust', train, test, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed,
      validation_fraction=validation_fraction,
  )


def create_personal_task(
    *, client_epochs: int, client_batch_size: int, seed: int, num_parties: int = NUM_PARTIES,
    laplace_scale: float = LAPLACE_SCALE, split_seed: int = 0, validation_fraction: Optional[float] = None
) -> base.Task:
  """'digits_personal': `evaluate` on the pooled (noisy) test halves, `personal_test_data` each party's own
  test half (or, with `validation_fraction`, its validation part)."""
  train, test = load_party_arrays(num_parties=num_parties, split_seed=split_seed)
  train, test, _ = add_class_noise(train, test, laplace_scale=laplace_scale, seed=split_seed)
  return create_personal_task_from_arrays(
      'digits_personal', train, test, client_epochs=client_epochs, client_batch_size=client_batch_size,
      seed=seed, validation_fraction=validation_fraction,
  )
