"""MtFEEL, DDE and signSGD processes against the NumPy reference (`tff_robust.core.mtfeel`) on least squares."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import channels
from tff_robust.core import mtfeel as reference
from tff_robust.processes import dde
from tff_robust.processes import indexed_clients
from tff_robust.processes import mtfeel
from tff_robust.processes import mtfeel_server_ops
from tff_robust.processes import sign_sgd
from tff_robust.processes import stacked_models

_DIM = 3
_NUM_DEVICES = 3
_SIZES = (10, 7, 12)


def _model_fn():
  inputs = tf.keras.Input(shape=(_DIM,))
  keras_model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, use_bias=False, kernel_initializer='zeros')(inputs))
  return tff.learning.models.from_keras_model(
      keras_model, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, _DIM], tf.float32), y=tf.TensorSpec([None, 1], tf.float32)
      ),
  )


def _device_arrays(seed=0):
  rng = np.random.default_rng(seed)
  return [
      (rng.normal(size=(n, _DIM)).astype(np.float32) + m, rng.normal(size=(n, 1)).astype(np.float32) * (m + 1))
      for m, n in enumerate(_SIZES)
  ]


def _datasets(arrays):
  # Batches of 4: the clients must average over batches to get the full-batch loss and gradient.
  return [tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4) for x, y in arrays]


def _loss_and_gradient(x, y, w):
  residual = x @ w - y[:, 0]
  return np.mean(residual ** 2), 2 * x.T @ residual / len(y)


def _reference_reports(arrays, models):
  """losses[k, m] = Lhat(w_k, S_m) and signs[k, m] = sign(grad_{w_k} Lhat(w_k, S_m)), in float64."""
  losses = np.zeros([len(models), len(arrays)])
  signs = np.zeros([len(models), len(arrays), _DIM])
  for k, w in enumerate(models):
    for m, (x, y) in enumerate(arrays):
      losses[k, m], gradient = _loss_and_gradient(x.astype(np.float64), y.astype(np.float64), w)
      signs[k, m] = reference.sign_of_gradient(gradient)
  return losses, signs


def _with_models(state, models):
  weights = tff.learning.models.ModelWeights(trainable=[models[:, :, None].astype(np.float32)], non_trainable=[])
  return collections.OrderedDict(state, personal_weights=weights)


def _models(state):
  return np.asarray(state['personal_weights'].trainable[0])[:, :, 0].astype(np.float64)


@pytest.mark.parametrize('update_order, gamma, lambdas', [
    *[(order, 0.0, None) for order in mtfeel.UPDATE_ORDERS],
    ('w_then_alpha', 0.1, [0.5, 0.3, 0.2]),  # the signed weight decay of (9) and unequal lambda_k
])
def test_mtfeel_rounds_match_the_numpy_reference(update_order, gamma, lambdas):
  arrays = _device_arrays()
  eta, mu, pen_scale = 0.05, 0.2, 3.0
  process = mtfeel.build_mtfeel_process(
      _model_fn, _NUM_DEVICES, learning_rate=eta, alpha_learning_rate=mu, pen_scale=pen_scale,
      update_order=update_order, self_discrepancy=0.5, gamma=gamma, lambdas=lambdas,
  )
  rng = np.random.default_rng(1)
  models = rng.normal(size=(_NUM_DEVICES, _DIM))
  discrepancies = np.array([[0.5, 0.2, 1.0], [0.2, 0.5, 0.3], [1.0, 0.3, 0.5]])
  state = collections.OrderedDict(_with_models(process.initialize(), models),
                                  discrepancies=discrepancies.astype(np.float32))
  alpha = np.full([_NUM_DEVICES, _NUM_DEVICES], 1 / _NUM_DEVICES)
  lambdas = np.full(_NUM_DEVICES, 1 / _NUM_DEVICES) if lambdas is None else np.array(lambdas)
  gammas = np.full(_NUM_DEVICES, gamma) if gamma else None
  num_examples = np.array(_SIZES, np.float64)
  for _ in range(3):
    losses, signs = _reference_reports(arrays, models)
    new_alpha = reference.alpha_step(losses, discrepancies, alpha, lambdas, num_examples, pen_scale, mu)
    weighting = alpha if update_order == 'w_then_alpha' else new_alpha
    expected_objective = reference.objective(losses, discrepancies, alpha, lambdas, num_examples, pen_scale,
                                             np.linalg.norm(models, axis=1), gammas)  # (7) at W^t, gamma included
    models = reference.sign_step(models, signs, weighting, lambdas, eta, gammas)
    alpha = new_alpha
    state, metrics = process.next(state, _datasets(arrays))
    np.testing.assert_allclose(_models(state), models, atol=1e-6)
    np.testing.assert_allclose(state['alpha'], alpha, atol=1e-6)
    np.testing.assert_allclose(metrics['server']['objective'], expected_objective, rtol=1e-5)
    np.testing.assert_allclose(metrics['client_work']['train']['loss'], np.mean(np.diag(losses)), rtol=1e-5)
  assert metrics['aggregator']['channel']['bit_errors'] == 0
  assert metrics['aggregator']['channel']['bits'] == _NUM_DEVICES * _NUM_DEVICES * _DIM
  assert metrics['aggregator']['uplink_bits'] == _NUM_DEVICES * _NUM_DEVICES * (_DIM + 32)


def test_uniform_frozen_alpha_with_one_initial_model_is_sign_fedsgd_on_one_shared_model():
  arrays = _device_arrays(seed=5)
  eta = 0.1
  process = mtfeel.build_mtfeel_process(_model_fn, _NUM_DEVICES, learning_rate=eta, alpha_learning_rate=0.0)
  state = _with_models(process.initialize(), np.tile(np.array([[0.3, -0.2, 0.1]]), [_NUM_DEVICES, 1]))
  shared = np.array([0.3, -0.2, 0.1])
  for _ in range(3):
    signs = np.stack([reference.sign_of_gradient(_loss_and_gradient(x, y, shared)[1]) for x, y in arrays])
    shared = shared - eta * (1 / _NUM_DEVICES) * signs.mean(axis=0)
    state, _ = process.next(state, _datasets(arrays))
  np.testing.assert_allclose(_models(state), np.tile(shared, [_NUM_DEVICES, 1]), atol=1e-6)


def test_identity_frozen_alpha_is_local_sign_descent():
  arrays = _device_arrays(seed=6)
  eta = 0.1
  process = mtfeel.build_mtfeel_process(
      _model_fn, _NUM_DEVICES, learning_rate=eta, alpha_learning_rate=0.0, alpha_init='identity'
  )
  models = np.random.default_rng(2).normal(size=(_NUM_DEVICES, _DIM))
  state = _with_models(process.initialize(), models)
  state, _ = process.next(state, _datasets(arrays))
  expected = np.stack([
      models[k] - eta / _NUM_DEVICES * reference.sign_of_gradient(_loss_and_gradient(*arrays[k], models[k])[1])
      for k in range(_NUM_DEVICES)
  ])
  np.testing.assert_allclose(_models(state), expected, atol=1e-6)


def test_flipping_every_bit_reverses_the_signed_step():
  arrays = _device_arrays(seed=7)
  models = np.random.default_rng(3).normal(size=(_NUM_DEVICES, _DIM))
  steps = []
  for channel in (channels.ErrorFreeChannel(), channels.BinarySymmetricChannel(1.0)):
    process = mtfeel.build_mtfeel_process(
        _model_fn, _NUM_DEVICES, learning_rate=0.1, alpha_learning_rate=0.0, channel=channel
    )
    state, metrics = process.next(_with_models(process.initialize(), models), _datasets(arrays))
    steps.append(_models(state) - models)
  np.testing.assert_allclose(steps[1], -steps[0], atol=1e-6)
  assert metrics['aggregator']['channel']['bit_errors'] == metrics['aggregator']['channel']['bits']


def test_a_device_with_nan_data_is_left_out_counted_and_the_models_stay_finite():
  arrays = _device_arrays(seed=8)
  arrays[1] = (np.full_like(arrays[1][0], np.nan), arrays[1][1])
  process = mtfeel.build_mtfeel_process(_model_fn, _NUM_DEVICES, learning_rate=0.1, alpha_learning_rate=0.5)
  state = _with_models(process.initialize(), np.random.default_rng(4).normal(size=(_NUM_DEVICES, _DIM)))
  state, metrics = process.next(state, _datasets(arrays))
  assert metrics['aggregator']['num_nonfinite_clients'] == 1
  assert np.all(np.isfinite(_models(state))) and np.all(np.isfinite(state['alpha']))
  # The left-out device's column is priced at the row's worst reported loss: alpha moves weight off it.
  assert np.all(state['alpha'][:, 1] < 1 / _NUM_DEVICES)


def test_server_ops_match_the_numpy_reference_and_the_exact_derivative():
  rng = np.random.default_rng(9)
  v = rng.normal(scale=2.0, size=[6, 6]).astype(np.float32)
  np.testing.assert_allclose(mtfeel_server_ops.project_to_simplex(v), reference.project_to_simplex(v), atol=1e-6)
  losses, discrepancies = rng.uniform(0, 2, [4, 4]), rng.uniform(0, 1, [4, 4])
  alpha, lambdas, n = rng.dirichlet(np.ones(4), size=4), np.full(4, 0.25), np.array([5.0, 9.0, 20.0, 3.0])
  alpha_variable = tf.Variable(alpha)
  with tf.GradientTape() as tape:
    value = mtfeel_server_ops.objective(losses, discrepancies, alpha_variable, lambdas, n, 1.5)
  np.testing.assert_allclose(tape.gradient(value, alpha_variable),
                             mtfeel_server_ops.alpha_gradient(losses, discrepancies, alpha, lambdas, n, 1.5), rtol=1e-10)
  np.testing.assert_allclose(mtfeel_server_ops.alpha_gradient(losses, discrepancies, alpha, lambdas, n, 1.5),
                             reference.alpha_gradient(losses, discrepancies, alpha, lambdas, n, 1.5), rtol=1e-10)


def test_dde_matches_algorithm_1_and_its_estimates_increase():
  arrays = _device_arrays(seed=10)
  process = dde.build_dde_process(_model_fn, _NUM_DEVICES, learning_rate=0.01, seed=3)
  state = process.initialize()
  np.testing.assert_array_equal(dde.discrepancies(state, _NUM_DEVICES)[0, 1:], [1.0, 1.0])  # dhat^0 = 1
  clients = indexed_clients.with_indices(_datasets(arrays), _NUM_DEVICES)
  previous = None
  for _ in range(4):
    probes = np.asarray(state['probes'].trainable[0])[:, :, 0].astype(np.float64)
    expected_probes, expected = probes.copy(), np.zeros(len(probes))
    for p, (j, k) in enumerate(dde.device_pairs(_NUM_DEVICES)):
      (loss_j, grad_j), (loss_k, grad_k) = (_loss_and_gradient(*arrays[j], probes[p]),
                                            _loss_and_gradient(*arrays[k], probes[p]))
      expected[p] = abs(loss_j - loss_k)
      expected_probes[p] += 0.01 * reference.discrepancy_ascent_direction(loss_j, loss_k, grad_j, grad_k)
    state, _ = process.next(state, clients)
    np.testing.assert_allclose(state['estimates'], expected, rtol=1e-5)
    np.testing.assert_allclose(state['probes'].trainable[0][:, :, 0], expected_probes, rtol=1e-5, atol=1e-6)
    if previous is not None:
      assert np.all(state['estimates'] > previous)
    previous = np.asarray(state['estimates'])
  matrix = dde.discrepancies(state, _NUM_DEVICES)
  np.testing.assert_array_equal(matrix, matrix.T)
  np.testing.assert_array_equal(np.diag(matrix), 0.0)


def test_sign_sgd_majority_vote_matches_numpy():
  arrays = _device_arrays(seed=11)
  process = sign_sgd.build_sign_sgd_process(_model_fn, _NUM_DEVICES, learning_rate=0.1)
  w = np.array([0.5, -1.0, 0.2])
  state = process.set_model_weights(process.initialize(), tff.learning.models.ModelWeights(
      trainable=[w[:, None].astype(np.float32)], non_trainable=[]))
  signs = np.stack([reference.sign_of_gradient(_loss_and_gradient(x, y, w)[1]) for x, y in arrays])
  state, metrics = process.next(state, _datasets(arrays))
  np.testing.assert_allclose(state['global_model_weights'].trainable[0][:, 0], w - 0.1 * np.sign(signs.sum(0)), atol=1e-6)
  assert metrics['aggregator']['channel']['bits'] == _NUM_DEVICES * _DIM
  assert process.personal_model_weights(state, 2) is state['global_model_weights']


def test_stack_and_slice_models_round_trip():
  models = [tff.learning.models.ModelWeights(trainable=[np.full([2, 1], float(i))], non_trainable=[np.array(i)])
            for i in range(3)]
  stacked = stacked_models.stack_models(models)
  assert stacked.trainable[0].shape == (3, 2, 1)
  np.testing.assert_array_equal(stacked_models.model_at(stacked, 2).trainable[0], models[2].trainable[0])


@pytest.mark.parametrize('kwargs, message', [
    (dict(num_clients=1), 'num_clients'),
    (dict(learning_rate=0.0), 'learning_rate'),
    (dict(alpha_learning_rate=-1.0), 'alpha_learning_rate'),
    (dict(pen_scale=float('nan')), 'pen_scale'),
    (dict(alpha_init='random'), 'alpha_init'),
    (dict(update_order='both'), 'update_order'),
    (dict(lambdas=[1.0, -1.0, 0.5]), 'lambdas'),
    (dict(discrepancy_steps=-1), 'discrepancy_steps'),
])
def test_bad_arguments_are_rejected_by_name(kwargs, message):
  arguments = dict(num_clients=_NUM_DEVICES, learning_rate=0.1, alpha_learning_rate=0.1) | kwargs
  with pytest.raises(ValueError, match=message):
    mtfeel.build_mtfeel_process(_model_fn, **arguments)


def test_next_needs_every_device():
  process = mtfeel.build_mtfeel_process(_model_fn, _NUM_DEVICES, learning_rate=0.1, alpha_learning_rate=0.1)
  with pytest.raises(ValueError, match='one entry per device'):
    process.next(process.initialize(), _datasets(_device_arrays())[:2])
