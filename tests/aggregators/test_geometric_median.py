"""GeometricMedianFactory against the NumPy reference of Algorithms 2-3, closed forms and robustness."""

import functools

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import privacy
from tff_robust.core import weiszfeld
from tests.aggregators import two_tensor_points


@functools.lru_cache(maxsize=None)
def _process(num_passes=3, init='mean', smoothing=1e-6, mean_factory=None):
  factory = geometric_median.GeometricMedianFactory(
      num_passes=num_passes, smoothing=smoothing, init=init, mean_factory=mean_factory
  )
  return factory.create(*two_tensor_points.TYPES)


def _random_cloud(seed, num_points=9):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(num_points, 5))
  points[:2] += 20.0  # two far points make the median differ from the mean
  return points.astype(np.float32), rng.uniform(0.5, 3.0, num_points).astype(np.float32)


@pytest.mark.parametrize('init', ['mean', 'zero'])
def test_every_iterate_and_objective_match_the_numpy_reference(init):
  points, weights = _random_cloud(seed=0)
  reference = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=4, smoothing=1e-6, init=init)
  for num_passes in (1, 2, 4):  # a process with k passes returns the reference's k-th iterate
    result, measurements = two_tensor_points.aggregate_once(_process(num_passes, init), points, weights)
    np.testing.assert_allclose(result, reference.iterates[num_passes - 1], rtol=1e-5, atol=1e-5)
    num_objectives = num_passes - 1 if init == 'mean' else num_passes
    np.testing.assert_allclose(
        measurements['objective'], reference.objectives[:num_objectives], rtol=1e-5
    )
    assert measurements['secure_average_calls'] == num_passes
    assert measurements['num_nonfinite_clients'] == 0


def test_median_of_symmetric_points_is_their_centre():
  centre = np.array([1.0, -2.0, 0.5, 3.0, -1.0], np.float32)
  offsets = np.concatenate([np.eye(5), -np.eye(5)]).astype(np.float32) * np.arange(1, 6, dtype=np.float32)
  result, _ = two_tensor_points.aggregate_once(_process(num_passes=20, init='zero'), centre + offsets, np.ones(10))
  np.testing.assert_allclose(result, centre, atol=1e-4)


@pytest.mark.parametrize('distance', [1e3, 1e6])
def test_median_stays_bounded_when_less_than_half_the_weight_is_moved_far(distance):
  # 8 of 20 equally weighted points (40% of the weight) moved `distance` away. From the mean, Weiszfeld
  # converges linearly at a rate set by the corrupted share, so 40% needs ~50 passes (3 suffice at <10%).
  rng = np.random.default_rng(5)
  inliers = rng.normal(size=(12, 5)).astype(np.float32)
  points = np.concatenate([inliers, np.full((8, 5), distance, np.float32)])
  median, _ = two_tensor_points.aggregate_once(_process(num_passes=60), points, np.ones(20))
  assert np.linalg.norm(points.mean(0) - inliers.mean(0)) > 0.3 * distance  # the mean follows them ...
  assert np.linalg.norm(median - inliers.mean(0)) < 3.0  # ... the median moves a bounded distance


def test_nonfinite_clients_get_zero_weight_and_are_counted():
  points, weights = _random_cloud(seed=1)
  corrupted = points.copy()
  corrupted[3, 1] = np.nan
  corrupted[5, 4] = np.inf
  keep = np.array([i not in (3, 5) for i in range(len(points))])
  expected = weiszfeld.smoothed_weiszfeld(
      points[keep], weights[keep], num_passes=3, smoothing=1e-6, init='mean'
  ).iterates[-1]
  result, measurements = two_tensor_points.aggregate_once(_process(), corrupted, weights)
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
  assert measurements['num_nonfinite_clients'] == 2


def test_nonfinite_weight_is_dropped():
  points, weights = _random_cloud(seed=2)
  weights = weights.copy()
  weights[0] = np.nan
  result, measurements = two_tensor_points.aggregate_once(_process(), points, weights)
  assert np.all(np.isfinite(result)) and measurements['num_nonfinite_clients'] == 1


@pytest.mark.parametrize('init', ['mean', 'zero'])
def test_no_weight_left_gives_a_zero_aggregate_not_nan(init):
  points = np.full((3, 5), np.nan, np.float32)
  result, measurements = two_tensor_points.aggregate_once(_process(3, init), points, np.ones(3))
  np.testing.assert_array_equal(result, np.zeros(5))
  assert measurements['num_nonfinite_clients'] == 3
  result, _ = two_tensor_points.aggregate_once(_process(3, init), np.ones((3, 5)), np.zeros(3))
  np.testing.assert_array_equal(result, np.zeros(5))


