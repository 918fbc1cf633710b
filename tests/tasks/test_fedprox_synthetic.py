"""FedProx's synthetic(alpha, beta) as Fed+ Sec. 5.2 uses it: the generator's statistics, splits and model."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import data_corruption
from tff_robust import tasks
from tff_robust.tasks import fedprox_synthetic as synthetic


def _parameter_count(model_fn):
  return sum(int(np.prod(v.shape)) for v in model_fn().trainable_variables)


def _devices(train, test):
  """{client_id: (x, y)} of each device's train and test parts together."""
  return {c: tuple(np.concatenate([a, b]) for a, b in zip(train[c], test[c])) for c in sorted(train)}


@pytest.fixture(scope='module')
def fedplus_draw():
  """Fed+'s setting (alpha = 1000, beta = 10, N = 30); seed 3 draws ~52,000 examples."""
  return synthetic.make_device_arrays(alpha=1000.0, beta=10.0, split_seed=3)


def test_shapes_and_80_20_splits(fedplus_draw):
  train, test, models = fedplus_draw
  assert sorted(train) == sorted(test) == [f'client_{k:03d}' for k in range(30)]
  assert models.weights.shape == (30, 10, 60) and models.biases.shape == (30, 10)
  assert models.input_means.shape == (30, 60) and models.sample_sizes.shape == (30,)
  for k, client_id in enumerate(sorted(train)):
    (x_train, y_train), (x_test, y_test) = train[client_id], test[client_id]
    n = models.sample_sizes[k]
    assert n >= 50 and len(y_train) == int(0.8 * n) and len(y_train) + len(y_test) == n
    assert x_train.shape == (len(y_train), 60) and x_train.dtype == np.float32 and y_train.dtype == np.int32
    assert not {r.tobytes() for r in x_train} & {r.tobytes() for r in x_test}  # disjoint parts


def test_sample_sizes_follow_floor_lognormal_4_2_plus_50():
  sizes = synthetic.sample_sizes(np.random.default_rng(0), 40000)
  assert sizes.min() >= 50 and sizes.dtype == np.int64
  for m in (8, 55, 403, 3000):  # P(floor(L) >= m) = P(L >= m) = 1 - Phi((ln m - 4) / 2) for integer m
    expected = 0.5 * math.erfc((math.log(m) - 4.0) / 2.0 / math.sqrt(2.0))
    assert np.mean(sizes - 50 >= m) == pytest.approx(expected, abs=0.01)


def test_within_device_covariance_is_diagonal_j_to_minus_1_2(fedplus_draw):
  train, test, _ = fedplus_draw
  centred = np.concatenate([x - x.mean(axis=0) for x, _ in _devices(train, test).values()]).astype(np.float64)
  assert len(centred) > 50000
  covariance = centred.T @ centred / len(centred)
  expected = np.arange(1, 61) ** -1.2
  np.testing.assert_allclose(synthetic.covariance_diagonal(60), expected)
  np.testing.assert_allclose(np.diag(covariance), expected, rtol=0.05)
  correlation = covariance / np.sqrt(np.outer(expected, expected))
  np.testing.assert_allclose(correlation - np.diag(np.diag(correlation)), 0.0, atol=0.03)


def test_device_means_are_their_input_means(fedplus_draw):
  train, test, models = fedplus_draw
  for k, (x, _) in enumerate(_devices(train, test).values()):
    np.testing.assert_allclose(x.mean(axis=0), models.input_means[k], atol=5 / np.sqrt(len(x)))
  # v_k = B_k + N(0, 1) elementwise.
  assert (models.input_means - models.data_means[:, None]).var() == pytest.approx(1.0, rel=0.1)


def test_labels_are_the_argmax_of_each_devices_own_model(fedplus_draw):
  train, test, models = fedplus_draw
  for k, client_id in enumerate(sorted(train)):
    for x, y in (train[client_id], test[client_id]):
      logits = x.astype(np.float64) @ models.weights[k].T + models.biases[k]
      np.testing.assert_array_equal(y, np.argmax(logits, axis=1))
  labels = np.concatenate([y for _, y in train.values()])
  assert set(np.unique(labels)) == set(range(10))
  # The device models differ: a device's model labels another device's inputs differently.
  x0 = train['client_000'][0].astype(np.float64)
  other = np.argmax(x0 @ models.weights[1].T + models.biases[1], axis=1)
  assert np.mean(other == train['client_000'][1]) < 0.5


