"""Heterogeneous federated least squares with a known optimum.

Client i holds N_i examples x ~ N(0, I_d), y = x^T w*_i + noise, with its own optimum
w*_i = w* + heterogeneity * N(0, I_d). The federated objective sum_i N_i F_i(w) (FedAvg's sample weighting,
RFA eq. (1) with alpha_i = N_i / N) is minimised by the least-squares solution over all training examples,
`optimum`, so `evaluate` reports the distance of the model to it.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

DIMENSION = 10


def make_client_arrays(
    *, num_clients: int = 20, heterogeneity: float = 0.5, noise: float = 0.1, split_seed: int = 0
):
  """Returns ({client_id: (x, y)}, (x_test, y_test), optimum) for the federated least-squares problem."""
  rng = np.random.default_rng(split_seed)
  shared_optimum = rng.normal(size=DIMENSION)
  clients, x_test, y_test = {}, [], []
  for c in range(num_clients):
    client_optimum = shared_optimum + heterogeneity * rng.normal(size=DIMENSION)
    num_examples = int(rng.integers(20, 81))
    x = rng.normal(size=(num_examples + 10, DIMENSION))
    y = x @ client_optimum + noise * rng.normal(size=num_examples + 10)
    clients[f'client_{c:03d}'] = (x[:num_examples].astype(np.float32), y[:num_examples, None].astype(np.float32))
    x_test.append(x[num_examples:])
    y_test.append(y[num_examples:, None])
  x_all = np.concatenate([x for x, _ in clients.values()]).astype(np.float64)
  y_all = np.concatenate([y for _, y in clients.values()]).astype(np.float64)
  optimum = np.linalg.lstsq(x_all, y_all[:, 0], rcond=None)[0]
  return clients, (np.concatenate(x_test).astype(np.float32), np.concatenate(y_test).astype(np.float32)), optimum


def model_fn() -> tff.learning.models.VariableModel:
  """A linear model without bias, initialised at zero, with mean squared error as loss and metric."""
  inputs = tf.keras.Input(shape=(DIMENSION,))
  keras_model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, use_bias=False, kernel_initializer='zeros')(inputs))
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.MeanSquaredError(),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, DIMENSION], tf.float32), y=tf.TensorSpec([None, 1], tf.float32)
      ),
      metrics=[tf.keras.metrics.MeanSquaredError(name='mse')],
  )


class _EvaluatorWithOptimum(evaluation.CentralizedEvaluator):

  def __init__(self, dataset, optimum):
    super().__init__(model_fn, dataset, {})
    self._optimum = optimum

  def __call__(self, model_weights):
    metrics = super().__call__(model_weights)
    weights = np.asarray(model_weights.trainable[0]).reshape(-1)
    metrics['distance_to_optimum'] = float(np.linalg.norm(weights - self._optimum))
    return metrics


def create_task(*, client_epochs: int, client_batch_size: int, seed: int) -> base.Task:
  """The synthetic least-squares task: heterogeneous clients with a known optimum (`eval/distance_to_optimum`), targets
  negated for data corruption."""
  clients, (x_test, y_test), optimum = make_client_arrays()
  train_data = base.client_data_from_arrays(clients)
  test_dataset = base.test_dataset_from_arrays(x_test, y_test)
  return base.Task(
      'synthetic_regression', model_fn, train_data,
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.negate_targets('y'),
      evaluate=_EvaluatorWithOptimum(test_dataset, optimum),
  )
