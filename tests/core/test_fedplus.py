"""The NumPy Fed+ reference against numerical argmins, the Weiszfeld median, medians and the mean."""

import numpy as np
import pytest
from scipy import optimize

from tff_robust.core import fedplus
from tff_robust.core import weiszfeld

ROBUST_KINDS = ('l2', 'l1')


def _psi_over_sigma(theta, delta, kind):
  """Psi(theta) / sigma, written out from the paper's section 4.4.1 choices."""
  if kind == 'squared_l2':
    return 0.5 * delta * np.sum(theta**2)
  if kind == 'l2':
    return delta * np.linalg.norm(theta)
  return delta * np.sum(np.abs(theta))


def _prox_objective(theta, v, delta, kind):
  return _psi_over_sigma(theta, delta, kind) + 0.5 * np.sum((v - theta) ** 2)


def _numerical_prox(v, delta, kind):
  """Argmin of Psi/sigma + (1/2)||v - theta||^2 by Nelder-Mead from two starts, the better one kept."""
  best = None
  for start in (np.zeros_like(v), v):
    result = optimize.minimize(
        _prox_objective, start, args=(v, delta, kind), method='Nelder-Mead',
        options=dict(xatol=1e-11, fatol=1e-14, maxiter=40000, maxfev=40000),
    )
    if best is None or result.fun < best.fun:
      best = result
  return best.x


def _points(seed, num_points=11, dim=4, scale=1.0):
  return np.random.default_rng(seed).normal(scale=scale, size=(num_points, dim))


def _solve(points, delta, kind, **kwargs):
  kwargs.setdefault('solver', 'irls')
  kwargs.setdefault('tolerance', 1e-13)
  kwargs.setdefault('max_iterations', 100000)
  result = fedplus.aggregate(points, delta, kind, **kwargs)
  assert result.converged
  return result


# ---------------------------------------------------------------------------------------------------
# prox, residual and the Moreau envelope.


@pytest.mark.parametrize('kind', fedplus.PSI_KINDS)
@pytest.mark.parametrize(
    'v', [[0.3, -0.2, 0.05], [2.0, -1.5, 0.7], [0.02, -3.0, 0.4], [-0.5, -0.01, 1.2]]
)
def test_prox_is_the_numerical_argmin(kind, v):
  v, delta = np.array(v), 0.5
  closed_form = fedplus.prox(v, delta, kind)
  numerical = _numerical_prox(v, delta, kind)
  np.testing.assert_allclose(closed_form, numerical, atol=1e-6)
  # Nothing the generic solver found is better than the closed form.
  assert _prox_objective(closed_form, v, delta, kind) <= _prox_objective(numerical, v, delta, kind) + 1e-13


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_scalar_prox_matches_a_fine_grid(kind):
  delta = 0.3
  grid = np.linspace(-3, 3, 600001)  # Spacing 1e-5.
  for value in (-2.0, -0.31, -0.1, 0.0, 0.2, 0.29, 1.7):
    objective = delta * np.abs(grid) + 0.5 * (value - grid) ** 2
    closed_form = fedplus.prox(np.array([value]), delta, kind)[0]
    assert closed_form == pytest.approx(grid[np.argmin(objective)], abs=1e-5)


@pytest.mark.parametrize('kind', fedplus.PSI_KINDS)
def test_prox_plus_residual_is_the_input(kind):
  rng = np.random.default_rng(0)
  for scale in (0.01, 0.1, 1.0, 10.0):
    v = rng.normal(scale=scale, size=6)
    np.testing.assert_allclose(
        fedplus.prox(v, 0.4, kind) + fedplus.residual(v, 0.4, kind), v, rtol=1e-14, atol=1e-15
    )


def test_residuals_are_clipped_to_delta():
  rng = np.random.default_rng(1)
  delta = 0.25
  for scale in (0.01, 1.0, 100.0):
    v = rng.normal(scale=scale, size=8)
    l2 = fedplus.residual(v, delta, 'l2')
    assert np.linalg.norm(l2) == pytest.approx(min(delta, np.linalg.norm(v)))
    np.testing.assert_allclose(l2 / np.linalg.norm(l2), v / np.linalg.norm(v))  # Same direction.
    np.testing.assert_array_equal(fedplus.residual(v, delta, 'l1'), np.clip(v, -delta, delta))
  np.testing.assert_array_equal(fedplus.residual(np.zeros(3), delta, 'l2'), np.zeros(3))
  np.testing.assert_array_equal(fedplus.prox(np.zeros(3), delta, 'l2'), np.zeros(3))


