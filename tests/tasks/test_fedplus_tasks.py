"""The Fed+ paper's Sec. 5.1 datasets: the synthetic regression's distributions, digits-robust/-personal."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust import tasks
from tff_robust.tasks import digits_fedplus
from tff_robust.tasks import synthetic_regression_fedplus as regression


def _pooled(arrays):
  return np.concatenate([x for x, _ in arrays.values()]), np.concatenate([y for _, y in arrays.values()])


def _parameter_count(model_fn):
  return sum(int(np.prod(v.shape)) for v in model_fn().trainable_variables)


@pytest.fixture(scope='module')
def large_regression():
  """Many samples per party on d = 100, so that moments are estimated to about 1%."""
  train, test, weights = regression.make_party_arrays(dimension=100, samples_per_party=2000, split_seed=3)
  parties = {c: tuple(np.concatenate([a, b]) for a, b in zip(train[c], test[c])) for c in sorted(train)}
  return parties, weights


def test_regression_shapes_and_half_splits():
  train, test, weights = regression.make_party_arrays()
  assert sorted(train) == sorted(test) == [f'client_{k:03d}' for k in range(10)]
  assert weights.shape == (10, 1000)
  for client_id in train:
    for x, y in (train[client_id], test[client_id]):
      assert x.shape == (50, 1000) and y.shape == (50, 1)
      assert x.dtype == y.dtype == np.float32
    assert not np.isin(train[client_id][0][:, 0], test[client_id][0][:, 0]).any()  # disjoint halves


def test_regression_covariance_is_the_diagonal_with_period_50(large_regression):
  parties, _ = large_regression
  centred = np.concatenate([x - x.mean(axis=0) for x, _ in parties.values()]).astype(np.float64)
  covariance = centred.T @ centred / len(centred)
  expected = np.tile(np.arange(1, 51) ** -1.1, 2)
  np.testing.assert_allclose(regression.covariance_diagonal(100), expected)
  np.testing.assert_allclose(np.diag(covariance), expected, rtol=0.06)
  np.testing.assert_allclose(covariance - np.diag(np.diag(covariance)), 0.0, atol=0.04)


def test_regression_party_means_and_noise_variance(large_regression):
  parties, weights = large_regression
  means = np.stack([x.mean(axis=0) for x, _ in parties.values()])
  assert means.var() == pytest.approx(0.5, rel=0.15)  # mu_k ~ N(0, 0.5 I), 1000 draws
  residuals = np.concatenate([y[:, 0] - x @ w for (x, y), w in zip(parties.values(), weights)])
  assert residuals.var() == pytest.approx(2.0, rel=0.05)  # v ~ N(0, 2), 20000 draws
  assert abs(residuals.mean()) < 0.05


def test_regression_weights_share_a_centre_except_the_outlier():
  _, _, weights = regression.make_party_arrays(split_seed=1)
  normal, outlier = weights[:-1], weights[-1]
  assert normal.std(axis=1) == pytest.approx(np.full(9, np.sqrt(5.5)), rel=0.1)  # N(0, 5) + Laplace(0.5)
  assert outlier.std() == pytest.approx(np.sqrt(50.5), rel=0.1)  # N(0, 50) + Laplace(0.5)
  # Two normal parties differ only by their Laplace(0.5) draws: variance 2 * 2 * 0.5^2 = 1.
  assert (normal[0] - normal[1]).var() == pytest.approx(1.0, rel=0.15)
  assert (outlier - normal[0]).var() == pytest.approx(56.0, rel=0.15)  # 50 + 5 + 2 * 0.5


def test_regression_seeded():
  first, second, other = [regression.make_party_arrays(dimension=20, split_seed=s) for s in (4, 4, 5)]
  for a, b in zip(first[:2], second[:2]):
    for client_id in a:
      for left, right in zip(a[client_id], b[client_id]):
        np.testing.assert_array_equal(left, right)
  np.testing.assert_array_equal(first[2], second[2])
  assert not np.allclose(first[2], other[2])
  assert not np.allclose(first[0]['client_000'][0], other[0]['client_000'][0])


def test_regression_rejects_bad_arguments():
  with pytest.raises(ValueError, match='num_parties must be an integer >= 2'):
    regression.make_party_arrays(num_parties=1)
  with pytest.raises(ValueError, match='samples_per_party must be an integer >= 2'):
    regression.make_party_arrays(samples_per_party=1)
  with pytest.raises(ValueError, match='dimension must be an integer >= 1'):
    regression.make_model_fn(0)


def test_regression_task_evaluates_pooled_test_halves():
  task = tasks.create_task('synthetic_regression_fedplus', client_epochs=4, client_batch_size=10, seed=0)
  train, test, _ = regression.make_party_arrays()
  assert task.name == 'synthetic_regression_fedplus'
  assert task.personal_test_data.client_ids == task.train_data.client_ids == sorted(train)
  assert _parameter_count(task.model_fn) == 1000
  assert sum(1 for _ in task.client_dataset('client_000')) == 20  # the paper's E_k = 20 local iterations
  personal = list(task.personal_test_data.create_tf_dataset_for_client('client_009').as_numpy_iterator())
  np.testing.assert_array_equal(np.stack([e['x'] for e in personal]), test['client_009'][0])
  metrics = task.evaluate(tff.learning.models.ModelWeights.from_model(task.model_fn()))
  _, y_test = _pooled(test)
  assert metrics['mse'] == pytest.approx(float(np.mean(y_test.astype(np.float64) ** 2)), rel=1e-4)


def test_digits_parties_partition_every_example_in_halves():
  train, test = digits_fedplus.load_party_arrays()
  assert sorted(train) == sorted(test) == [f'client_{k:03d}' for k in range(10)]
  sizes = [len(train[c][1]) + len(test[c][1]) for c in train]
  assert sum(sizes) == 1797 and max(sizes) - min(sizes) <= 1
  assert all(len(test[c][1]) - len(train[c][1]) in (0, 1) for c in train)
  x_all = np.concatenate([_pooled(train)[0], _pooled(test)[0]])
  assert x_all.shape == (1797, 64) and x_all.min() == 0.0 and x_all.max() == 1.0
  with pytest.raises(ValueError, match=r'num_parties must be an integer in \[1, 179\]'):
    digits_fedplus.load_party_arrays(num_parties=180)


@pytest.mark.parametrize('num_parties', [10, 30])
def test_robust_negates_a_tenth_of_the_parties(num_parties):
  clean_train, clean_test = digits_fedplus.load_party_arrays(num_parties=num_parties, split_seed=2)
  train, test, negated = digits_fedplus.negate_parties(clean_train, clean_test, seed=2)
  assert len(negated) == round(0.1 * num_parties)
  for clean, changed in ((clean_train, train), (clean_test, test)):
    for client_id, (x, y) in changed.items():
      np.testing.assert_array_equal(y, clean[client_id][1])
      expected = 1.0 - clean[client_id][0] if client_id in negated else clean[client_id][0]
      np.testing.assert_array_equal(x, expected)
  means = {c: np.concatenate([train[c][0], test[c][0]]).mean() for c in train}
  others = np.mean([m for c, m in means.items() if c not in negated])
  for client_id in negated:
    assert means[client_id] == pytest.approx(1.0 - others, abs=0.02)
  assert digits_fedplus.negate_parties(clean_train, clean_test, seed=2)[2] == negated
  with pytest.raises(ValueError, match=r'fraction must be a number in \(0, 1\]'):
    digits_fedplus.negate_parties(clean_train, clean_test, fraction=0.0)


def test_personal_noise_touches_exactly_two_classes_per_party():
  clean_train, clean_test = digits_fedplus.load_party_arrays(split_seed=1)
  train, test, chosen = digits_fedplus.add_class_noise(clean_train, clean_test, seed=1)
  assert len({tuple(c) for c in chosen.values()}) > 1  # parties choose their own classes
  for client_id in train:
    changed_labels = set()
    for clean, noisy in ((clean_train, train), (clean_test, test)):
      (x_clean, y_clean), (x, y) = clean[client_id], noisy[client_id]
      np.testing.assert_array_equal(y, y_clean)
      assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
      differs = (x != x_clean).any(axis=1)
      changed_labels |= set(y[differs].tolist())
      np.testing.assert_array_equal(differs, np.isin(y, chosen[client_id]))
    assert len(chosen[client_id]) == 2 and changed_labels == set(chosen[client_id])


def test_personal_noise_has_the_laplace_scale():
  clean_train, clean_test = digits_fedplus.load_party_arrays()
  train, _, chosen = digits_fedplus.add_class_noise(clean_train, clean_test, laplace_scale=1e-3)
  differences = []
  for client_id, (x, y) in train.items():
    x_clean = clean_train[client_id][0]
    interior = np.isin(y, chosen[client_id])[:, None] & (x_clean > 0.1) & (x_clean < 0.9)
    differences.append((x - x_clean)[interior])
  differences = np.concatenate(differences).astype(np.float64)
  assert np.abs(differences).mean() == pytest.approx(1e-3, rel=0.1)  # E|Laplace(b)| = b
  with pytest.raises(ValueError, match='laplace_scale must be a finite number >= 0'):
    digits_fedplus.add_class_noise(clean_train, clean_test, laplace_scale=-1.0)


@pytest.mark.parametrize('name', ['digits_robust', 'digits_personal'])
def test_digits_tasks(name):
  task = tasks.create_task(name, client_epochs=1, client_batch_size=20, seed=0)
  assert task.name == name and name in tasks.TASK_NAMES
  assert task.personal_test_data.client_ids == task.train_data.client_ids
  assert len(task.train_data.client_ids) == 10
  assert _parameter_count(task.model_fn) == 650
  (batch, *_) = task.client_dataset('client_000').as_numpy_iterator()
  assert batch['x'].shape == (20, 64) and batch['y'].dtype == np.int32
