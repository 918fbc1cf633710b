"""The NumPy superquantile reference against NumPy's quantiles, the LP of Property 2 and closed forms."""

import numpy as np
import pytest
from scipy import optimize

from tff_robust.core import superquantile


def _lp_superquantile(values, weights, theta):
  """max_{pi in P_theta} pi . x (Property 2's primal), solved by scipy's LP solver."""
  weights = np.asarray(weights, np.float64)
  result = optimize.linprog(
      -np.asarray(values, np.float64), A_eq=np.ones((1, len(values))), b_eq=[1.0],
      bounds=[(0.0, w / (theta * weights.sum())) for w in weights], method='highs',
  )
  assert result.success
  return -result.fun


@pytest.mark.parametrize('level', [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_unit_weights_match_numpy_inverted_cdf(level):
  values = np.random.default_rng(0).normal(size=37)
  expected = np.quantile(values, level, method='inverted_cdf')
  assert superquantile.weighted_quantile(values, np.ones(37), level) == expected


@pytest.mark.parametrize('level', [0.05, 0.3, 0.5, 0.77])
def test_integer_weights_equal_repeated_points(level):
  rng = np.random.default_rng(1)
  values, counts = rng.normal(size=20), rng.integers(1, 9, 20)
  expected = np.quantile(np.repeat(values, counts), level, method='inverted_cdf')
  assert superquantile.weighted_quantile(values, counts, level) == pytest.approx(expected)


def test_zero_weights_never_decide_and_ties_merge():
  values = np.array([5.0, 1.0, 3.0, 3.0, 100.0])
  weights = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
  # Positive weight on 1, 3, 3, 5: cumulative 1, 2, 3, 4 of 4.
  assert superquantile.weighted_quantile(values, weights, 0.5) == 3.0
  assert superquantile.weighted_quantile(values, weights, 1.0) == 5.0
  assert superquantile.weighted_quantile(values, weights, 0.5, end='upper') == 3.0
  assert superquantile.weighted_quantile(values, weights, 0.75, end='upper') == 5.0


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_a_third_of_the_weight_at_the_quantile_gives_an_interval_whose_ends_both_minimise(dtype):
  losses = np.array([2.0, 7.0, 4.0], dtype)
  weights = np.full(3, 20, dtype)
  theta = dtype(2.0 / 3.0)
  lower = superquantile.weighted_quantile(losses, weights, 1 - theta, end='lower')
  upper = superquantile.weighted_quantile(losses, weights, 1 - theta, end='upper')
  assert (lower, upper) == (2.0, 4.0)
  objective = lambda eta: superquantile.superquantile_objective(eta, losses, weights, theta)
  assert objective(lower) == pytest.approx(objective(upper), rel=1e-6)
  assert objective(3.0) == pytest.approx(objective(upper), rel=1e-6)
  assert objective(1.9) > objective(upper) and objective(4.1) > objective(upper)
  # The upper end keeps the worst theta of the weight: the two devices at or above 4.
  assert weights[losses >= upper].sum() / weights.sum() == pytest.approx(2 / 3)


@pytest.mark.parametrize('seed', range(5))
@pytest.mark.parametrize('theta', [0.1, 0.5, 0.8, 1.0])
def test_superquantile_is_the_lp_dual_and_the_quantile_minimises_the_objective(seed, theta):
  rng = np.random.default_rng(seed)
  values = np.round(rng.normal(size=12), 1)  # rounding makes ties
  weights = rng.integers(0, 5, 12).astype(float)
  weights[0] = 3.0
  value = superquantile.superquantile(values, weights, theta)
  assert value == pytest.approx(_lp_superquantile(values, weights, theta), abs=1e-9)
  grid = np.linspace(values.min() - 1, values.max() + 1, 4001)
  grid_min = min(superquantile.superquantile_objective(eta, values, weights, theta) for eta in grid)
  assert value <= grid_min + 1e-9


def test_conformity_one_is_the_weighted_mean():
  values, weights = np.array([1.0, 2.0, 10.0]), np.array([1.0, 2.0, 1.0])
  assert superquantile.superquantile(values, weights, 1.0) == pytest.approx(np.average(values, weights=weights))


@pytest.mark.parametrize('level', [0.2, 0.5, 0.9])
def test_corrected_mm_converges_to_the_quantile_with_unnormalised_weights(level):
  rng = np.random.default_rng(2)
  values, weights = rng.lognormal(size=40), rng.integers(100, 450, 40).astype(float)
  iterates = superquantile.mm_quantile_iterates(
      values, weights, level, initial_estimate=0.0, num_passes=300, relative_smoothing=1e-9
  )
  exact = superquantile.weighted_quantile(values, weights, level)
  assert iterates[-1][0] == pytest.approx(exact, rel=1e-5)
  losses = [superquantile.check_loss(mu, values, weights, level) for mu, _ in iterates]
  assert all(later <= earlier * (1 + 1e-9) for earlier, later in zip(losses, losses[1:]))


def _cohorts_with_zero_losses(seed, count):
  """Cohorts of 3 to 14 devices, about 30% with loss exactly 0 (a device the model fits), the others
  log-normal, with example counts 1 to 400 as weights."""
  rng = np.random.default_rng(seed)
  for _ in range(count):
    size = rng.integers(3, 15)
    losses = np.where(rng.random(size) < 0.3, 0.0, rng.lognormal(size=size))
    yield losses, rng.integers(1, 400, size).astype(float)


@pytest.mark.parametrize('level', [0.2, 0.5, 0.8])
def test_thirty_mm_passes_from_zero_nearly_minimise_the_check_loss_when_some_losses_are_zero(level):
  # The guard once was max(1e-12, s |mu|): at mu_0 = 0 a zero loss got weight 1e12 and mu doubled per pass
  # from ~1e-12 (values [0, 1, 1], tau = 1/2: 0.00107 after 30 passes). The check loss H_tau(mu) - H_tau(q)
  # is what a slow pass leaves: measured in units of W * mean |x - q| it must be below 0.1 for each cohort,
  # and the filter x >= mu - nu must agree with x >= q on 98% of the devices.
  gaps, agreements = [], []
  for losses, weights in _cohorts_with_zero_losses(int(level * 10), 300):
    estimate, guard = superquantile.mm_quantile_iterates(
        losses, weights, level, initial_estimate=0.0, num_passes=30, relative_smoothing=1e-2
    )[-1]
    exact = superquantile.weighted_quantile(losses, weights, level, end='upper')
    unit = weights @ np.abs(losses - exact)
    gap = superquantile.check_loss(estimate, losses, weights, level) - superquantile.check_loss(
        exact, losses, weights, level)
    gaps.append(gap / unit if unit > 0 else gap)
    agreements.append(np.mean((losses >= estimate - guard) == (losses >= exact)))
  assert max(gaps) < 0.1 and np.mean(agreements) >= 0.98, (max(gaps), np.mean(agreements))


def test_the_printed_eq_17_converges_to_the_median_whatever_the_level():
  # Regression test of the erratum: (2q - 1) without the factor sum(alpha) ignores tau.
  rng = np.random.default_rng(2)
  values, weights = rng.lognormal(size=40), rng.integers(100, 450, 40).astype(float)
  estimate = 0.0
  for _ in range(300):
    beta = weights / np.maximum(1e-9, np.abs(values - estimate))
    estimate = (beta @ values + (2 * 0.9 - 1)) / beta.sum()
  assert estimate == pytest.approx(superquantile.weighted_quantile(values, weights, 0.5), rel=1e-3)
  assert estimate < superquantile.weighted_quantile(values, weights, 0.9) / 2


def test_mm_keeps_the_estimate_when_no_weight_is_positive():
  iterates = superquantile.mm_quantile_iterates(
      [1.0, 2.0], [0.0, 0.0], 0.5, initial_estimate=3.0, num_passes=2, relative_smoothing=1e-2
  )
  assert [mu for mu, _ in iterates] == [3.0, 3.0]


@pytest.mark.parametrize('kwargs, message', [
    (dict(level=1.5), 'level must be in'),
    (dict(level=0.5, weights=[-1.0, 1.0]), 'weights must be >= 0'),
    (dict(level=0.5, weights=[0.0, 0.0]), 'at least one weight'),
    (dict(level=0.5, end='middle'), 'end must be'),
])
def test_bad_arguments_are_named(kwargs, message):
  arguments = dict(values=[1.0, 2.0], weights=[1.0, 1.0])
  arguments.update(kwargs)
  with pytest.raises(ValueError, match=message):
    superquantile.weighted_quantile(**arguments)


@pytest.mark.parametrize('theta', [0.0, -0.5, 1.5])
def test_conformity_level_outside_the_range_is_named(theta):
  with pytest.raises(ValueError, match=r'conformity_level must be in \(0, 1\]'):
    superquantile.superquantile([1.0, 2.0], [1.0, 1.0], theta)
  with pytest.raises(ValueError, match=r'conformity_level must be in \(0, 1\]'):
    superquantile.superquantile_objective(1.0, [1.0, 2.0], [1.0, 1.0], theta)