@pytest.mark.parametrize('kind', fedplus.PSI_KINDS)
def test_objective_is_the_moreau_envelope_at_the_prox(kind):
  # Eq. (6) over sigma: Psihat(v)/sigma = Psi(theta*)/sigma + (1/2)||v - theta*||^2 with theta* = prox(v).
  rng = np.random.default_rng(2)
  delta = 0.7
  for scale in (0.05, 0.5, 5.0):
    v = rng.normal(scale=scale, size=5)
    theta = fedplus.prox(v, delta, kind)
    envelope = _prox_objective(theta, v, delta, kind)
    # A single point at v and w = 0 gives G(0) = Psihat(v) / sigma.
    objective = fedplus.aggregation_objective(np.zeros(5), v[np.newaxis], delta, kind)
    assert objective == pytest.approx(envelope, rel=1e-12)


def test_huber_pieces_and_derivative():
  delta = 0.5
  r = np.linspace(-3, 3, 1201)
  values = fedplus.huber(r, delta)
  inside = np.abs(r) <= delta
  np.testing.assert_allclose(values[inside], r[inside] ** 2 / 2)
  np.testing.assert_allclose(values[~inside], delta * np.abs(r[~inside]) - delta**2 / 2)
  step = 1e-6
  derivative = (fedplus.huber(r + step, delta) - fedplus.huber(r - step, delta)) / (2 * step)
  np.testing.assert_allclose(derivative, np.clip(r, -delta, delta), atol=1e-6)


# ---------------------------------------------------------------------------------------------------
# The aggregate: closed-form limits.


def test_squared_l2_aggregate_is_the_weighted_mean():
  points = _points(3, num_points=7, dim=5)
  weights = np.random.default_rng(4).uniform(0.1, 3.0, 7)
  for w in (None, weights):
    result = fedplus.aggregate(points, 0.3, 'squared_l2', weights=w)
    expected = np.average(points, axis=0, weights=w)
    np.testing.assert_allclose(result.aggregate, expected, rtol=1e-14, atol=1e-15)
    assert result.num_iterations == 0 and result.converged and result.step_norms == []
    np.testing.assert_allclose(
        fedplus.fixed_point_residual(result.aggregate, points, 0.3, 'squared_l2', w), 0, atol=1e-15
    )


@pytest.mark.parametrize('weighted', [False, True])
def test_l2_aggregate_is_the_weiszfeld_median_once_delta_is_below_every_distance(weighted):
  # Near the geometric median m all distances exceed delta, so G = delta sum_k a_k (||w_k - w|| - delta/2)
  # there and its minimiser is m itself.
  points = _points(5, num_points=9, dim=3)
  weights = np.random.default_rng(6).uniform(0.5, 2.0, 9) if weighted else np.ones(9)
  median = weiszfeld.smoothed_weiszfeld(
      points, weights, num_passes=3000, smoothing=1e-12, init='mean'
  ).iterates[-1]
  delta = 0.5 * np.min(np.linalg.norm(points - median, axis=1))
  result = _solve(points, delta, 'l2', weights=weights if weighted else None)
  np.testing.assert_allclose(result.aggregate, median, atol=1e-8)


def test_l2_aggregate_approaches_the_median_as_delta_shrinks():
  points = np.concatenate([_points(7, num_points=8, dim=3), [[4.0, 4.0, 4.0], [5.0, -3.0, 6.0]]])
  median = weiszfeld.smoothed_weiszfeld(
      points, np.ones(10), num_passes=3000, smoothing=1e-12, init='mean'
  ).iterates[-1]
  gaps = [np.linalg.norm(_solve(points, delta, 'l2').aggregate - median) for delta in (10, 3, 1, 0.3)]
  assert all(a > b for a, b in zip(gaps, gaps[1:]))
  assert gaps[0] > 0.1


