"""The NumPy reference of MtFEEL against independent computations: bisection, finite differences, loops."""

import numpy as np
import pytest

from tff_robust.core import mtfeel


def _projection_by_bisection(v: np.ndarray) -> np.ndarray:
  """argmin_{x in simplex} ||x - v||_2 = max(v - tau, 0) with sum = 1, tau found by bisection (KKT)."""
  low, high = v.min() - 1.0, v.max()
  for _ in range(200):
    tau = (low + high) / 2
    if np.maximum(v - tau, 0).sum() > 1:
      low = tau
    else:
      high = tau
  return np.maximum(v - (low + high) / 2, 0)


def test_simplex_projection_matches_bisection_on_random_rows():
  rng = np.random.default_rng(0)
  v = rng.normal(scale=3.0, size=[50, 7])
  projected = mtfeel.project_to_simplex(v)
  np.testing.assert_allclose(projected, np.stack([_projection_by_bisection(row) for row in v]), atol=1e-9)
  assert np.all(projected >= 0)
  np.testing.assert_allclose(projected.sum(axis=1), 1.0, atol=1e-12)


def test_simplex_projection_is_the_identity_on_the_simplex_and_beats_other_simplex_points():
  rng = np.random.default_rng(1)
  points = rng.dirichlet(np.ones(5), size=20)
  np.testing.assert_allclose(mtfeel.project_to_simplex(points), points, atol=1e-12)
  v = rng.normal(size=5)
  best = np.linalg.norm(mtfeel.project_to_simplex(v) - v)
  assert all(np.linalg.norm(p - v) >= best - 1e-12 for p in points)


def _problem(seed=0, n=4):
  rng = np.random.default_rng(seed)
  return dict(
      losses=rng.uniform(0.1, 3.0, [n, n]),
      discrepancies=rng.uniform(0.0, 1.0, [n, n]),
      alpha=rng.dirichlet(np.ones(n), size=n),
      lambdas=rng.dirichlet(np.ones(n)),
      num_examples=rng.integers(5, 30, n).astype(float),
      pen_scale=2.5,
  )


def test_alpha_gradient_matches_central_differences_of_the_objective():
  problem = _problem()
  gradient = mtfeel.alpha_gradient(**problem)
  numeric = np.zeros_like(gradient)
  eps = 1e-6
  for index in np.ndindex(*gradient.shape):
    up, down = problem['alpha'].copy(), problem['alpha'].copy()
    up[index] += eps
    down[index] -= eps
    numeric[index] = (mtfeel.objective(**dict(problem, alpha=up)) - mtfeel.objective(**dict(problem, alpha=down))) / (2 * eps)
  np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)


def test_alpha_step_stays_on_the_simplex_and_decreases_the_objective():
  problem = _problem(seed=2)
  new_alpha = mtfeel.alpha_step(**problem, alpha_learning_rate=0.01)
  np.testing.assert_allclose(new_alpha.sum(axis=1), 1.0, atol=1e-12)
  assert mtfeel.objective(**dict(problem, alpha=new_alpha)) < mtfeel.objective(**problem)


def test_weighted_sign_sum_and_sign_step_match_loops():
  rng = np.random.default_rng(3)
  n, shape = 3, (2, 4)
  signs = np.where(rng.random((n, n, *shape)) < 0.5, -1.0, 1.0)
  alpha = rng.dirichlet(np.ones(n), size=n)
  lambdas, weights = np.full(n, 1 / n), rng.normal(size=(n, *shape))
  expected_sum = np.stack([sum(alpha[k, m] * signs[k, m] for m in range(n)) for k in range(n)])
  np.testing.assert_allclose(mtfeel.weighted_sign_sum(signs, alpha), expected_sum)
  gammas = np.array([0.0, 0.1, 0.2])
  expected = np.stack([weights[k] - 0.5 * (lambdas[k] * expected_sum[k] + gammas[k] * np.sign(weights[k]))
                       for k in range(n)])
  np.testing.assert_allclose(mtfeel.sign_step(weights, signs, alpha, lambdas, 0.5, gammas), expected)


def test_discrepancy_ascent_direction_increases_the_loss_gap_where_the_printed_eq8_decreases_it():
  rng = np.random.default_rng(4)
  x_j, y_j = rng.normal(size=(20, 3)), rng.normal(size=20)
  x_k, y_k = rng.normal(size=(20, 3)) + 1.0, rng.normal(size=20) - 2.0

  def loss_and_gradient(x, y, w):
    residual = x @ w - y
    return np.mean(residual ** 2), 2 * x.T @ residual / len(y)

  w = rng.normal(size=3)
  for _ in range(5):
    (loss_j, grad_j), (loss_k, grad_k) = loss_and_gradient(x_j, y_j, w), loss_and_gradient(x_k, y_k, w)
    gap = abs(loss_j - loss_k)
    w_next = w + 1e-3 * mtfeel.discrepancy_ascent_direction(loss_j, loss_k, grad_j, grad_k)
    next_gap = abs(loss_and_gradient(x_j, y_j, w_next)[0] - loss_and_gradient(x_k, y_k, w_next)[0])
    assert next_gap > gap
    # The printed (8): 2 (grad_j - grad_k) 1{L_k > L_j} in this orientation; it never ascends.
    printed = (grad_j - grad_k) * (loss_k > loss_j) - (grad_k - grad_j) * (loss_j <= loss_k)
    printed_gap = abs(loss_and_gradient(x_j, y_j, w + 1e-3 * printed)[0]
                      - loss_and_gradient(x_k, y_k, w + 1e-3 * printed)[0])
    assert printed_gap <= gap + 1e-12
    w = w_next


@pytest.mark.parametrize('gradient, expected', [([0.0, -0.0, 2.0, -1e-30], [1.0, 1.0, 1.0, -1.0])])
def test_sign_of_gradient_maps_zero_to_plus_one(gradient, expected):
  np.testing.assert_array_equal(mtfeel.sign_of_gradient(gradient), expected)