@pytest.mark.parametrize('num_passes', [2, 4])
def test_a_finite_client_that_overflows_the_mean_start_costs_one_pass_and_is_counted(num_passes):
  # alpha |w_ij| = 3.5e38 exceeds float32's 3.4e38: the mean start is Inf. The remaining passes restart from
  # v = 0, so the aggregate is the float64 reference's from zero with one pass fewer, where each client adds at
  # most alpha_i to an entry; ||w_i|| = 2.2e38 and the distances stay finite in float32.
  points, weights = _random_cloud(seed=6)
  points[0], weights[0] = 1e38, 3.5
  result, measurements = two_tensor_points.aggregate_once(_process(num_passes, 'mean'), points, weights)
  expected = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=num_passes - 1, smoothing=1e-6, init='zero')
  np.testing.assert_allclose(result, expected.iterates[-1], rtol=1e-4, atol=1e-4)
  assert np.linalg.norm(result - np.median(points[1:], axis=0)) < 5.0  # the inliers' median, not zero or Inf
  assert measurements['overflowed_passes'] == 1 and measurements['num_nonfinite_clients'] == 0
  _, clean = two_tensor_points.aggregate_once(_process(num_passes, 'mean'), points[1:], weights[1:])
  assert clean['overflowed_passes'] == 0


def test_a_one_pass_mean_start_that_overflows_gives_a_zero_aggregate_and_is_counted():
  points, weights = _random_cloud(seed=6)
  points[0], weights[0] = 1e38, 3.5
  result, measurements = two_tensor_points.aggregate_once(_process(1, 'mean'), points, weights)
  np.testing.assert_array_equal(result, np.zeros(5))
  assert measurements['overflowed_passes'] == 1


def _secure_mean_factory():
  # SecureSumFactory quantises into a fixed number of levels over [lower, upper]: bounds must be tight.
  # Here values*weights stay below 100 and the Weiszfeld weights alpha/max(nu, ||v - w||) below 100.
  return tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0),
      weight_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0, lower_bound_threshold=0.0),
      no_nan_division=True,
  )


def test_secure_sum_backed_mean_gives_the_median_up_to_quantisation():
  points, weights = _random_cloud(seed=4)
  reference = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=3, smoothing=1e-3, init='mean')
  process = geometric_median.GeometricMedianFactory(
      smoothing=1e-3, mean_factory=_secure_mean_factory()
  ).create(*two_tensor_points.TYPES)
  assert 'federated_secure_sum_bitwidth' in privacy.intrinsic_uris(process.next)
  result, _ = two_tensor_points.aggregate_once(process, points, weights)
  np.testing.assert_allclose(result, reference.iterates[-1], atol=1e-5)


@pytest.mark.parametrize('mean_factory', [None, _secure_mean_factory()], ids=['default', 'secure'])
def test_computation_uses_only_secure_aggregation_intrinsics(mean_factory):
  process = geometric_median.GeometricMedianFactory(mean_factory=mean_factory).create(
      *two_tensor_points.TYPES
  )
  uris = privacy.intrinsic_uris(process.next)
  assert 'federated_broadcast' in uris  # the Weiszfeld passes really broadcast the iterate
  assert privacy.non_secure_intrinsics(process.next) == frozenset()


def test_intrinsic_walk_flags_a_gathering_computation():
  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def maximum(values):
    return tff.federated_max(values)

  assert privacy.non_secure_intrinsics(maximum) == {'federated_max'}


@pytest.mark.parametrize(
    'kwargs, error, message',
    [
        (dict(num_passes=0), ValueError, 'num_passes'),
        (dict(num_passes=2.5), TypeError, 'num_passes'),
        (dict(num_passes=True), TypeError, 'num_passes'),
        (dict(smoothing=0.0), ValueError, 'smoothing'),
        (dict(smoothing=-1.0), ValueError, 'smoothing'),
        (dict(smoothing=float('nan')), ValueError, 'smoothing'),
        (dict(smoothing='1e-6'), TypeError, 'smoothing'),
        (dict(init='median'), ValueError, 'init'),
        (dict(mean_factory=tff.aggregators.SumFactory()), TypeError, 'mean_factory'),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, error, message):
  with pytest.raises(error, match=message):
    geometric_median.GeometricMedianFactory(**kwargs)


@pytest.mark.parametrize(
    'value_type, weight_type, message',
    [
        (tff.TensorType(np.int32, [3]), two_tensor_points.WEIGHT_TYPE, 'value_type'),
        (tff.to_type([(np.float32, [3]), (np.int64, [2])]), two_tensor_points.WEIGHT_TYPE, 'value_type'),
        (tff.FederatedType(np.float32, tff.CLIENTS), two_tensor_points.WEIGHT_TYPE, 'value_type'),
        (tff.TensorType(np.float32, [3]), tff.TensorType(np.bool_), 'weight_type'),
        (tff.TensorType(np.float32, [3]), tff.TensorType(np.float32, [2]), 'weight_type'),
    ],
)
def test_bad_types_are_rejected_at_create(value_type, weight_type, message):
  with pytest.raises(TypeError, match=message):
    geometric_median.GeometricMedianFactory().create(value_type, weight_type)
