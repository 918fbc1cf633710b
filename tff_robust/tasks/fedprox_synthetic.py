"""FedProx's synthetic(alpha, beta) classification data, as Fed+ uses it in Sec. 5.2 (fedplus notes Sec. 4.3).

Device k = 1..N holds n_k examples (x, y) with x in R^60 and y in {0..9}:
  * n_k = floor(LogNormal(4, 2)) + 50 (a power law; FedProx's generator, where 4 and 2 are the mean and
    standard deviation of the underlying normal);
  * u_k ~ N(0, alpha^2) and B_k ~ N(0, beta^2): FedProx's generator passes alpha and beta to NumPy as
    standard deviations (the papers write N(0, alpha), N(0, beta));
  * the device's own model: every entry of W_k in R^{10 x 60} and of b_k in R^10 is N(u_k, 1);
  * the device's input mean: every entry of v_k is N(B_k, 1);
  * x ~ N(v_k, Sigma) with Sigma diagonal, Sigma_jj = j^(-1.2) for 1-based j;
  * y = argmax softmax(W_k x + b_k), computed as the argmax of the logits (softmax is monotone).
Fed+ takes alpha (its zeta) = 1000, beta = 10, N = 30; FedProx's own grid is (0, 0), (0.5, 0.5), (1, 1).
Each device's examples are split at random, floor(0.8 n_k) for training and the rest for its own test set
(Fed+'s 80% / 20%). The model is multinomial logistic regression 60 -> 10 (610 parameters).

Note: u_k adds the same amount u_k (1 + sum_j x_j) to all ten logits of device k, so alpha changes the
devices' parameters but never a label; only the N(0, 1) parts of W_k, b_k and the inputs (beta) make the
devices' labelling functions and data differ.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

NUM_DEVICES = 30
DIMENSION = 60
NUM_CLASSES = 10
COVARIANCE_EXPONENT = 1.2
SIZE_LOG_MEAN = 4.0
SIZE_LOG_STD = 2.0
MIN_SAMPLES = 50
TRAIN_FRACTION = 0.8

# Task name -> (alpha, beta): Fed+ Sec. 5.2 (zeta = 1000, beta = 10) and FedProx's heterogeneity grid.
TASK_PARAMETERS = {
    'fedprox_synthetic': (1000.0, 10.0),
    'fedprox_synthetic_0_0': (0.0, 0.0),
    'fedprox_synthetic_0.5_0.5': (0.5, 0.5),
    'fedprox_synthetic_1_1': (1.0, 1.0),
}


@dataclasses.dataclass(frozen=True)
class DeviceModels:
  """The generator's draws: `weights` (N, 10, 60), `biases` (N, 10), `input_means` v_k (N, 60),
  `model_means` u_k (N,), `data_means` B_k (N,), `sample_sizes` n_k (N,)."""

  weights: np.ndarray
  biases: np.ndarray
  input_means: np.ndarray
  model_means: np.ndarray
  data_means: np.ndarray
  sample_sizes: np.ndarray


def covariance_diagonal(dimension: int = DIMENSION) -> np.ndarray:
  """Sigma_jj = j^(-1.2) for j = 1..dimension (float64)."""
  return np.arange(1, dimension + 1, dtype=np.float64) ** -COVARIANCE_EXPONENT


def sample_sizes(rng: np.random.Generator, num_devices: int) -> np.ndarray:
  """n_k = floor(LogNormal(4, 2)) + 50 per device (int64)."""
  return rng.lognormal(SIZE_LOG_MEAN, SIZE_LOG_STD, num_devices).astype(np.int64) + MIN_SAMPLES


def _check_heterogeneity(name: str, value):
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < np.inf:
    raise ValueError(f'{name} must be a finite number >= 0, got {value!r}')


def make_device_arrays(
    *, alpha: float, beta: float, num_devices: int = NUM_DEVICES, dimension: int = DIMENSION,
    num_classes: int = NUM_CLASSES, split_seed: int = 0
):
  """Draws synthetic(alpha, beta) from `np.random.default_rng(split_seed)`.

  alpha and beta scale standard-normal draws, so with one seed every other draw is the same for any
  (alpha, beta).

  Args:
    alpha: standard deviation of u_k (model heterogeneity), >= 0.
    beta: standard deviation of B_k (input heterogeneity), >= 0.
    num_devices: N >= 1.
    dimension: input dimension >= 1.
    num_classes: number of classes >= 2.
    split_seed: seed of every draw, the train/test split included.

  Returns:
    ({client_id: (x_train, y_train)}, {client_id: (x_test, y_test)}, DeviceModels), with float32 x of
    shape (n, dimension) and int32 y of shape (n,); client ids 'client_000', ... in device order. Labels
    are the argmax of the device's float64 logits at the float32 inputs it holds.

  Raises:
    ValueError: if an argument is out of range.
  """
  _check_heterogeneity('alpha', alpha)
  _check_heterogeneity('beta', beta)
  type_checks.check_integer('num_devices', num_devices, minimum=1)
  type_checks.check_integer('dimension', dimension, minimum=1)
  type_checks.check_integer('num_classes', num_classes, minimum=2)
  rng = np.random.default_rng(split_seed)
  sizes = sample_sizes(rng, num_devices)
  model_means = alpha * rng.standard_normal(num_devices)
  data_means = beta * rng.standard_normal(num_devices)
  input_means = data_means[:, None] + rng.standard_normal((num_devices, dimension))
  weights = model_means[:, None, None] + rng.standard_normal((num_devices, num_classes, dimension))
  biases = model_means[:, None] + rng.standard_normal((num_devices, num_classes))
  std = np.sqrt(covariance_diagonal(dimension))
  train, test = {}, {}
  for k in range(num_devices):
    x = (input_means[k] + std * rng.standard_normal((sizes[k], dimension))).astype(np.float32)
    y = np.argmax(x.astype(np.float64) @ weights[k].T + biases[k], axis=1).astype(np.int32)
    order = rng.permutation(sizes[k])
    num_train = int(TRAIN_FRACTION * sizes[k])
    client_id = f'client_{k:03d}'
    train[client_id] = (x[order[:num_train]], y[order[:num_train]])
    test[client_id] = (x[order[num_train:]], y[order[num_train:]])
  return train, test, DeviceModels(weights, biases, input_means, model_means, data_means, sizes)


def model_fn() -> tff.learning.models.VariableModel:
  """Multinomial logistic regression: one zero-initialised Dense layer 60 -> 10 logits (610 parameters)."""
  inputs = tf.keras.Input(shape=(DIMENSION,))
  logits = tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer='zeros')(inputs)
  return tff.learning.models.from_keras_model(
      tf.keras.Model(inputs, logits),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, DIMENSION], tf.float32), y=tf.TensorSpec([None], tf.int32)
      ),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
  )


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, num_devices: int = NUM_DEVICES,
    split_seed: int = 0
) -> base.Task:
  """The task `name` of TASK_PARAMETERS: `evaluate` on the pooled test parts, `personal_test_data` each
  device's own test part; a corrupted device's labels are flipped y -> 9 - y."""
  if name not in TASK_PARAMETERS:
    raise ValueError(f'name must be one of {tuple(TASK_PARAMETERS)}, got {name!r}')
  alpha, beta = TASK_PARAMETERS[name]
  train, test, _ = make_device_arrays(alpha=alpha, beta=beta, num_devices=num_devices, split_seed=split_seed)
  x_test = np.concatenate([x for x, _ in test.values()])
  y_test = np.concatenate([y for _, y in test.values()])
  return base.Task(
      name, model_fn, base.client_data_from_arrays(train),
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.flip_labels('y', NUM_CLASSES),
      evaluate=evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x_test, y_test), {}),
      personal_test_data=base.client_data_from_arrays(test),
      flip_labels=data_corruption.flip_labels('y', NUM_CLASSES),
  )