@pytest.mark.parametrize('solver', fedplus.SOLVERS)
@pytest.mark.parametrize('weighted', [False, True])
def test_l2_aggregate_is_the_mean_when_delta_covers_every_point(solver, weighted):
  points = _points(8, num_points=6, dim=4)
  weights = np.random.default_rng(9).uniform(0.5, 2.0, 6) if weighted else None
  mean = np.average(points, axis=0, weights=weights)
  radius = np.max(np.linalg.norm(points - mean, axis=1))
  result = _solve(points, radius, 'l2', weights=weights, solver=solver)
  np.testing.assert_allclose(result.aggregate, mean, atol=1e-12)
  assert result.num_iterations == 1
  smaller = _solve(points, 0.9 * radius, 'l2', weights=weights, solver=solver)
  assert np.linalg.norm(smaller.aggregate - mean) > 1e-4


def test_l1_aggregate_is_the_median_for_odd_count_and_small_delta():
  points = _points(10, num_points=9, dim=5)
  ordered = np.sort(points, axis=0)
  delta = 0.4 * np.min(np.diff(ordered, axis=0))
  for solver in fedplus.SOLVERS:
    result = _solve(points, delta, 'l1', solver=solver)
    np.testing.assert_allclose(result.aggregate, np.median(points, axis=0), atol=1e-9)


@pytest.mark.parametrize('solver', fedplus.SOLVERS)
def test_l1_aggregate_lies_in_the_median_interval_for_even_count(solver):
  points = _points(11, num_points=10, dim=6)
  ordered = np.sort(points, axis=0)
  lower, upper = ordered[4], ordered[5]
  delta = 0.4 * np.min(np.diff(ordered, axis=0))
  aggregate = _solve(points, delta, 'l1', solver=solver).aggregate
  assert np.all(aggregate >= lower - 1e-9) and np.all(aggregate <= upper + 1e-9)
  # Whatever delta, the aggregate is within delta of that interval.
  for delta in (0.1, 0.5, 2.0):
    aggregate = _solve(points, delta, 'l1', solver=solver).aggregate
    assert np.all(aggregate >= lower - delta - 1e-9) and np.all(aggregate <= upper + delta + 1e-9)


@pytest.mark.parametrize('solver', fedplus.SOLVERS)
def test_l1_aggregate_is_the_mean_for_large_delta(solver):
  points = _points(12, num_points=8, dim=5)
  mean = points.mean(axis=0)
  delta = np.max(np.abs(points - mean))
  np.testing.assert_allclose(_solve(points, delta, 'l1', solver=solver).aggregate, mean, atol=1e-12)


# ---------------------------------------------------------------------------------------------------
# The aggregate: solvers, objective, weights.


@pytest.mark.parametrize('kind', ROBUST_KINDS)
@pytest.mark.parametrize('weighted', [False, True])
def test_both_solvers_reach_the_same_fixed_point(kind, weighted):
  points = np.concatenate([_points(13, num_points=10, dim=4), [[6.0, -4.0, 3.0, 8.0]]])
  weights = np.random.default_rng(14).uniform(0.2, 3.0, 11) if weighted else None
  results = [_solve(points, 0.4, kind, weights=weights, solver=s) for s in fedplus.SOLVERS]
  for result in results:
    residual = fedplus.fixed_point_residual(result.aggregate, points, 0.4, kind, weights)
    assert np.linalg.norm(residual) < 1e-10
  np.testing.assert_allclose(results[0].aggregate, results[1].aggregate, atol=1e-8)


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_aggregate_matches_a_generic_minimiser_of_the_objective(kind):
  points = _points(15, num_points=9, dim=3, scale=2.0)
  weights = np.random.default_rng(16).uniform(0.5, 2.0, 9)
  result = _solve(points, 0.5, kind, weights=weights)
  solution = optimize.minimize(
      fedplus.aggregation_objective, points.mean(0), args=(points, 0.5, kind, weights),
      method='Nelder-Mead', options=dict(xatol=1e-11, fatol=1e-15, maxiter=20000),
  )
  np.testing.assert_allclose(result.aggregate, solution.x, atol=1e-6)
  assert fedplus.aggregation_objective(result.aggregate, points, 0.5, kind, weights) <= solution.fun + 1e-14


