"""NormFilterFactory against a NumPy reference: k times the weighted quantile of the norms, then the inner rule."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators import privacy
from tff_robust.core import superquantile
from tests.aggregators.test_centered_clipping import _reference as centered_clipping_reference
from tests.aggregators import two_tensor_points


def _kept(points, weights, multiplier, level):
  """Weights with every client of norm > k * (weighted `level`-quantile of the norms, upper end) set to 0."""
  norms = np.linalg.norm(points, axis=1)
  threshold = multiplier * superquantile.weighted_quantile(norms, weights, level, end='upper')
  return np.where(norms <= threshold, weights, 0.0), threshold


def _cloud(seed):
  """Eight inliers of norms ~1-3 and two far points (norm ~40) with a fifth of the weight."""
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(10, 5))
  points[:2] = -20.0
  return points, rng.uniform(0.5, 1.5, size=10)


@pytest.mark.parametrize('multiplier,level', [(2.0, 0.5), (1.5, 0.7), (3.0, 0.5)])
def test_mean_of_the_kept_clients_matches_the_reference(multiplier, level):
  points, weights = _cloud(1)
  process = norm_filter.NormFilterFactory(
      tff.aggregators.MeanFactory(), multiplier, level
  ).create(*two_tensor_points.TYPES)
  _, result, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  kept, threshold = _kept(points, weights, multiplier, level)
  np.testing.assert_allclose(result, kept @ points / kept.sum(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(measurements['threshold'], threshold, rtol=3e-3)
  assert measurements['num_dropped_clients'] == np.count_nonzero(kept == 0)
  assert measurements['secure_average_calls'] == 2 + 1  # two histogram passes, one mean


def test_over_centered_clipping_two_rounds_match_the_reference_and_drop_the_far_points():
  tau, iterations, multiplier = 0.5, 3, 2.0
  process = norm_filter.NormFilterFactory(
      centered_clipping.CenteredClippingFactory(tau, iterations), multiplier
  ).create(*two_tensor_points.TYPES)
  state, expected = process.initialize(), np.zeros(5)
  for seed in (2, 3):
    points, weights = _cloud(seed)
    state, result, measurements = two_tensor_points.run_round(process, state, points, weights)
    kept, _ = _kept(points, weights, multiplier, 0.5)
    assert np.all(kept[:2] == 0)
    expected = centered_clipping_reference(points, kept, tau, iterations, expected)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    assert measurements['secure_average_calls'] == 2 + iterations


def test_nonfinite_clients_are_dropped():
  points, weights = _cloud(4)
  points[5, 1] = np.nan
  process = norm_filter.NormFilterFactory(tff.aggregators.MeanFactory(), 2.0).create(*two_tensor_points.TYPES)
  _, result, measurements = two_tensor_points.run_round(process, process.initialize(), points, weights)
  finite = np.arange(10) != 5
  kept, _ = _kept(points[finite], weights[finite], 2.0, 0.5)
  np.testing.assert_allclose(result, kept @ points[finite] / kept.sum(), rtol=1e-5, atol=1e-5)
  assert measurements['num_dropped_clients'] == 1 + np.count_nonzero(kept == 0)


def test_secure_configuration_sums_nothing_in_plain():
  tau, max_weight = 0.5, 2.0
  secure_mean = tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(max_weight),
      weight_sum_factory=tff.aggregators.SecureSumFactory(max_weight, 0.0), no_nan_division=True,
  )
  factory = norm_filter.NormFilterFactory(
      centered_clipping.CenteredClippingFactory(
          tau, 2, mean_factory=centered_clipping.secure_mean_factory(tau, max_weight),
          count_factory=tff.aggregators.SecureSumFactory(1, 0),
      ),
      2.0,
      quantile_factory=histogram_quantile.SecureHistogramQuantileFactory(
          0.5, mean_factory=secure_mean, count_factory=tff.aggregators.SecureSumFactory(1, 0)
      ),
      count_factory=tff.aggregators.SecureSumFactory(1, 0),
  )
  process = factory.create(*two_tensor_points.TYPES)
  assert not privacy.non_secure_intrinsics(process.next)
  privacy.assert_client_values_aggregated_securely(process.next)
  # The default configuration sums in plain (no gathering, but not secure sums either).
  plain = norm_filter.NormFilterFactory(centered_clipping.CenteredClippingFactory(tau, 2), 2.0)
  assert privacy.plain_client_aggregations(plain.create(*two_tensor_points.TYPES).next)


@pytest.mark.parametrize('kwargs,message', [
    (dict(multiplier=0.5), 'multiplier'), (dict(multiplier=2.0, level=0.0), 'level'),
    (dict(multiplier=2.0, level=1.5), 'level'),
])
def test_bad_arguments_are_refused_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    norm_filter.NormFilterFactory(tff.aggregators.MeanFactory(), **kwargs)
