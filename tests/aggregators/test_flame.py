"""FLAME (Nguyen et al. 2022) against its NumPy reference `core.flame` (scikit-learn's HDBSCAN): the clustering,
the clipping, averaging and noise, and that it gathers (not secure)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import flame
from tff_robust.aggregators import privacy
from tff_robust.aggregators.defences import building
from tff_robust.aggregators.defences import implementations
from tff_robust.core import flame as reference
from tests.aggregators import two_tensor_points

NOISE_DIMENSION = 40_000

_majority = tf.function(flame.majority_cluster, input_signature=[tf.TensorSpec([None, None], tf.float64)])


def _random_cloud(rng):
  """1-30 points of 2-8 dimensions: Gaussian, or a tight group among them, or with ties and zero rows."""
  num_points, dimension, kind = int(rng.integers(1, 31)), int(rng.integers(2, 9)), int(rng.integers(3))
  points = rng.normal(size=(num_points, dimension))
  if kind == 1:
    group = num_points // 3
    points[:group] = 5 * rng.normal(size=dimension) + 0.1 * rng.normal(size=(group, dimension))
  elif kind == 2:
    points = np.round(points)  # repeated directions (distance ties) and zero rows
  return points


def test_the_tensorflow_clustering_is_scikit_learns_hdbscan_on_random_clouds():
  """The closed form (`flame` module docstring) against scikit-learn on 300 clouds; both from the same float64
  cosine distances (scikit-learn's answer is taken from the reference's distances)."""
  rng = np.random.default_rng(0)
  for _ in range(300):
    points = _random_cloud(rng)
    distances = reference.cosine_distances(points)
    np.testing.assert_array_equal(_majority(tf.constant(distances)).numpy(), reference.majority_cluster(points),
                                  err_msg=str(points))


def test_the_tensorflow_cosine_distances_are_the_references():
  points = np.round(np.random.default_rng(1).normal(size=(12, 4)))
  np.testing.assert_allclose(flame.cosine_distances(tf.constant(points)).numpy(), reference.cosine_distances(points),
                             atol=1e-12)


def _attacked(seed, honest=7, attackers=3):
  """Honest updates of norms 0.5-3 around one direction; a tight backdoor group orthogonal to it, of norm ~4."""
  rng = np.random.default_rng(seed)
  direction, backdoor = rng.normal(size=5), rng.normal(size=5)
  backdoor -= backdoor @ direction / (direction @ direction) * direction
  points = np.concatenate([
      (direction + 0.3 * rng.normal(size=(honest, 5))) * rng.uniform(0.5, 3.0, size=(honest, 1))
      / np.linalg.norm(direction),
      (backdoor + 0.02 * rng.normal(size=(attackers, 5))) * 4 / np.linalg.norm(backdoor),
  ])
  return points, rng.uniform(0.5, 3.0, size=honest + attackers), np.arange(honest + attackers) < honest


@pytest.fixture(scope='module')
def noiseless_process():
  return flame.FlameFactory(noise_scale=0.0).create(*two_tensor_points.TYPES)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_without_noise_it_is_the_reference_and_drops_the_backdoor_group(noiseless_process, seed):
  points, weights, honest = _attacked(seed)
  result, measurements = two_tensor_points.aggregate_once(noiseless_process, points, weights)
  expected, median, kept = reference.noise_free_aggregate(points.astype(np.float32), weights)
  assert not np.any(kept & ~honest) and kept.sum() >= 6  # the reference drops the attackers
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(measurements['median_norm'], median, rtol=1e-6)
  assert measurements['num_admitted_clients'] == kept.sum() and measurements['num_clients_used'] == 10


def test_clients_of_weight_zero_and_nonfinite_clients_take_no_part(noiseless_process):
  points, weights, _ = _attacked(3)
  weights[0] = 0.0
  points[1, 0] = np.inf
  result, measurements = two_tensor_points.aggregate_once(noiseless_process, points, weights)
  expected, _, _ = reference.noise_free_aggregate(points[2:].astype(np.float32), weights[2:])
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
  assert measurements['num_nonfinite_clients'] == 2 and measurements['num_clients_used'] == 8


def test_the_noise_has_stddev_lambda_times_the_median_norm_and_is_reproducible():
  rng = np.random.default_rng(4)
  points = rng.normal(size=(5, NOISE_DIMENSION)) * [[0.01], [0.02], [0.03], [0.04], [0.05]]
  weights = np.ones(5)
  value_type = tff.TensorType(np.float32, [NOISE_DIMENSION])
  process = flame.FlameFactory(noise_scale=0.01, seed=3).create(value_type, tff.TensorType(np.float32))
  expected, median, _ = reference.noise_free_aggregate(points.astype(np.float32), weights)
  noises = []
  for _ in range(2):
    output = process.next(process.initialize(), [p.astype(np.float32) for p in points], [np.float32(1.0)] * 5)
    noises.append(np.asarray(output.result, np.float64) - expected)
  np.testing.assert_array_equal(noises[0], noises[1])  # the same seed, the same noise
  sigma = 0.01 * median
  assert abs(np.std(noises[0]) / sigma - 1) < 0.03  # sd of the sample std: 0.35%
  assert abs(np.mean(noises[0])) < 5 * sigma / np.sqrt(NOISE_DIMENSION)


def test_it_gathers_the_updates_and_the_registry_says_so():
  process = building.build_factory('flame', clients_per_round=10, num_byzantine=0).create(*two_tensor_points.TYPES)
  assert 'federated_aggregate' in privacy.non_secure_intrinsics(process.next)
  assert not building.registry.is_secure('rlr>flame')
  with pytest.raises(ValueError, match='flame gathers the client updates'):
    building.build_factory('flame', clients_per_round=10, num_byzantine=0,
                           secure_bounds=implementations.SecureBounds(100.0, 3.0))


@pytest.mark.parametrize('value', [float('nan'), -0.001, float('inf')])
def test_a_noise_scale_that_is_nan_negative_or_infinite_is_refused_by_name(value):
  with pytest.raises(ValueError, match='noise_scale must be a finite number >= 0'):
    flame.FlameFactory(noise_scale=value)