@pytest.mark.parametrize('kind', ROBUST_KINDS)
@pytest.mark.parametrize('solver', fedplus.SOLVERS)
def test_objective_never_increases_along_the_iterates(kind, solver):
  points = np.concatenate([_points(17, num_points=9, dim=4), [[20.0, 0.0, -5.0, 3.0]]])
  weights = np.random.default_rng(18).uniform(0.5, 2.0, 10)
  result = _solve(points, 0.2, kind, weights=weights, solver=solver)
  objectives = [fedplus.aggregation_objective(w, points, 0.2, kind, weights) for w in result.iterates]
  assert all(b <= a + 1e-13 for a, b in zip(objectives, objectives[1:]))
  assert objectives[-1] < objectives[0]


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_fixed_point_steps_are_bounded_by_delta(kind):
  points = _points(19, num_points=11, dim=5)
  points[0] += 1e3
  delta = 0.1
  result = _solve(points, delta, kind, solver='fixed_point', tolerance=1e-10)
  steps = np.diff(np.array(result.iterates), axis=0)
  if kind == 'l2':
    assert np.max(np.linalg.norm(steps, axis=1)) <= delta * (1 + 1e-12)
  else:
    assert np.max(np.abs(steps)) <= delta * (1 + 1e-12)
  np.testing.assert_allclose(result.step_norms, np.linalg.norm(steps, axis=1))
  # Starting at the mean, ~91 per coordinate away, needs at least distance / (max step) iterations.
  distance = np.linalg.norm(result.aggregate - points.mean(0))
  max_step = delta if kind == 'l2' else delta * np.sqrt(points.shape[1])
  assert result.num_iterations >= distance / max_step
  # A far outlier defeats a small budget.
  points[0] += 1e6
  capped = fedplus.aggregate(points, delta, kind, solver='fixed_point', max_iterations=1000)
  assert not capped.converged and capped.num_iterations == 1000 and len(capped.iterates) == 1001


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_irls_bounds_the_influence_of_a_far_outlier(kind):
  points = _points(20, num_points=11, dim=5)
  delta = 0.1
  clean = _solve(points, delta, kind).aggregate
  shifts, mean_shifts = [], []
  for distance in (10.0, 1e3, 1e6):
    moved = points.copy()
    moved[0] += distance
    result = fedplus.aggregate(moved, delta, kind, solver='irls')
    assert result.converged and result.num_iterations < 100
    shifts.append(np.linalg.norm(result.aggregate - clean))
    mean_shifts.append(np.linalg.norm(moved.mean(0) - points.mean(0)))
  # Bounded and essentially constant: a far outlier moves the aggregate no more than a near one does.
  assert max(shifts) < 1.0 and max(shifts) < 1.25 * min(shifts)
  assert shifts[2] == pytest.approx(shifts[1], rel=0.01)
  assert max(shifts) < 0.5 * mean_shifts[0] and mean_shifts[-1] > 1e5


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_integer_weights_equal_repeated_points_and_zero_weight_removes_a_point(kind):
  points = _points(21, num_points=6, dim=3)
  counts = np.array([1, 3, 2, 1, 4, 2])
  weighted = _solve(points, 0.3, kind, weights=counts).aggregate
  repeated = _solve(np.repeat(points, counts, axis=0), 0.3, kind).aggregate
  np.testing.assert_allclose(weighted, repeated, atol=1e-9)
  outlier = np.concatenate([points, [[50.0, 50.0, 50.0]]])
  dropped = _solve(outlier, 0.3, kind, weights=np.append(np.ones(6), 0.0)).aggregate
  np.testing.assert_allclose(dropped, _solve(points, 0.3, kind).aggregate, atol=1e-9)


@pytest.mark.parametrize('kind', ROBUST_KINDS)
def test_aggregate_is_translation_equivariant_and_warm_starts_agree(kind):
  # A(W - c) = A(W) - c lets the TFF process aggregate model deltas.
  points = _points(22, num_points=7, dim=4)
  shift = np.array([3.0, -100.0, 0.5, 7.0])
  result = _solve(points, 0.3, kind)
  np.testing.assert_allclose(_solve(points + shift, 0.3, kind).aggregate, result.aggregate + shift, atol=1e-9)
  warm = _solve(points, 0.3, kind, initial=np.full(4, 5.0))
  np.testing.assert_allclose(warm.iterates[0], np.full(4, 5.0))
  np.testing.assert_allclose(warm.aggregate, result.aggregate, atol=1e-9)
  assert len(result.iterates) == result.num_iterations + 1 == len(result.step_norms) + 1
  np.testing.assert_allclose(result.iterates[0], points.mean(0))


# ---------------------------------------------------------------------------------------------------
# The misprinted soft-threshold of eq. (19).


