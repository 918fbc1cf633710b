"""The NumPy references of the attacks (`tff_robust.core.attacks`) against their papers' defining properties, and
the catalog's spelling of attack specs."""

import math

import numpy as np
import pytest

from tff_robust.core import robust_statistics
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import directions
from tff_robust.core.attacks import fang
from tff_robust.core.attacks import honest_statistics
from tff_robust.core.attacks import line_search
from tff_robust.core.attacks import mimic
from tff_robust.core.attacks import norm_aware
from tff_robust.core.attacks import perturbation_search
from tff_robust.core.attacks import rop


def _cohort(seed, m=10, d=7, num_corrupted=3):
  rng = np.random.default_rng(seed)
  updates = rng.normal(0.3, 1.0, size=(m, d))
  return updates, rng.uniform(1, 3, m), np.arange(m) < num_corrupted


def _squared(a, b):
  return np.sum((np.asarray(a)[:, None] - np.asarray(b)[None]) ** 2, axis=-1)


def _gamma_and_perturbation(objective, direction, seed):
  """The attack x_m = mu + gamma p of `objective`, checked to lie on that line; (honest rows, mu, gamma, p)."""
  updates, weights, corrupted = _cohort(seed)
  x = perturbation_search.target(updates, weights, corrupted, objective, direction, 10.0, 1e-5)
  mean, std = honest_statistics.mean_and_std(updates, weights, corrupted)
  p = directions.perturbation(direction, mean, std)
  gamma = np.dot(x - mean, p) / np.dot(p, p)
  np.testing.assert_allclose(x, mean + gamma * p, atol=1e-12)
  return updates[~corrupted], mean, gamma, p


@pytest.mark.parametrize('direction', catalog.MIN_MAX_DIRECTIONS)
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_min_max_stays_within_the_largest_honest_pairwise_distance_and_is_the_largest_such_gamma(direction, seed):
  honest, mean, gamma, p = _gamma_and_perturbation('min_max', direction, seed)
  threshold = _squared(honest, honest).max()
  assert _squared((mean + gamma * p)[None], honest).max() <= threshold
  assert gamma > 0.1  # the search found a non-trivial gamma ...
  assert _squared((mean + (gamma + 1e-4) * p)[None], honest).max() > threshold  # ... and (nearly) the largest


@pytest.mark.parametrize('direction', catalog.MIN_MAX_DIRECTIONS)
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_min_sum_keeps_its_sum_of_squared_distances_within_the_honest_maximum(direction, seed):
  honest, mean, gamma, p = _gamma_and_perturbation('min_sum', direction, seed)
  threshold = _squared(honest, honest).sum(axis=1).max()
  assert _squared((mean + gamma * p)[None], honest).sum() <= threshold
  assert _squared((mean + (gamma + 1e-4) * p)[None], honest).sum() > threshold


def test_halving_search_is_the_papers_algorithm_1():
  """gamma_init = 10: the first probes are 10, then 15 or 5, ...; it converges to the boundary of `holds`, and
  stays within [0, 2 gamma_init)."""
  probes = []
  found = perturbation_search.halving_search(lambda g: probes.append(g) or g <= 3.7, 10.0, 1e-5)
  assert probes[:4] == [10.0, 5.0, 2.5, 3.75]
  assert 3.7 - 2e-5 <= found <= 3.7
  assert perturbation_search.halving_search(lambda g: True, 10.0, 1e-5) == pytest.approx(20.0, abs=1e-4)
  assert perturbation_search.halving_search(lambda g: False, 10.0, 1e-5) == 0.0


@pytest.mark.parametrize('direction', catalog.NORM_AWARE_DIRECTIONS)
@pytest.mark.parametrize('c', [0.5, 1.425])
def test_norm_aware_update_has_the_asked_norm_and_its_attack_s_direction(direction, c):
  updates, weights, corrupted = _cohort(3)
  x = norm_aware.target(updates, weights, corrupted, direction, c)
  honest_norms = np.linalg.norm(updates[~corrupted], axis=1)
  w = weights[~corrupted]
  order = np.argsort(honest_norms)
  cumulative = np.cumsum(w[order]) / w.sum()
  lower = honest_norms[order][np.argmax(cumulative >= 0.5)]
  upper = honest_norms[order][len(order) - 1 - np.argmax((np.cumsum(w[order][::-1]) / w.sum() >= 0.5))]
  np.testing.assert_allclose(np.linalg.norm(x), c * (lower + upper) / 2, rtol=1e-12)
  t = {'omniscient': directions.omniscient_target(updates, weights, corrupted),
       'ipm': directions.ipm_target(updates, weights, corrupted, 1.0),
       'alie': directions.alie_target(updates, weights, corrupted)}[direction]
  np.testing.assert_allclose(x / np.linalg.norm(x), t / np.linalg.norm(t), atol=1e-12)


