"""CenteredClippingFactory against an independent NumPy reference of Karimireddy et al. (2021), Algorithm 2."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import privacy
from tests.aggregators import two_tensor_points


def _reference(points, weights, tau, num_iterations, center):
  """v <- v + sum_i a_i clip(w_i - v, tau) / sum_i a_i, `num_iterations` times from `center`."""
  v = np.array(center, np.float64)
  for _ in range(num_iterations):
    residuals = points - v
    norms = np.linalg.norm(residuals, axis=1)
    factors = np.minimum(1.0, tau / np.maximum(norms, 1e-300))
    v = v + (weights[:, None] * factors[:, None] * residuals).sum(axis=0) / weights.sum()
  return v


def _cloud(seed):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(8, 5))
  points[:2] += 20.0  # two outliers
  return points, rng.uniform(0.5, 3.0, size=8)


def test_two_rounds_match_the_numpy_reference_centred_at_the_previous_aggregate():
  tau, num_iterations = 0.8, 3
  process = centered_clipping.CenteredClippingFactory(tau, num_iterations).create(*two_tensor_points.TYPES)
  state = process.initialize()
  expected = np.zeros(5)
  for seed in (1, 2):
    points, weights = _cloud(seed)
    state, result, measurements = two_tensor_points.run_round(process, state, points, weights)
    expected = _reference(points, weights, tau, num_iterations, expected)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    assert measurements['secure_average_calls'] == num_iterations
    assert measurements['num_nonfinite_clients'] == 0
  # The outliers move v by at most tau * their weight share per iteration: v stays near the inliers.
  assert np.linalg.norm(expected) < np.linalg.norm(np.average(points, axis=0, weights=weights))


def test_clipped_count_is_the_clients_beyond_tau_at_the_last_iterate():
  tau, num_iterations = 0.5, 2
  points, weights = _cloud(3)
  process = centered_clipping.CenteredClippingFactory(tau, num_iterations).create(*two_tensor_points.TYPES)
  _, _, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  center = _reference(points, weights, tau, num_iterations - 1, np.zeros(5))
  assert measurements['clipped_count'] == np.count_nonzero(np.linalg.norm(points - center, axis=1) > tau)


def test_clients_of_weight_zero_are_not_counted_as_clipped():
  # As a norm filter before centered clipping leaves its dropped clients (zeros with weight 0).
  tau, num_iterations = 0.5, 4
  points, weights = _cloud(3)
  points += 3.0  # the iterate moves away from the origin, where the dropped clients' zeros sit
  points[:2], weights[:2] = 0.0, 0.0
  process = centered_clipping.CenteredClippingFactory(tau, num_iterations).create(*two_tensor_points.TYPES)
  _, _, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  center = _reference(points[2:], weights[2:], tau, num_iterations - 1, np.zeros(5))
  assert np.linalg.norm(center) > tau  # so the zero rows would be beyond tau
  assert measurements['clipped_count'] == np.count_nonzero(np.linalg.norm(points[2:] - center, axis=1) > tau)


def test_nonfinite_clients_are_left_out_and_counted():
  points, weights = _cloud(4)
  points[5, 1] = np.inf
  process = centered_clipping.CenteredClippingFactory(1.0, 2).create(*two_tensor_points.TYPES)
  _, result, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  keep = np.arange(8) != 5
  np.testing.assert_allclose(result, _reference(points[keep], weights[keep], 1.0, 2, np.zeros(5)), rtol=1e-5,
                             atol=1e-5)
  assert measurements['num_nonfinite_clients'] == 1


def test_secure_configuration_sums_nothing_in_plain_and_matches():
  tau, max_weight = 1.0, 3.0
  factory = centered_clipping.CenteredClippingFactory(
      tau, 2, mean_factory=centered_clipping.secure_mean_factory(tau, max_weight),
      count_factory=tff.aggregators.SecureSumFactory(1, 0),
  )
  process = factory.create(*two_tensor_points.TYPES)
  assert privacy.non_secure_intrinsics(process.next) == frozenset()
  privacy.assert_client_values_aggregated_securely(process.next)
  points, weights = _cloud(5)
  _, result, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  np.testing.assert_allclose(result, _reference(points, weights, tau, 2, np.zeros(5)), atol=1e-4)
  assert measurements['mean']['mean_value']['secure_upper_clipped_count'] == 0
  assert measurements['mean']['mean_value']['secure_lower_clipped_count'] == 0


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(clip_radius=0.0), r'clip_radius must be a finite number > 0'),
        (dict(clip_radius=float('nan')), r'clip_radius must be a finite number > 0'),
        (dict(clip_radius=-1.0), r'clip_radius must be a finite number > 0'),
        (dict(num_iterations=0), r'num_iterations must be an integer >= 1'),
        (dict(num_iterations=1.5), r'num_iterations must be an integer >= 1'),
    ],
)
def test_bad_arguments_name_the_argument_and_range(kwargs, message):
  with pytest.raises(ValueError, match=message):
    centered_clipping.CenteredClippingFactory(**(dict(clip_radius=1.0) | kwargs))
