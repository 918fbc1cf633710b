"""Personalized RFA (Algorithm 4) against a NumPy reference of its two local steps and RFA's aggregation."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.core import weiszfeld
from tff_robust.processes import personalized_rfa
from tff_robust.tasks import synthetic_regression

_BATCH = 8
_LEARNING_RATE = 0.05


def _arrays(num_clients=5):
  clients, _, _ = synthetic_regression.make_client_arrays(num_clients=num_clients, heterogeneity=2.0)
  arrays = list(clients.values())
  x, y = arrays[0]
  arrays[0] = (x, -20.0 * y)  # an outlying client, so the geometric median is not the mean
  return arrays


def _batches(x, y):
  for start in range(0, len(x), _BATCH):
    yield x[start:start + _BATCH].astype(np.float64), y[start:start + _BATCH].astype(np.float64)


def _gradient(w, xb, yb):
  return 2.0 / len(xb) * xb.T @ (xb @ w - yb)


def _numpy_round(global_model, offsets, arrays, personal_learning_rate, num_passes=3, smoothing=1e-6):
  """Algorithm 4: u-steps with w fixed, then w-steps with the new u fixed; GM of the shared models."""
  new_offsets, shared_models, counts = [], [], []
  for (x, y), u in zip(arrays, offsets):
    for xb, yb in _batches(x, y):
      u = u - personal_learning_rate * _gradient(global_model + u, xb, yb)
    w = global_model
    for xb, yb in _batches(x, y):
      w = w - _LEARNING_RATE * _gradient(w + u, xb, yb)
    new_offsets.append(u)
    shared_models.append(w.ravel())
    counts.append(len(x))
  median = weiszfeld.smoothed_weiszfeld(
      np.stack(shared_models), np.asarray(counts, np.float64), num_passes=num_passes, smoothing=smoothing,
      init='mean',
  ).iterates[-1]
  return median.reshape(global_model.shape), new_offsets


@pytest.mark.parametrize('personal_learning_rate', [None, 0.01])
def test_two_rounds_match_the_numpy_reference(personal_learning_rate):
  """None: the paper's single step size gamma; 0.01: a personal step of its own (`personal_optimizer_fn`)."""
  arrays = _arrays()
  datasets = [tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(_BATCH)
              for x, y in arrays]
  process = personalized_rfa.build_personalized_rfa_process(
      synthetic_regression.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=_LEARNING_RATE),
      personal_optimizer_fn=None if personal_learning_rate is None else tff.learning.optimizers.build_sgdm(
          learning_rate=personal_learning_rate
      ),
  )
  state = process.initialize()
  client_states = [process.initial_client_state(state)] * len(arrays)
  expected_global = np.zeros((synthetic_regression.DIMENSION, 1))
  expected_offsets = [np.zeros_like(expected_global) for _ in arrays]
  for _ in range(2):
    output = process.next(state, datasets, client_states)
    state, client_states = output.state, output.client_states
    expected_global, expected_offsets = _numpy_round(
        expected_global, expected_offsets, arrays, personal_learning_rate or _LEARNING_RATE
    )
  global_weights = process.get_model_weights(state)
  np.testing.assert_allclose(global_weights.trainable[0], expected_global, atol=1e-4)
  for actual, expected in zip(client_states, expected_offsets):
    np.testing.assert_allclose(actual[0], expected, atol=1e-4)
  personal = process.personal_model_weights(global_weights, client_states[1])
  np.testing.assert_allclose(personal.trainable[0], expected_global + expected_offsets[1], atol=1e-4)
  assert output.metrics['aggregator']['secure_average_calls'] == 3
