"""Fed+ (Algorithm 1) against NumPy, and the reductions of the paper's Table 1 to TFF's own algorithms."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.core import fedplus as fedplus_reference
from tff_robust.processes import fedplus
from tff_robust.processes import fedprox
from tff_robust.processes import rfa
from tff_robust.tasks import synthetic_regression
from tests.processes.regression_clients import (
    LEARNING_RATE, ROUNDS, client_arrays, datasets, numpy_fedprox, numpy_sgd, run_learning_process, sgd,
)


def _run_fedplus(process, client_datasets, rounds=ROUNDS, client_states=None):
  state = process.initialize()
  if client_states is None:
    client_states = [process.initial_client_state(state)] * len(client_datasets)
  for _ in range(rounds):
    output = process.next(state, client_datasets, client_states)
    state, client_states = output.state, output.client_states
  return state, client_states, output.metrics


def _global_kernel(process, state):
  return np.asarray(process.get_model_weights(state).trainable[0])


def test_mean_lambda_1_sigma_0_is_fedavg():
  client_datasets = datasets(client_arrays())
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant='avg', sigma=0.0, local_init_mixing=1.0, weighted=True
  )
  state, _, _ = _run_fedplus(process, client_datasets)
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(synthetic_regression.model_fn, sgd(), sgd(1.0))
  expected = run_learning_process(fedavg, client_datasets)
  np.testing.assert_allclose(_global_kernel(process, state), expected.trainable[0], atol=1e-6)


def test_mean_lambda_1_theta_0_is_fedprox_with_learning_rate_eta_kappa():
  """Table 1: Fed+ (mean, lambda = 1, sigma, theta = 0) at learning rate eta is FedProx with mu = sigma at
  eta kappa, both as NumPy FedProx and as our `build_fedprox_process` (TFF's own: see test_fedprox.py)."""
  sigma = 2.0
  arrays = client_arrays()
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant='fedprox', sigma=sigma, local_init_mixing=1.0,
      weighted=True,
  )
  state, _, _ = _run_fedplus(process, datasets(arrays))
  kappa = 1.0 / (1.0 + LEARNING_RATE * sigma)
  expected = numpy_fedprox(arrays, sigma, LEARNING_RATE * kappa)
  np.testing.assert_allclose(_global_kernel(process, state), expected, atol=1e-5)
  fedprox_process = fedprox.build_fedprox_process(synthetic_regression.model_fn, sigma, sgd(LEARNING_RATE * kappa))
  fedprox_kernel = run_learning_process(fedprox_process, datasets(arrays)).trainable[0]
  np.testing.assert_allclose(_global_kernel(process, state), fedprox_kernel, atol=1e-6)


def test_geometric_median_lambda_1_sigma_0_is_rfa():
  arrays = client_arrays(5)
  x, y = arrays[0]
  arrays[0] = (x, -30.0 * y)  # one outlying client, so the geometric median differs from the mean
  client_datasets = datasets(arrays)
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), sigma=0.0, local_init_mixing=1.0, weighted=True,
      model_aggregator=rfa.rfa_aggregator(num_passes=3, smoothing=1e-6),
  )
  state, _, _ = _run_fedplus(process, client_datasets)
  rfa_process = rfa.build_rfa_process(synthetic_regression.model_fn, sgd(), sgd(1.0), num_passes=3)
  expected = run_learning_process(rfa_process, client_datasets)
  fedavg = run_learning_process(
      tff.learning.algorithms.build_weighted_fed_avg(synthetic_regression.model_fn, sgd(), sgd(1.0)),
      client_datasets,
  )
  np.testing.assert_allclose(_global_kernel(process, state), expected.trainable[0], atol=1e-6)
  assert np.linalg.norm(expected.trainable[0] - fedavg.trainable[0]) > 1e-2