def test_printed_soft_threshold_differs_only_on_negative_entries():
  v = np.array([2.0, 0.05, 0.0, -0.05, -2.0])
  np.testing.assert_allclose(fedplus.soft_threshold_as_printed(v, 0.1), [1.9, 0.0, 0.0, 0.05, 0.0])
  np.testing.assert_allclose(fedplus.prox(v, 0.1, 'l1'), [1.9, 0.0, 0.0, 0.0, -1.9])
  positive = np.abs(v)
  np.testing.assert_array_equal(
      fedplus.soft_threshold_as_printed(positive, 0.1), fedplus.prox(positive, 0.1, 'l1')
  )


def test_printed_soft_threshold_gives_a_wrong_aggregate():
  points = _points(23, num_points=11, dim=5) - 1.0  # Mostly negative coordinates.
  delta = 0.1
  correct = _solve(points, delta, 'l1', solver='fixed_point').aggregate
  mean = points.mean(0)
  printed_step = lambda w: mean - fedplus.soft_threshold_as_printed(points - w, delta).mean(0) - w
  # The correct aggregate is a fixed point of (22) with the true prox but not with the printed one.
  assert np.linalg.norm(fedplus.fixed_point_residual(correct, points, delta, 'l1')) < 1e-10
  assert np.linalg.norm(printed_step(correct)) > 10 * delta / points.shape[0]
  # Iterating (22) with the printed threshold ends far from the correct aggregate.
  w = mean
  for _ in range(2000):
    w = w + printed_step(w)
  assert np.max(np.abs(w - correct)) > 0.3


# ---------------------------------------------------------------------------------------------------
# Argument checks.


@pytest.mark.parametrize(
    'kwargs, name',
    [
        (dict(delta=0.0), 'delta'),
        (dict(delta=-1.0), 'delta'),
        (dict(delta=np.inf), 'delta'),
        (dict(delta=np.nan), 'delta'),
        (dict(delta='a'), 'delta'),
        (dict(kind='huber'), 'kind'),
        (dict(solver='newton'), 'solver'),
        (dict(points=np.ones(3)), 'points'),
        (dict(points=np.ones((0, 3))), 'points'),
        (dict(points=np.array([[1.0, np.nan, 0.0]])), 'points'),
        (dict(weights=np.ones(4)), 'weights'),
        (dict(weights=-np.ones(3)), 'weights'),
        (dict(weights=np.zeros(3)), 'weights'),
        (dict(weights=np.array([1.0, np.inf, 1.0])), 'weights'),
        (dict(max_iterations=0), 'max_iterations'),
        (dict(max_iterations=2.5), 'max_iterations'),
        (dict(max_iterations=True), 'max_iterations'),
        (dict(tolerance=-1e-3), 'tolerance'),
        (dict(tolerance=np.nan), 'tolerance'),
        (dict(initial=np.ones(2)), 'initial'),
        (dict(initial=np.array([0.0, np.inf, 0.0])), 'initial'),
    ],
)
def test_aggregate_rejects_bad_arguments(kwargs, name):
  arguments = dict(points=np.arange(9.0).reshape(3, 3), delta=0.5, kind='l2')
  arguments.update(kwargs)
  with pytest.raises(ValueError, match=name):
    fedplus.aggregate(**arguments)


def test_operators_reject_bad_arguments():
  points = np.ones((3, 2))
  with pytest.raises(ValueError, match='delta'):
    fedplus.prox(np.ones(2), 0.0, 'l1')
  with pytest.raises(ValueError, match='kind'):
    fedplus.residual(np.ones(2), 0.5, 'linf')
  with pytest.raises(ValueError, match='v must be a 1-D'):
    fedplus.prox(np.ones((2, 2)), 0.5, 'l2')
  with pytest.raises(ValueError, match='delta'):
    fedplus.huber(1.0, -0.5)
  with pytest.raises(ValueError, match='delta'):
    fedplus.soft_threshold_as_printed(np.ones(2), np.inf)
  with pytest.raises(ValueError, match='w must have length'):
    fedplus.aggregation_objective(np.ones(3), points, 0.5, 'l2')
  with pytest.raises(ValueError, match='weights'):
    fedplus.fixed_point_residual(np.ones(2), points, 0.5, 'l1', weights=[1.0, -1.0, 1.0])