def test_alpha_spreads_the_models_but_changes_no_label():
  draws = {a: synthetic.make_device_arrays(alpha=a, beta=1.0, split_seed=1) for a in (0.0, 1.0, 1000.0)}
  spreads = []
  for alpha, (train, _, models) in draws.items():
    entries = np.concatenate([models.weights, models.biases[:, :, None]], axis=2).reshape(30, -1)
    np.testing.assert_allclose(entries.mean(axis=1), models.model_means, atol=0.2)  # entries ~ N(u_k, 1)
    spreads.append(entries.mean(axis=1).std())
    # u_k shifts all ten logits of a device alike: the labels are those of alpha = 0.
    for client_id, (_, y) in train.items():
      assert np.mean(y == draws[0.0][0][client_id][1]) >= 0.999
  assert spreads[0] < 0.1 < 0.3 < spreads[1] < 3.0 < 300 < spreads[2]


def test_beta_spreads_the_devices_inputs():
  spreads, data_means = [], []
  for beta in (0.0, 1.0, 10.0):
    train, test, models = synthetic.make_device_arrays(alpha=1.0, beta=beta, split_seed=2)
    data_means.append(models.data_means)
    means = np.stack([x.mean(axis=0) for x, _ in _devices(train, test).values()])
    spreads.append(means.mean(axis=1).var())  # between-device variance of the input level B_k
  np.testing.assert_allclose(data_means[2], 10 * data_means[1])  # B_k = beta * N(0, 1), same seed
  assert spreads[0] < 0.1 and 0.2 < spreads[1] < 3.0 and 20.0 < spreads[2] < 300.0


def test_seeded_and_validated():
  first, second, other = [synthetic.make_device_arrays(alpha=1.0, beta=1.0, split_seed=s) for s in (4, 4, 5)]
  for client_id in first[0]:
    for a, b in zip(first[0][client_id] + first[1][client_id], second[0][client_id] + second[1][client_id]):
      np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(first[2].weights, second[2].weights)
  assert not np.allclose(first[2].weights, other[2].weights)
  with pytest.raises(ValueError, match='alpha must be a finite number >= 0'):
    synthetic.make_device_arrays(alpha=-1.0, beta=1.0)
  with pytest.raises(ValueError, match='beta must be a finite number >= 0'):
    synthetic.make_device_arrays(alpha=1.0, beta=float('nan'))
  with pytest.raises(ValueError, match='num_devices must be an integer >= 1'):
    synthetic.make_device_arrays(alpha=1.0, beta=1.0, num_devices=0)
  with pytest.raises(ValueError, match='num_classes must be an integer >= 2'):
    data_corruption.flip_labels('y', 1)
  with pytest.raises(ValueError, match='name must be one of'):
    synthetic.create_task('fedprox_synthetic_2_2', client_epochs=1, client_batch_size=10, seed=0)


def test_task_names_and_model():
  assert _parameter_count(synthetic.model_fn) == 60 * 10 + 10
  assert synthetic.TASK_PARAMETERS['fedprox_synthetic'] == (1000.0, 10.0)  # Fed+ Sec. 5.2
  for name, (alpha, beta) in synthetic.TASK_PARAMETERS.items():
    assert name in tasks.TASK_NAMES
    if name != 'fedprox_synthetic':
      assert name == f'fedprox_synthetic_{alpha:g}_{beta:g}'


def test_fedplus_task_trains_one_round():
  task = tasks.create_task('fedprox_synthetic', client_epochs=1, client_batch_size=10, seed=0)
  train, test, _ = synthetic.make_device_arrays(alpha=1000.0, beta=10.0)
  assert task.name == 'fedprox_synthetic'
  assert task.personal_test_data.client_ids == task.train_data.client_ids == sorted(train)
  personal = list(task.personal_test_data.create_tf_dataset_for_client('client_007').as_numpy_iterator())
  np.testing.assert_array_equal(np.array([e['y'] for e in personal]), test['client_007'][1])
  (batch, *_) = task.client_dataset('client_000').as_numpy_iterator()
  assert batch['x'].shape == (10, 60) and batch['y'].dtype == np.int32
  flipped = next(iter(task.corrupt_train(tf.data.Dataset.from_tensors(dict(x=batch['x'], y=batch['y'])))))
  np.testing.assert_array_equal(flipped['y'], 9 - batch['y'])
  y_test = np.concatenate([y for _, y in test.values()])
  initial = task.evaluate(tff.learning.models.ModelWeights.from_model(task.model_fn()))
  assert initial['loss'] == pytest.approx(np.log(10), rel=1e-5)  # zero weights: uniform over 10 classes
  assert initial['accuracy'] == pytest.approx(np.mean(y_test == 0), abs=1e-6)
  process = tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.01)
  )
  state = process.initialize()
  output = process.next(state, [task.client_dataset(c) for c in task.train_data.client_ids[:10]])
  trained = task.evaluate(process.get_model_weights(output.state))
  assert np.isfinite(trained['loss']) and trained['accuracy'] > initial['accuracy']