def test_sigma_0_lambda_0_is_local_training_whatever_the_aggregation():
  arrays = client_arrays()
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant='geomed', sigma=0.0, local_init_mixing=0.0
  )
  _, client_states, _ = _run_fedplus(process, datasets(arrays))
  for (x, y), local_state in zip(arrays, client_states):
    expected = np.zeros((synthetic_regression.DIMENSION, 1))
    for _ in range(ROUNDS):
      expected = numpy_sgd(expected, x, y, LEARNING_RATE)
    np.testing.assert_allclose(local_state[0], expected, atol=1e-5)


@pytest.mark.parametrize('variant, kind', [('geomed', 'l2'), ('comed', 'l1'), ('avg', 'squared_l2')])
def test_one_round_matches_numpy_algorithm_1(variant, kind):
  sigma, delta, mixing = 2.0, 0.3, 0.25
  arrays = client_arrays(5)
  rng = np.random.default_rng(7)
  local_models = [rng.normal(size=(synthetic_regression.DIMENSION, 1)).astype(np.float32) for _ in arrays]
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant=variant, sigma=sigma, delta=delta,
      local_init_mixing=mixing, max_iterations=40, tolerance=1e-7,
  )  # the solver converges in 26 (geomed) and 22 (comed) steps: `converged` is asserted below, so 40 is exact
  state, client_states, metrics = _run_fedplus(
      process, datasets(arrays), rounds=1, client_states=[(w,) for w in local_models]
  )
  kappa = 1.0 / (1.0 + LEARNING_RATE * sigma)
  global_model = np.zeros((synthetic_regression.DIMENSION, 1))  # the zero-initialised model
  expected_locals = []
  for (x, y), local in zip(arrays, local_models):
    theta = fedplus_reference.prox((local - global_model).ravel(), delta, kind).reshape(local.shape)
    start = (1 - mixing) * local + mixing * global_model
    expected_locals.append(numpy_sgd(start, x, y, LEARNING_RATE, anchor=global_model + theta, kappa=kappa))
  for actual, expected in zip(client_states, expected_locals):
    np.testing.assert_allclose(actual[0], expected, atol=1e-4)
  expected_global = fedplus_reference.aggregate(
      np.stack([w.ravel() for w in expected_locals]), delta, kind, solver='irls', max_iterations=1000,
      tolerance=1e-10,
  ).aggregate
  np.testing.assert_allclose(_global_kernel(process, state).ravel(), expected_global, atol=1e-4)
  if variant != 'avg':
    assert metrics['aggregator']['converged'] == 1


@pytest.mark.parametrize('kwargs, message', [
    (dict(variant='median', sigma=1.0), 'variant'),
    (dict(sigma=-1.0), 'sigma'),
    (dict(sigma=1.0, delta=0.0), 'delta'),
    (dict(sigma=1.0, local_init_mixing=1.5), 'local_init_mixing'),
])
def test_bad_arguments_are_rejected_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    fedplus.build_fedplus_process(synthetic_regression.model_fn, sgd(), **kwargs)


def test_an_optimizer_without_a_learning_rate_is_rejected():
  class NoLearningRate(tff.learning.optimizers.Optimizer):

    def initialize(self, specs):
      return collections.OrderedDict()

    def next(self, state, weights, gradients):
      return state, weights

  with pytest.raises(ValueError, match='learning_rate'):
    fedplus.build_fedplus_process(synthetic_regression.model_fn, NoLearningRate(), sigma=1.0)


@pytest.mark.parametrize('variant, kind', [('geomed', 'l2'), ('comed', 'l1'), ('avg', 'squared_l2'), ('fedprox', None)])
def test_the_anchor_model_is_the_global_model_plus_the_prox_of_the_offset(variant, kind):
  """Eq. (2)'s personalised model w~ + theta_k, theta_k = prox(w_k - w~) (eq. (11); theta = 0 for FedProx)."""
  delta = 0.3
  process = fedplus.build_fedplus_process(synthetic_regression.model_fn, sgd(), variant=variant, sigma=1.0, delta=delta)
  rng = np.random.default_rng(2)
  global_kernel, local_kernel = rng.normal(size=(2, synthetic_regression.DIMENSION, 1)).astype(np.float32)
  global_weights = tff.learning.models.ModelWeights(trainable=[global_kernel], non_trainable=[])
  assert process.has_anchor
  anchor = process.anchor_model_weights(global_weights, (local_kernel,)).trainable[0]
  offset = (local_kernel - global_kernel).astype(np.float64).ravel()
  theta = np.zeros_like(offset) if kind is None else fedplus_reference.prox(offset, delta, kind)
  np.testing.assert_allclose(anchor, global_kernel + theta.reshape(global_kernel.shape), atol=1e-6)