def test_fang_values_lie_beyond_the_honest_extreme_opposite_to_the_honest_mean_sign():
  updates, weights, corrupted = _cohort(4, d=40)
  updates[:, :5] *= -3  # both signs of mean and of the extremes
  honest = updates[~corrupted]
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  low, high = fang.trimmed_mean_bounds(updates, weights, corrupted, 2.0)
  assert np.all(low <= high)
  down, up = mean > 0, mean < 0
  np.testing.assert_array_equal(high[down], honest.min(axis=0)[down])
  np.testing.assert_array_equal(low[up], honest.max(axis=0)[up])
  # within the factor b = 2 of the extreme
  np.testing.assert_allclose(np.abs(high - low)[down], np.abs(honest.min(axis=0))[down] / 2 * np.where(
      honest.min(axis=0)[down] > 0, 1, 2))


@pytest.mark.parametrize('seed', range(5))
def test_fang_moves_the_median_and_trimmed_mean_against_the_honest_mean_sign(seed):
  updates, weights, corrupted = _cohort(seed, m=11, d=30, num_corrupted=4)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  low, high = fang.trimmed_mean_bounds(updates, weights, corrupted, 2.0)
  attacked = updates.copy()
  attacked[corrupted] = fang.trimmed_mean_values(low, high, np.random.default_rng(seed).uniform(size=(4, 30)))
  for rule in (lambda p: robust_statistics.weighted_coordinate_median(p, weights),
               lambda p: robust_statistics.coordinate_trimmed_mean(p, weights, 0.3)):
    shift = rule(attacked) - rule(updates)
    assert np.all(shift * np.sign(mean) <= 1e-12)
    assert np.mean(shift * np.sign(mean) < 0) > 0.5  # and strictly on most coordinates


@pytest.mark.parametrize('seed', range(4))
def test_fang_krum_gets_its_update_selected_by_krum(seed):
  updates, weights, corrupted = _cohort(seed, m=12, d=20, num_corrupted=3)
  x = fang.krum_target(updates, weights, corrupted, 1e-5)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  lam = np.abs(x).max()
  np.testing.assert_allclose(x, -lam * np.sign(mean))
  assert 1e-5 <= lam <= fang.krum_lambda_bound(updates, weights, corrupted)
  attacked = updates.copy()
  attacked[corrupted] = x
  assert corrupted[np.argmin(robust_statistics.krum_scores(attacked, 3))]
  attacked[corrupted] = 2 * x  # the next larger lambda of the halving was not selected
  if lam * 2 <= fang.krum_lambda_bound(updates, weights, corrupted) * (1 + 1e-12):
    assert not corrupted[np.argmin(robust_statistics.krum_scores(attacked, 3))]


def test_fang_krum_lambda_bound_is_the_papers_formula():
  updates, weights, corrupted = _cohort(9, m=9, d=4, num_corrupted=2)
  honest = updates[~corrupted]
  d, m, c = 4, 9, 2
  distances = np.sqrt(_squared(honest, honest))
  sums = [np.sort(np.delete(row, i))[:m - c - 2].sum() for i, row in enumerate(distances)]
  expected = min(sums) / ((m - 2 * c - 1) * math.sqrt(d)) + np.linalg.norm(honest, axis=1).max() / math.sqrt(d)
  assert fang.krum_lambda_bound(updates, weights, corrupted) == pytest.approx(expected, rel=1e-12)


def test_mimic_copies_the_honest_client_farthest_along_the_top_principal_direction():
  updates, weights, corrupted = _cohort(5, m=9, d=12)
  updates[5] += 4 * np.linspace(-1, 1, 12)  # an honest client far along one direction
  x = mimic.target(updates, weights, corrupted)
  honest = updates[~corrupted]
  centred = honest - honest.mean(axis=0)
  z = np.linalg.svd(centred)[2][0]
  expected = honest[np.argmax(np.abs(centred @ z))]
  np.testing.assert_array_equal(x, expected)
  np.testing.assert_array_equal(x, updates[5])


@pytest.mark.parametrize('pi, lam, angle', [(1.0, 0.9, 90.0), (0.0, 0.0, 180.0), (0.5, 0.5, 45.0)])
def test_rop_sits_at_the_radius_from_its_location_at_the_angle_to_the_reference(pi, lam, angle):
  updates, weights, corrupted = _cohort(6)
  previous = np.random.default_rng(7).normal(size=7)
  x = rop.target(updates, weights, corrupted, previous, 0.3, pi, lam, angle)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  location, reference = pi * previous + (1 - pi) * mean, lam * previous + (1 - lam) * mean
  np.testing.assert_allclose(np.linalg.norm(x - location), 0.3, rtol=1e-12)
  cosine = np.dot(x - location, reference) / (0.3 * np.linalg.norm(reference))
  np.testing.assert_allclose(cosine, math.cos(math.radians(angle)), atol=1e-12)


def test_rop_in_the_first_round_uses_the_honest_mean_as_reference():
  updates, weights, corrupted = _cohort(8)
  x = rop.target(updates, weights, corrupted, np.zeros(7), 1.0, 1.0, 0.9, 90.0)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)
  assert abs(np.dot(x, mean)) < 1e-10 and np.linalg.norm(x) == pytest.approx(1.0)


