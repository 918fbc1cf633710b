"""Gather-based baselines against the NumPy references, edge cases, and their (non-)privacy."""

import functools
import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import privacy
from tff_robust.aggregators import robust_rules
from tff_robust.core import robust_statistics

_VALUE_TYPE = tff.to_type([(np.float32, [2, 2]), (np.float32, [3])])
_WEIGHT_TYPE = tff.TensorType(np.float32)
_F = 1  # num_byzantine

_FACTORIES = {
    'coordinate_median': (baselines.coordinate_median_factory, robust_statistics.weighted_coordinate_median),
    'trimmed_mean': (
        lambda: baselines.trimmed_mean_factory(0.2),
        lambda p, w: robust_statistics.coordinate_trimmed_mean(p, w, 0.2),
    ),
    'multi_krum': (
        lambda: baselines.multi_krum_factory(_F),
        lambda p, w: robust_statistics.multi_krum(p, w, _F, len(p) - _F),
    ),
    'multi_krum_3': (
        lambda: baselines.multi_krum_factory(_F, num_selected=3),
        lambda p, w: robust_statistics.multi_krum(p, w, _F, 3),
    ),
    'bulyan': (lambda: baselines.bulyan_factory(_F), lambda p, w: robust_statistics.bulyan(p, w, _F)),
}


@functools.lru_cache(maxsize=None)
def _process(name):
  return _FACTORIES[name][0]().create(_VALUE_TYPE, _WEIGHT_TYPE)


def _aggregate(name, points, weights):
  process = _process(name)
  values = [[p[:4].reshape(2, 2), p[4:]] for p in np.asarray(points, np.float32)]
  output = process.next(process.initialize(), values, [np.float32(w) for w in weights])
  return np.concatenate([output.result[0].ravel(), output.result[1]]), output.measurements


@pytest.mark.parametrize('name', sorted(_FACTORIES))
@pytest.mark.parametrize('weighted', [False, True])
def test_matches_numpy_reference(name, weighted):
  rng = np.random.default_rng(7 + weighted)
  points = rng.normal(size=(9, 7)).astype(np.float32)
  points[7:] += 50.0  # two outliers
  weights = rng.uniform(0.5, 3.0, 9).astype(np.float32) if weighted else np.ones(9, np.float32)
  result, measurements = _aggregate(name, points, weights)
  np.testing.assert_allclose(result, _FACTORIES[name][1](points, weights), rtol=1e-5, atol=1e-5)
  assert measurements['num_clients_used'] == 9 and measurements['insufficient_clients'] == 0


@pytest.mark.parametrize('name', sorted(_FACTORIES))
def test_ties_follow_the_reference(name):
  points = np.repeat(np.arange(3, dtype=np.float32)[:, None], 7, axis=1)
  points = np.concatenate([points, points, points[:1]])  # every value appears at least twice
  weights = np.ones(len(points), np.float32)
  result, _ = _aggregate(name, points, weights)
  np.testing.assert_allclose(result, _FACTORIES[name][1](points, weights), atol=1e-6)


# Bulyan with f = 1 and m = 7 on a line: repeated Krum selects 24, 18 and 29 (no ties); then 3, 6, 19, 37 are scored
# by one neighbour each, 3 and 6 tie (9), and 6, the more central (squared distances to the others sum to 1139
# against 3's 1421), goes, not 3, the lower client index; the last step sees 3, 19 and 37, where 3 and 19 tie (256)
# and 19 (580 against 1412) goes. The selected 24, 18, 29, 6, 19 have median 19, and the 3 values closest to it
# average to (19 + 18 + 24) / 3 = 61 / 3. (Ties by client index gave 71 / 3 on this order.)
_LINE = np.array([3, 24, 6, 19, 18, 29, 37], np.float64)[:, None]


@pytest.mark.parametrize('offset', [0.0, 2.0**20])  # far from 0, rounding of a Gram matrix would break the ties
def test_bulyan_breaks_exact_krum_ties_by_centrality_not_by_client_index(offset):
  points = _LINE + offset
  expected = robust_statistics.bulyan(points, np.ones(7), 1)
  np.testing.assert_allclose(expected, [61 / 3 + offset], rtol=1e-15)
  result = robust_rules.bulyan(tf.constant(points), tf.ones([7], tf.float64), 1)
  np.testing.assert_allclose(result.numpy(), expected, rtol=1e-15)


