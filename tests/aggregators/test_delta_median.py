"""DeltaMedianFactory against the NumPy reference of Fed+'s iterations (16)/(22) and the IRLS solver."""

import functools

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import delta_median
from tff_robust.core import fedplus
from tests.aggregators import two_tensor_points


@functools.lru_cache(maxsize=None)
def _process(norm, solver, delta=0.5, max_iterations=12, tolerance=0.0):
  factory = delta_median.DeltaMedianFactory(
      norm, delta, solver=solver, max_iterations=max_iterations, tolerance=tolerance
  )
  return factory.create(*two_tensor_points.TYPES)


def _cloud(seed, num_points=7, outlier=20.0):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(num_points, 5))
  points[0] += outlier
  return points, rng.uniform(0.5, 3.0, num_points)


@pytest.mark.parametrize('norm', ['l2', 'l1'])
@pytest.mark.parametrize('solver', ['fixed_point', 'irls'])
def test_matches_the_numpy_iterations_step_for_step(norm, solver):
  points, weights = _cloud(0)
  kind = norm
  reference = fedplus.aggregate(points, 0.5, kind, weights=weights, solver=solver, max_iterations=12,
                                tolerance=0.0)
  result, measurements = two_tensor_points.aggregate_once(_process(norm, solver), points, weights)
  np.testing.assert_allclose(result, reference.aggregate, rtol=1e-5, atol=1e-5)
  assert measurements['iterations'] == 12
  assert measurements['secure_average_calls'] == 13
  np.testing.assert_allclose(measurements['step_norm'], reference.step_norms[-1], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize('norm', ['l2', 'l1'])
def test_irls_reaches_the_fixed_point_of_eq_49(norm):
  points, weights = _cloud(1)
  process = _process(norm, 'irls', max_iterations=60, tolerance=1e-6)
  result, measurements = two_tensor_points.aggregate_once(process, points, weights)
  assert measurements['converged'] == 1
  assert measurements['iterations'] < 60
  residual = fedplus.fixed_point_residual(result, points, 0.5, norm, weights=weights)
  assert np.max(np.abs(residual)) < 1e-4
  exact = fedplus.aggregate(points, 0.5, norm, weights=weights, solver='fixed_point', max_iterations=20000)
  np.testing.assert_allclose(result, exact.aggregate, atol=1e-4)


def test_a_far_outlier_does_not_stall_the_irls_solver():
  clean, weights = _cloud(2, outlier=0.0)
  process = _process('l2', 'irls', delta=0.1, max_iterations=60, tolerance=1e-5)
  clean_result, _ = two_tensor_points.aggregate_once(process, clean, weights)
  shifts = []
  for distance in (10.0, 1e3, 1e6):
    points = clean.copy()
    points[0] += distance
    result, measurements = two_tensor_points.aggregate_once(process, points, weights)
    assert measurements['converged'] == 1, distance
    shifts.append(np.linalg.norm(result - clean_result))
  assert max(shifts) < 1.0
  assert max(shifts) < 1.25 * min(shifts)  # bounded influence: the shift does not grow with the distance


def test_the_fixed_point_iteration_moves_at_most_delta_per_step():
  points, weights = _cloud(3, outlier=1e3)
  mean = np.average(points, axis=0, weights=weights)
  result, measurements = two_tensor_points.aggregate_once(
      _process('l2', 'fixed_point', delta=0.5, max_iterations=12), points, weights
  )
  assert measurements['converged'] == 0
  assert np.linalg.norm(result - mean) <= 12 * 0.5 + 1e-4


def test_nonfinite_clients_are_dropped_and_counted():
  points, weights = _cloud(4)
  poisoned = points.copy()
  poisoned[2, 1] = np.nan
  process = _process('l1', 'irls', max_iterations=40, tolerance=1e-6)
  result, measurements = two_tensor_points.aggregate_once(process, poisoned, weights)
  keep = np.arange(len(points)) != 2
  expected = fedplus.aggregate(points[keep], 0.5, 'l1', weights=weights[keep], solver='irls',
                               max_iterations=200, tolerance=1e-9)
  assert measurements['num_nonfinite_clients'] == 1
  np.testing.assert_allclose(result, expected.aggregate, atol=1e-4)


def test_all_equal_values_aggregate_to_that_value():
  points = np.tile(np.arange(5.0), (4, 1))
  result, measurements = two_tensor_points.aggregate_once(_process('l2', 'irls'), points, np.ones(4))
  np.testing.assert_allclose(result, np.arange(5.0), atol=1e-6)
  assert measurements['converged'] == 1


@pytest.mark.parametrize('kwargs, message', [
    (dict(norm='l3', delta=0.1), 'norm'),
    (dict(norm='l2', delta=0.0), 'delta'),
    (dict(norm='l2', delta=float('inf')), 'delta'),
    (dict(norm='l2', delta=0.1, solver='newton'), 'solver'),
    (dict(norm='l2', delta=0.1, max_iterations=0), 'max_iterations'),
    (dict(norm='l2', delta=0.1, tolerance=-1.0), 'tolerance'),
])
def test_bad_arguments_are_rejected_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    delta_median.DeltaMedianFactory(**kwargs)


def test_sum_factory_must_be_unweighted():
  with pytest.raises(TypeError, match='sum_factory'):
    delta_median.DeltaMedianFactory('l2', 0.1, sum_factory=tff.aggregators.MeanFactory())