def _median_rule(points, weights, center):
  del center
  return robust_statistics.weighted_coordinate_median(points, weights)


@pytest.mark.parametrize('direction', catalog.LINE_SEARCH_DIRECTIONS)
@pytest.mark.parametrize('seed', [0, 1])
def test_line_search_never_does_worse_than_the_best_point_of_its_grid(direction, seed):
  updates, weights, corrupted = _cohort(seed, m=9, d=6, num_corrupted=3)
  previous = np.zeros(6)
  x = line_search.target(updates, weights, corrupted, previous, _median_rule, direction, 10.0, 11, 12)
  mean, std = honest_statistics.mean_and_std(updates, weights, corrupted)
  base, step = line_search.base_and_direction(direction, mean, std)
  objective = line_search.objective_fn(updates, weights, corrupted, previous, _median_rule, base, step)
  scale = np.dot(x - base, step) / np.dot(step, step)
  np.testing.assert_allclose(x, base + scale * step, atol=1e-12)
  grid_best = max(objective(s) for s in np.linspace(0, 10, 11))
  assert objective(scale) >= grid_best
  # and never worse than a finer fixed grid by more than the refinement's resolution allows
  assert objective(scale) >= max(objective(s) for s in np.linspace(0, 10, 101)) - 0.05


def test_line_search_against_the_mean_goes_to_the_largest_scale():
  """Against the plain mean J(s) grows with s: the search returns s_max."""
  updates, weights, corrupted = _cohort(2)
  mean_rule = lambda p, w, c: w @ p / w.sum()
  x = line_search.target(updates, weights, corrupted, np.zeros(7), mean_rule, 'ipm', 7.0, 11, 5)
  np.testing.assert_allclose(x, -7.0 * honest_statistics.mean_and_std(updates, weights, corrupted)[0])


def test_golden_section_refines_between_grid_points():
  """A peak at 3.3 between grid points 3 and 4: the refinement gets within 0.01 of it."""
  found = line_search.maximise(lambda s: -(s - 3.3) ** 2, 10.0, 11, 12)
  assert abs(found - 3.3) < 0.01
  assert line_search.maximise(lambda s: -(s - 3.3) ** 2, 10.0, 11, 0) == 3.0


def test_alie_z_max_and_attacks_without_honest_clients():
  assert honest_statistics.alie_z_max(8, 3) == pytest.approx(0.6745, abs=1e-4)
  assert honest_statistics.alie_z_max(1, 1) == honest_statistics.alie_z_max(1, 0) == -np.inf  # Phi^{-1}(0)
  updates, weights = np.ones((3, 2)), np.ones(3)
  everyone = np.ones(3, bool)
  for target in (perturbation_search.target(updates, weights, everyone, 'min_max', 'sign', 10.0, 1e-5),
                 mimic.target(updates, weights, everyone), fang.krum_target(updates, weights, everyone, 1e-5),
                 norm_aware.target(updates, weights, everyone, 'ipm', 1.0)):
    np.testing.assert_array_equal(target, np.zeros(2))


def test_catalog_parses_canonicalises_and_refuses_with_the_allowed_values():
  assert str(catalog.parse('alie(z=1.0)')) == 'alie(z=1)'
  assert str(catalog.parse('ipm(eps=0.1)')) == 'ipm'
  assert str(catalog.parse(' norm_aware( c=1.40 , direction=ipm ) ')) == 'norm_aware(direction=ipm,c=1.4)'
  assert catalog.parse('min_max').options() == {'direction': 'unit_vec', 'gamma_init': 10.0, 'tau': 1e-5}
  assert catalog.expand(['alie_grid', 'ipm_grid', 'alie']) == [
      'alie', 'alie(z=1)', 'alie(z=2)', 'ipm', 'ipm(eps=1)', 'ipm(eps=2)']
  assert catalog.split_specs('data,alie(z=1),norm_aware(direction=ipm,c=1.4)') == [
      'data', 'alie(z=1)', 'norm_aware(direction=ipm,c=1.4)']
  assert catalog.path_component('norm_aware(direction=ipm,c=1.4)') == 'norm_aware-direction=ipm-c=1.4'
  assert catalog.lookup('data') is None and catalog.lookup('mimic').name == 'mimic'
  for spec, message in (('krum_attack', "unknown attack 'krum_attack'.*attacks: gaussian, omniscient"),
                        ('alie(q=1)', r"'q=1' is not key=value with a parameter of the attack \(parameters: z\)"),
                        ('ipm(eps=-1)', 'eps must be a finite number >= 0'),
                        ('line_search(grid=2.5)', 'grid must be an integer >= 2'),
                        ('min_max(direction=up)', 'direction must be one of unit_vec, std, sign'),
                        ('rop(pi=2)', r'pi must be a number in \[0, 1\]'), ('alie(z=1', 'not of the form')):
    with pytest.raises(ValueError, match=message):
      catalog.parse(spec)
