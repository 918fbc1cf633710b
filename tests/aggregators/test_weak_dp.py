"""Norm bounding with weak DP (Sun et al. 2019) against its NumPy reference `core.weak_dp`: the clipped mean, the
noise's distribution and seeding, the secure-sum audit and the refusals."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import gaussian_noise
from tff_robust.aggregators import norm_clipping
from tff_robust.aggregators import privacy
from tff_robust.aggregators import weak_dp
from tff_robust.aggregators.defences import building
from tff_robust.aggregators.defences import implementations
from tff_robust.core import weak_dp as reference
from tests.aggregators import two_tensor_points

BOUNDS = implementations.SecureBounds(value_bound=100.0, max_client_weight=3.0)
NOISE_DIMENSION = 40_000  # coordinates of one noise draw: its sample std is within 0.4% of sigma (1 sd)


def _cloud(seed):
  """Eight clients of norms 0.2-6 and uneven weights."""
  rng = np.random.default_rng(seed)
  directions = rng.normal(size=(8, 5))
  directions /= np.linalg.norm(directions, axis=1, keepdims=True)
  return directions * rng.uniform(0.2, 6.0, size=(8, 1)), rng.uniform(0.5, 3.0, size=8)


@pytest.mark.parametrize('seed', [0, 1])
def test_without_noise_it_is_the_clipped_mean_of_the_reference_exactly_as_norm_clipping(seed):
  points, weights = _cloud(seed)
  process = weak_dp.norm_bounded_dp_factory(1.5, 0.0).create(*two_tensor_points.TYPES)
  result, measurements = two_tensor_points.aggregate_once(process, points, weights)
  np.testing.assert_allclose(result, reference.clipped_mean(points, weights, 1.5), rtol=1e-5, atol=1e-6)
  assert measurements['clipped_count'] == np.sum(np.linalg.norm(points, axis=1) > 1.5) > 0
  clipped, _ = two_tensor_points.aggregate_once(
      norm_clipping.NormClippingFactory(1.5).create(*two_tensor_points.TYPES), points, weights)
  np.testing.assert_array_equal(result, clipped)  # sigma = 0 adds exact zeros


@pytest.fixture(scope='module')
def wide_process():
  """sigma = 0.05, M = 1, seed 7, on one float32 tensor of NOISE_DIMENSION entries."""
  factory = weak_dp.norm_bounded_dp_factory(1.0, 0.05, seed=7)
  return factory.create(tff.TensorType(np.float32, [NOISE_DIMENSION]), tff.TensorType(np.float32))


def _wide_clients():
  rng = np.random.default_rng(3)
  return rng.normal(size=(3, NOISE_DIMENSION)) * [[0.001], [0.01], [0.1]], np.array([1.0, 2.0, 3.0])


def _noises(process, state, rounds):
  """The noise of `rounds` successive rounds from `state`: each result minus the reference's clipped mean."""
  points, weights = _wide_clients()
  clipped_mean = reference.clipped_mean(points, weights, 1.0)
  noises = []
  for _ in range(rounds):
    output = process.next(state, [p.astype(np.float32) for p in points], [np.float32(w) for w in weights])
    state = output.state
    noises.append(np.asarray(output.result, np.float64) - clipped_mean)
  return noises


def test_the_noise_is_gaussian_with_stddev_sigma_and_new_every_round(wide_process):
  first, second = _noises(wide_process, wide_process.initialize(), 2)
  for noise in (first, second):
    # Sample std of 40,000 draws: sd 0.35% of sigma, so 3% is 8 sd; mean: sd sigma / 200, bound 5 sd.
    assert abs(np.std(noise) / 0.05 - 1) < 0.03
    assert abs(np.mean(noise)) < 5 * 0.05 / np.sqrt(NOISE_DIMENSION)
    assert abs(np.mean(np.abs(noise) < 0.05) - 0.6827) < 0.012  # P(|Z| < 1); sd of the share 0.0023
  assert abs(np.corrcoef(first, second)[0, 1]) < 0.03  # independent draws: sd of the correlation 0.005


def test_the_noise_is_reproducible_from_the_seed_and_differs_between_seeds(wide_process):
  [again] = _noises(wide_process, wide_process.initialize(), 1)
  [first] = _noises(wide_process, wide_process.initialize(), 1)
  np.testing.assert_array_equal(again, first)
  other = weak_dp.norm_bounded_dp_factory(1.0, 0.05, seed=8).create(
      tff.TensorType(np.float32, [NOISE_DIMENSION]), tff.TensorType(np.float32))
  [other_noise] = _noises(other, other.initialize(), 1)
  assert abs(np.corrcoef(first, other_noise)[0, 1]) < 0.03


def test_the_registry_component_with_secure_bounds_sums_securely_and_computes_the_same():
  spec = 'weak_dp(m=2,sigma=0.1,seed=5)'
  secure = building.build_factory(spec, clients_per_round=8, num_byzantine=0, secure_bounds=BOUNDS).create(
      *two_tensor_points.TYPES)
  assert not privacy.non_secure_intrinsics(secure.next)
  privacy.assert_client_values_aggregated_securely(secure.next)
  plain = building.build_factory(spec, clients_per_round=8, num_byzantine=0).create(*two_tensor_points.TYPES)
  with pytest.raises(privacy.NotSecurelyAggregatedError, match='federated_sum|federated_mean|weighted_mean'):
    privacy.assert_client_values_aggregated_securely(plain.next)
  points, weights = _cloud(2)
  secure_result, _ = two_tensor_points.aggregate_once(secure, points, weights)
  plain_result, _ = two_tensor_points.aggregate_once(plain, points, weights)
  np.testing.assert_allclose(secure_result, plain_result, atol=1e-3)  # the same noise; the secure sums' quantisation


@pytest.mark.parametrize('value', [float('nan'), -0.1, float('inf')])
def test_a_noise_stddev_that_is_nan_negative_or_infinite_is_refused_by_name(value):
  with pytest.raises(ValueError, match=r'noise_stddev must be a finite number >= 0'):
    weak_dp.norm_bounded_dp_factory(1.0, value)
  with pytest.raises(ValueError, match=r'noise_stddev must be a finite number >= 0'):
    gaussian_noise.GaussianNoiseFactory(tff.aggregators.MeanFactory(), value)


@pytest.mark.parametrize('value', [float('nan'), 0.0, -1.0])
def test_a_norm_bound_out_of_range_is_refused_by_name(value):
  with pytest.raises(ValueError, match=r'norm_bound must be a finite number > 0'):
    weak_dp.norm_bounded_dp_factory(value, 0.1)


def test_a_seed_that_is_not_a_non_negative_integer_is_refused_by_name():
  for seed in (-1, 1.5, True):
    with pytest.raises(ValueError, match='seed must be an integer >= 0'):
      weak_dp.norm_bounded_dp_factory(1.0, 0.1, seed=seed)