# The 1-D cohort of issue 34 with f = 1, by hand (a score sums the squared distances to the max(1, r - 3) nearest
# of the r remaining points; a total, to all of them): r = 7, 4 neighbours: 4 scores 10, the lowest; r = 6: 3 and 5
# tie at 14, 5 (total 55 against 99) goes; r = 5: 3 and 9 tie at 10 and in total (95), 3 (the smaller point) goes;
# r = 4: 9 and 10 tie at 1, 9 (59 against 81) goes; r = 3: 2, 6 and 10 all score 16, 6 (32 against 80) goes.
# Selected 4, 5, 3, 9, 6: median 5, whose 3 closest values 5, 4, 6 average to 5. Ties by client index gave 5, 4 or
# 13/3 depending on the order (as Flower's aggregate_bulyan does: 2457, 1323 and 1260 of the 5040 orders, flwr
# 1.42; 5 in the order below), and the factory's mean-centred Gram rounding gave 4 or 5.
_ISSUE_34_COHORT = np.array([4, 9, 10, 5, 2, 6, 3], np.float32)[:, None]
_ORDERS_7 = list(itertools.permutations(range(7)))
_SCALAR = tff.TensorType(np.float32)


def _factory_results(factory, cohort, orders):
  process = factory.create(_SCALAR, _SCALAR)
  return {float(process.next(process.initialize(), list(cohort[list(order), 0]), [np.float32(1)] * len(order)).result)
          for order in orders}


def test_bulyan_gives_the_same_result_on_every_order_of_a_cohort_with_exact_krum_ties():
  cohorts = np.stack([_ISSUE_34_COHORT[list(order)] for order in _ORDERS_7])
  for order, points in zip(_ORDERS_7, cohorts):
    np.testing.assert_array_equal(robust_statistics.bulyan(points, np.ones(7), 1), [5.0], err_msg=str(order))
  # The rule on every order in one TensorFlow call (5040 calls took 5.6 s of the 9).
  rule = tf.function(lambda cohorts: tf.map_fn(lambda points: robust_rules.bulyan(points, tf.ones([7]), 1), cohorts))
  results = rule(tf.constant(cohorts)).numpy()
  for order, result in zip(_ORDERS_7, results):
    np.testing.assert_array_equal(result, [5.0], err_msg=str(order))
  sample = [_ORDERS_7[i] for i in np.random.default_rng(0).choice(len(_ORDERS_7), 40, replace=False)]
  assert _factory_results(baselines.bulyan_factory(1), _ISSUE_34_COHORT, sample) == {5.0}


# Multi-Krum, f = 1, on -2, -1, 0, 1, 2 (2 neighbours): -1, 0 and 1 score 2, -2 and 2 score 5. By total squared
# distance 0 (10) comes first, then -1 and 1 (15 each) by their coordinate, -1 first; -2 and 2 tie in both, -2
# first. Krum (1 selected) is 0; 2 selected: -1/2; 4 selected: (0 - 1 + 1 - 2) / 4.
_SYMMETRIC_COHORT = np.array([2, -1, 0, -2, 1], np.float32)[:, None]
_ORDERS_5 = list(itertools.permutations(range(5)))


@pytest.mark.parametrize('num_selected, expected', [(1, 0.0), (2, -0.5), (4, -0.5)])
def test_multi_krum_gives_the_same_result_on_every_order_of_a_cohort_with_exact_krum_ties(num_selected, expected):
  rule = tf.function(lambda points: robust_rules.multi_krum(points, tf.ones([5]), 1, num_selected))
  for order in _ORDERS_5:
    points = _SYMMETRIC_COHORT[list(order)]
    np.testing.assert_array_equal(robust_statistics.multi_krum(points, np.ones(5), 1, num_selected), [expected],
                                  err_msg=str(order))
    np.testing.assert_array_equal(rule(tf.constant(points)).numpy(), [expected], err_msg=str(order))
  assert _factory_results(baselines.multi_krum_factory(1, num_selected), _SYMMETRIC_COHORT, _ORDERS_5[::7]) == {
      expected}


# 7 points, f = 1, 4 neighbours: 1 scores 4 (four neighbours at distance 1), the copies of 0 (weights 1 and 3) and
# of 2 (weights 1 and 2) all score 9; 0's total squared distance (5009) is below 2's (5017). Two selected: 1, then
# 0 with weight 1 (the smaller weight of its copies): (1 + 0) / 2. Weight 3 would give 1/4.
_WEIGHTED_TIES = (np.array([0, 0, 1, 2, 2, 50, -50], np.float64)[:, None], np.array([1, 3, 1, 1, 2, 1, 1], np.float64))


def test_krum_ties_between_equal_points_go_to_the_smaller_weight_in_every_order():
  points, weights = _WEIGHTED_TIES
  rule = tf.function(lambda p, w: robust_rules.multi_krum(p, w, 1, 2))
  for order in _ORDERS_7[::5]:
    order = list(order)
    np.testing.assert_allclose(robust_statistics.multi_krum(points[order], weights[order], 1, 2), [0.5], rtol=1e-15)
    np.testing.assert_allclose(rule(tf.constant(points[order]), tf.constant(weights[order])).numpy(), [0.5],
                               rtol=1e-15)


