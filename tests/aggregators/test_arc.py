"""AdaptiveRobustClippingFactory against the NumPy reference `core.arc` (the paper's Algorithm 1)."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import norm_clipping
from tff_robust.aggregators import privacy
from tff_robust.aggregators import quantile
from tff_robust.aggregators.defences import arc as arc_factory
from tff_robust.aggregators.defences import building
from tff_robust.aggregators.defences import implementations
from tff_robust.core import arc
from tests.aggregators import two_tensor_points

NUM_CLIENTS, NUM_BYZANTINE = 10, 2  # k = floor(2 * 0.2 * 8) = 3


def _cloud(seed):
  """Ten clients of norms 1.5-60 (all > 1: the histogram's relative bin width applies) and uneven weights."""
  rng = np.random.default_rng(seed)
  directions = rng.normal(size=(NUM_CLIENTS, 5))
  directions /= np.linalg.norm(directions, axis=1, keepdims=True)
  return directions * rng.uniform(1.5, 60.0, size=(NUM_CLIENTS, 1)), rng.uniform(0.5, 3.0, size=NUM_CLIENTS)


@pytest.fixture(scope='module')
def exact_process():
  level = arc.quantile_level(NUM_CLIENTS, NUM_BYZANTINE)
  factory = arc_factory.AdaptiveRobustClippingFactory(
      tff.aggregators.MeanFactory(), num_byzantine=NUM_BYZANTINE, num_clients=NUM_CLIENTS,
      quantile_factory=quantile.exact_quantile_factory(level),
  )
  return factory.create(*two_tensor_points.TYPES)


@pytest.fixture(scope='module')
def secure_quantile_process():
  factory = arc_factory.AdaptiveRobustClippingFactory(
      tff.aggregators.MeanFactory(), num_byzantine=NUM_BYZANTINE, num_clients=NUM_CLIENTS
  )
  return factory.create(*two_tensor_points.TYPES)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_with_the_exact_quantile_it_is_the_reference(exact_process, seed):
  points, weights = _cloud(seed)
  result, measurements = two_tensor_points.aggregate_once(exact_process, points, weights)
  expected = weights @ arc.adaptive_robust_clipping(points, NUM_BYZANTINE) / weights.sum()
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(measurements['threshold'], arc.threshold(np.linalg.norm(points, axis=1), NUM_BYZANTINE),
                             rtol=1e-6)
  assert measurements['num_clipped_clients'] == arc.clipped_count(NUM_CLIENTS, NUM_BYZANTINE) == 3
  assert measurements['secure_average_calls'] == 1 + 1  # a process without the measurement counts as one call


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_the_secure_quantile_clips_within_its_bin_below_the_reference(secure_quantile_process, seed):
  points, weights = _cloud(seed)
  result, measurements = two_tensor_points.aggregate_once(secure_quantile_process, points, weights)
  exact = arc.threshold(np.linalg.norm(points, axis=1), NUM_BYZANTINE)
  eta = float(measurements['threshold'])
  assert exact * (1 - 0.0028) <= eta <= exact  # the lower edge of a bin of relative width 0.27%
  np.testing.assert_allclose(result, weights @ arc.clip_to(points, eta) / weights.sum(), rtol=1e-5, atol=1e-5)
  # Every clipped update moves by at most C - eta, so the mean does too.
  reference = weights @ arc.adaptive_robust_clipping(points, NUM_BYZANTINE) / weights.sum()
  assert np.linalg.norm(result - reference) <= exact - eta + 1e-4
  assert measurements['secure_average_calls'] == 2 + 1  # two histogram passes, one mean
  assert measurements['num_clipped_clients'] == 3 + (eta < exact)  # and the client of norm C, if eta < C


def test_weights_do_not_change_which_clients_are_clipped(exact_process):
  """The paper counts vectors: a heavy client among the small norms does not move the threshold."""
  points, weights = _cloud(3)
  heavy = weights.copy()
  heavy[np.argmin(np.linalg.norm(points, axis=1))] = 100.0
  _, light_measurements = two_tensor_points.aggregate_once(exact_process, points, weights)
  _, heavy_measurements = two_tensor_points.aggregate_once(exact_process, points, heavy)
  assert light_measurements['threshold'] == heavy_measurements['threshold']


def test_a_nonfinite_client_is_left_to_the_inner_factory():
  """It does not count among the n, passes unclipped, and the inner factory (here a mean that drops non-finite
  clients: norm clipping at 1e30) leaves it out."""
  points, weights = _cloud(4)
  points[6, 2] = np.inf
  factory = arc_factory.AdaptiveRobustClippingFactory(
      norm_clipping.NormClippingFactory(1e30), num_byzantine=1, num_clients=9,
      quantile_factory=quantile.exact_quantile_factory(arc.quantile_level(9, 1)),
  )
  result, measurements = two_tensor_points.aggregate_once(factory.create(*two_tensor_points.TYPES), points, weights)
  finite = np.arange(NUM_CLIENTS) != 6
  expected = weights[finite] @ arc.adaptive_robust_clipping(points[finite], 1) / weights[finite].sum()
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
  assert measurements['num_clipped_clients'] == arc.clipped_count(9, 1)
  assert measurements['inner']['num_nonfinite_clients'] == 1


def test_f_zero_is_the_inner_factory_itself():
  factory = arc_factory.AdaptiveRobustClippingFactory(
      tff.aggregators.MeanFactory(), num_byzantine=0, num_clients=NUM_CLIENTS)
  process = factory.create(*two_tensor_points.TYPES)
  points, weights = _cloud(5)
  result, _ = two_tensor_points.aggregate_once(process, points, weights)
  np.testing.assert_allclose(result, weights @ points / weights.sum(), rtol=1e-5)


def test_with_secure_sums_every_client_value_is_securely_aggregated():
  factory = building.build_factory(
      'arc>gm', clients_per_round=NUM_CLIENTS, num_byzantine=NUM_BYZANTINE,
      secure_bounds=implementations.SecureBounds(value_bound=100.0, max_client_weight=3.0),
  )
  process = factory.create(*two_tensor_points.TYPES)
  assert not privacy.non_secure_intrinsics(process.next)
  privacy.assert_client_values_aggregated_securely(process.next)


@pytest.mark.parametrize('kwargs,message', [
    (dict(num_byzantine=5, num_clients=10), 'num_byzantine'), (dict(num_byzantine=0, num_clients=0), 'num_clients'),
])
def test_bad_counts_are_refused_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    arc_factory.AdaptiveRobustClippingFactory(tff.aggregators.MeanFactory(), **kwargs)
