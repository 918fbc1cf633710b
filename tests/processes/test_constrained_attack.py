"""Constrain-and-scale's attackers (`processes.constrained_attack_client_work` through the update-corruption
process, with the boost) against NumPy: honest clients' local SGD, the attackers' SGD on alpha L_class + (1 - alpha)
||w - G||^2 (`core.attacks.constrain_and_scale`), the boost and FedAvg's step (`core.attacks.boost`)."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.core.attacks import boost
from tff_robust.core.attacks import constrain_and_scale
from tff_robust.processes import constrained_attack_client_work
from tff_robust.simulation import update_corruption_process
from tff_robust.tasks import synthetic_regression
from tests.processes.regression_clients import BATCH, EPOCHS, LEARNING_RATE, client_arrays, datasets, numpy_sgd, sgd

_ALPHA = 0.6


def _numpy_attacker_sgd(w, x, y, global_model, alpha):
  """`numpy_sgd`'s batches, each step on constrain-and-scale's gradient."""
  x, y = np.tile(x, (EPOCHS, 1)).astype(np.float64), np.tile(y, (EPOCHS, 1)).astype(np.float64)
  for start in range(0, len(x), BATCH):
    xb, yb = x[start:start + BATCH], y[start:start + BATCH]
    class_gradient = 2.0 / len(xb) * xb.T @ (xb @ w - yb)
    w = w - LEARNING_RATE * constrain_and_scale.attacker_gradient(class_gradient, w, global_model, alpha)
  return w


@pytest.fixture(scope='module')
def process():
  return update_corruption_process.build_update_corruption_process(
      synthetic_regression.model_fn, sgd(), sgd(1.0), model_aggregator=tff.aggregators.MeanFactory(),
      attack='boost', attacker_alpha=_ALPHA)


def test_two_rounds_are_numpy_constrain_and_scale(process):
  arrays = client_arrays(5)
  corrupted = np.array([False, True, False, False, True])
  flagged = [(d, update_corruption_process.corruption_flag_dataset(bool(c)))
             for d, c in zip(datasets(arrays), corrupted)]
  state, global_model = process.initialize(), np.zeros((synthetic_regression.DIMENSION, 1))
  weights = np.array([EPOCHS * len(x) for x, _ in arrays], np.float64)
  for _ in range(2):
    output = process.next(state, flagged)
    state = output.state
    local = [_numpy_attacker_sgd(global_model, x, y, global_model, _ALPHA) if c else numpy_sgd(global_model, x, y,
                                                                                             LEARNING_RATE)
             for (x, y), c in zip(arrays, corrupted)]
    updates = np.stack([(global_model - w).ravel() for w in local])
    global_model = boost.fedavg_step(global_model.ravel(), boost.boosted_updates(updates, weights, corrupted),
                                     weights).reshape(global_model.shape)
    np.testing.assert_allclose(process.get_model_weights(state).trainable[0], global_model, rtol=1e-4, atol=1e-5)
    assert output.metrics['aggregator']['num_corrupted_clients'] == 2
  # the penalty keeps the attackers' models nearer the global model than plain training does
  x, y = arrays[1]
  start = np.zeros((synthetic_regression.DIMENSION, 1))
  constrained = constrain_and_scale.anomaly_loss(_numpy_attacker_sgd(start, x, y, start, _ALPHA), start)
  assert constrained < constrain_and_scale.anomaly_loss(numpy_sgd(start, x, y, LEARNING_RATE), start)


@pytest.mark.parametrize('alpha', [0.0, -0.5, 1.5, float('nan')])
def test_an_alpha_outside_0_1_is_refused_by_name(alpha):
  with pytest.raises(ValueError, match='alpha must be a finite number in'):
    constrained_attack_client_work.build_constrained_attack_client_work(
        synthetic_regression.model_fn, sgd(), alpha, tff.learning.ClientWeighting.NUM_EXAMPLES,
        tff.learning.metrics.sum_then_finalize)