def test_lexicographic_ranks_count_the_rows_before_each_row():
  points = np.array([[1.0, 2.0, 0.0], [1.0, 1.0, 9.0], [0.0, 5.0, 5.0], [1.0, 2.0, 0.0], [1.0, 2.0, -1.0]])
  expected = [sum(tuple(other) < tuple(row) for other in points) for row in points]  # Python's tuple order
  np.testing.assert_array_equal(robust_rules.lexicographic_ranks(tf.constant(points)).numpy(), expected)
  assert expected == [3, 1, 0, 3, 2]


def test_bulyan_matches_the_reference_on_random_float32_clouds_of_7_points():
  # f = 1, m = 7, d = 12: two of the five Krum steps score by one neighbour, where mutual nearest neighbours
  # tie exactly; the pairwise distances must be exactly symmetric for the lowest index to win.
  bulyan = tf.function(lambda points: robust_rules.bulyan(points, tf.ones([7]), 1))
  for seed in range(300):
    points = np.random.default_rng(seed).normal(size=(7, 12)).astype(np.float32)
    np.testing.assert_allclose(
        bulyan(tf.constant(points)).numpy(), robust_statistics.bulyan(points, np.ones(7), 1),
        rtol=1e-5, atol=1e-6, err_msg=f'seed {seed}',
    )


def test_pairwise_squared_distances_are_exactly_symmetric_and_translation_invariant():
  points = np.random.default_rng(3).normal(size=(9, 5)) + 1e4
  distances = robust_rules.pairwise_squared_distances(tf.constant(points)).numpy()
  np.testing.assert_array_equal(distances, distances.T)
  differences = np.sum((points[:, None] - points[None]) ** 2, axis=-1)
  np.testing.assert_allclose(distances, differences, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('name', sorted(_FACTORIES))
def test_all_equal_updates_aggregate_to_that_update(name):
  point = np.linspace(-1, 1, 7).astype(np.float32)
  result, _ = _aggregate(name, np.tile(point, (8, 1)), np.linspace(1, 2, 8))
  np.testing.assert_allclose(result, point, atol=1e-6)


def test_outliers_do_not_move_the_robust_rules():
  rng = np.random.default_rng(0)
  points = rng.normal(size=(9, 7)).astype(np.float32) * 0.1
  points[-1] = 1e6
  for name in _FACTORIES:
    result, _ = _aggregate(name, points, np.ones(9))
    assert np.max(np.abs(result)) < 1.0, name


def test_nonfinite_rows_are_dropped_and_counted():
  rng = np.random.default_rng(1)
  points = rng.normal(size=(9, 7)).astype(np.float32)
  points[2, 3] = np.nan
  weights = np.ones(9, np.float32)
  result, measurements = _aggregate('coordinate_median', points, weights)
  keep = np.arange(9) != 2
  np.testing.assert_allclose(
      result, robust_statistics.weighted_coordinate_median(points[keep], weights[keep]), atol=1e-6
  )
  assert measurements['num_nonfinite_clients'] == 1 and measurements['num_clients_used'] == 8


def test_too_few_usable_clients_skip_the_round_instead_of_failing():
  points = np.ones((6, 7), np.float32)  # Bulyan with f=1 needs 7
  result, measurements = _aggregate('bulyan', points, np.ones(6))
  np.testing.assert_array_equal(result, np.zeros(7))
  assert measurements['insufficient_clients'] == 1


@pytest.mark.parametrize(
    'factory, clients, message',
    [
        (baselines.bulyan_factory(1), 6, 'bulyan cannot aggregate 6 clients per round: it needs at least'),
        (baselines.multi_krum_factory(2), 6, 'multi_krum cannot aggregate 6'),
        (baselines.trimmed_mean_factory(0.4), 6, 'trimmed_mean cannot aggregate 6'),
        (baselines.coordinate_median_factory(), 0, 'coordinate_median cannot aggregate 0'),
    ],
)
def test_too_few_clients_per_round_is_a_clear_error(factory, clients, message):
  with pytest.raises(ValueError, match=message):
    factory.check_clients_per_round(clients)
  factory.check_clients_per_round(100)


@pytest.mark.parametrize(
    'build, message',
    [
        (lambda: baselines.trimmed_mean_factory(0.5), 'trim_fraction'),
        (lambda: baselines.trimmed_mean_factory(-0.1), 'trim_fraction'),
        (lambda: baselines.multi_krum_factory(-1), 'num_byzantine'),
        (lambda: baselines.multi_krum_factory(1, num_selected=0), 'num_selected'),
        (lambda: baselines.bulyan_factory(1.5), 'num_byzantine'),
        (lambda: baselines.norm_clipping_factory(0.0), 'clipping_norm'),
    ],
)
def test_bad_arguments_name_the_argument(build, message):
  with pytest.raises(ValueError, match=message):
    build()


def test_gathering_is_flagged_and_clipping_is_secure_compatible():
  assert 'federated_aggregate' in privacy.non_secure_intrinsics(_process('coordinate_median').next)
  clipping = baselines.norm_clipping_factory(1.0).create(_VALUE_TYPE, _WEIGHT_TYPE)
  assert privacy.non_secure_intrinsics(clipping.next) == frozenset()