def _first_visit_after_one_round(init_client_from, sigma=0.0, mixing=0.0):
  """Client 0 trains alone in round 1; client 1, never seen, trains alone in round 2. Returns (the global model
  after round 1, client 1's state after round 2, the process, the server state after round 1)."""
  arrays = client_arrays(2)
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant='geomed', sigma=sigma, local_init_mixing=mixing,
      init_client_from=init_client_from,
  )
  state = process.initialize()
  never_seen = process.initial_client_state(state)  # what a driver's store gives a client before its first round
  first = process.next(state, datasets(arrays[:1]), [never_seen])
  second = process.next(first.state, datasets(arrays[1:]), [never_seen])
  return _global_kernel(process, first.state), second.client_states[0], process, first.state


def test_current_global_starts_a_new_client_from_the_global_model_of_its_first_round():
  """sigma = 0, lambda = 0 is local training from w_k: w_k = w~^1 for 'current_global', w~^0 = 0 for Algorithm 1."""
  (x, y) = client_arrays(2)[1]
  global_after_1, current, _, _ = _first_visit_after_one_round('current_global')
  assert np.linalg.norm(global_after_1) > 1e-2
  np.testing.assert_allclose(current['local'][0], numpy_sgd(global_after_1, x, y, LEARNING_RATE), atol=1e-5)
  assert bool(current['seen'])
  _, initial, _, _ = _first_visit_after_one_round('initial_global')
  np.testing.assert_allclose(initial[0], numpy_sgd(np.zeros_like(global_after_1), x, y, LEARNING_RATE), atol=1e-5)


def test_an_unseen_client_is_the_global_model_and_trains_as_a_client_holding_it():
  """With Psi's pull and mixing on: an unseen client's personal and anchor models are w~ (theta = prox(0) = 0),
  and its round is Algorithm 1's round of a client whose stored w_k is w~."""
  sigma, mixing = 2.0, 0.25
  global_after_1, current, process, state = _first_visit_after_one_round('current_global', sigma, mixing)
  unseen = process.initial_client_state(process.initialize())
  global_weights = process.get_model_weights(state)
  np.testing.assert_array_equal(process.personal_model_weights(global_weights, unseen).trainable[0], global_after_1)
  np.testing.assert_allclose(process.anchor_model_weights(global_weights, unseen).trainable[0], global_after_1,
                             atol=1e-7)
  algorithm_1 = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), variant='geomed', sigma=sigma, local_init_mixing=mixing
  )
  holding = algorithm_1.next(state, datasets(client_arrays(2)[1:]), [(global_after_1,)]).client_states[0]
  np.testing.assert_allclose(current['local'][0], holding[0], atol=1e-6)
  np.testing.assert_array_equal(process.personal_model_weights(global_weights, current).trainable[0],
                                current['local'][0])


def test_an_unseen_client_left_out_for_a_nonfinite_result_stays_unseen():
  x, y = client_arrays(1)[0]
  poisoned = datasets([(np.full_like(x, np.nan), y)])
  process = fedplus.build_fedplus_process(
      synthetic_regression.model_fn, sgd(), sigma=1.0, init_client_from='current_global'
  )
  state = process.initialize()
  output = process.next(state, poisoned, [process.initial_client_state(state)])
  assert not bool(output.client_states[0]['seen'])
  assert output.metrics['client_work']['num_nonfinite_updates'] == 1


def test_init_client_from_is_checked_by_name():
  with pytest.raises(ValueError, match="init_client_from must be one of .'initial_global', 'current_global'."):
    fedplus.build_fedplus_process(synthetic_regression.model_fn, sgd(), sigma=1.0, init_client_from='zero')
