"""The NumPy Weiszfeld reference against closed forms and a generic convex solver."""

import numpy as np
import pytest
from scipy import optimize

from tff_robust.core import weiszfeld


def test_symmetric_points_have_their_centre_as_median():
  centre = np.array([3.0, -2.0, 1.0])
  offsets = np.array([[1, 0, 0], [-1, 0, 0], [0, 2, 0], [0, -2, 0], [0, 0, 5], [0, 0, -5]], float)
  trace = weiszfeld.smoothed_weiszfeld(
      centre + offsets, np.ones(6), num_passes=30, smoothing=1e-9, init='zero'
  )
  np.testing.assert_allclose(trace.iterates[-1], centre, atol=1e-6)


def test_weighted_collinear_points_have_the_weighted_median():
  # On a line the geometric median is the weighted median: weight 1, 1, 3 at 0, 1, 10 -> 10.
  points = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
  trace = weiszfeld.smoothed_weiszfeld(
      points, np.array([1.0, 1.0, 3.0]), num_passes=200, smoothing=1e-9, init='mean'
  )
  np.testing.assert_allclose(trace.iterates[-1], [10.0, 0.0], atol=1e-4)


def test_matches_a_generic_minimiser_of_the_objective():
  rng = np.random.default_rng(3)
  points, weights = rng.normal(size=(15, 4)), rng.uniform(0.5, 2.0, 15)
  trace = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=200, smoothing=1e-9, init='mean')
  solution = optimize.minimize(
      lambda v: weiszfeld.geometric_median_objective(v, points, weights), points.mean(0),
      method='Nelder-Mead', options=dict(xatol=1e-10, fatol=1e-12, maxiter=20000),
  )
  np.testing.assert_allclose(trace.iterates[-1], solution.x, atol=1e-5)


def test_objective_decreases_and_iterates_count_oracle_calls():
  rng = np.random.default_rng(0)
  points = np.concatenate([rng.normal(size=(30, 5)), 100 + rng.normal(size=(10, 5))])
  trace = weiszfeld.smoothed_weiszfeld(points, np.ones(40), num_passes=6, smoothing=1e-6, init='mean')
  assert len(trace.iterates) == 6 and len(trace.objectives) == 5
  assert all(a > b for a, b in zip(trace.objectives, trace.objectives[1:]))


def test_one_step_from_zero_is_the_inverse_norm_weighted_mean():
  rng = np.random.default_rng(1)
  points, weights = rng.normal(size=(7, 3)), rng.uniform(1, 2, 7)
  beta = weights / np.linalg.norm(points, axis=1)
  trace = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=1, smoothing=1e-6, init='zero')
  np.testing.assert_allclose(trace.iterates[0], beta @ points / beta.sum())


def test_unknown_init_is_rejected():
  with pytest.raises(ValueError, match='init'):
    weiszfeld.smoothed_weiszfeld(np.ones((2, 2)), np.ones(2), num_passes=1, smoothing=1e-6, init='x')
