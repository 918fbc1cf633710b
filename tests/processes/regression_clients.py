"""Synthetic-regression clients and NumPy references of their local training, for the Fed+ and FedProx tests."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import synthetic_regression

BATCH = 8
EPOCHS = 2
ROUNDS = 3
LEARNING_RATE = 0.05


def client_arrays(num_clients=4):
  clients, _, _ = synthetic_regression.make_client_arrays(num_clients=num_clients, heterogeneity=2.0)
  return list(clients.values())


def datasets(arrays):
  """Each client's examples repeated EPOCHS times, then batched (batches may span two epochs)."""
  return [
      tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).repeat(EPOCHS).batch(BATCH)
      for x, y in arrays
  ]


def sgd(learning_rate=LEARNING_RATE):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


def run_learning_process(process, client_datasets, rounds=ROUNDS):
  """The global `ModelWeights` after `rounds` rounds of a `LearningProcess` on the same cohort."""
  state = process.initialize()
  for _ in range(rounds):
    state = process.next(state, client_datasets).state
  return process.get_model_weights(state)


def numpy_sgd(w, x, y, learning_rate, *, anchor=None, kappa=1.0, proximal_strength=0.0):
  """Minibatch SGD on the mean squared error over `datasets`' batches, from w.

  Each step descends grad f(w) + proximal_strength (w - anchor) (FedProx's h_k), then mixes
  w <- kappa w + (1 - kappa) anchor (Fed+'s eq. (14)).
  """
  x, y = np.tile(x, (EPOCHS, 1)).astype(np.float64), np.tile(y, (EPOCHS, 1)).astype(np.float64)
  for start in range(0, len(x), BATCH):
    xb, yb = x[start:start + BATCH], y[start:start + BATCH]
    gradient = 2.0 / len(xb) * xb.T @ (xb @ w - yb)
    if proximal_strength:
      gradient = gradient + proximal_strength * (w - anchor)
    w = w - learning_rate * gradient
    if anchor is not None:
      w = kappa * w + (1.0 - kappa) * anchor
  return w


def numpy_fedprox(arrays, proximal_strength, learning_rate, rounds=ROUNDS, example_weighted=True):
  """FedProx (Li et al.) in NumPy: SGD on f_k(w) + (mu / 2)||w - w_t||^2 from w_t, then the mean of the local
  models weighted by their examples (or unweighted)."""
  global_model = np.zeros((synthetic_regression.DIMENSION, 1))
  for _ in range(rounds):
    local_models = [
        numpy_sgd(global_model, x, y, learning_rate, anchor=global_model, proximal_strength=proximal_strength)
        for x, y in arrays
    ]
    weights = [len(x) for x, _ in arrays] if example_weighted else None
    global_model = np.average(np.stack(local_models), axis=0, weights=weights)
  return global_model
