"""Property-based tests (hypothesis) of the NumPy references: equivariances, bounds, duplicates and scales.

The references in `tff_robust.core` define what the TFF factories compute (tests/aggregators/test_properties.py
checks the factories against them), so their invariances are checked here on random point clouds, weights,
shapes and scales from 1e-30 to 1e30. Clouds come from a NumPy generator seeded by hypothesis: continuous
values, so ties have probability zero; tests about ties and duplicates draw them explicitly. Every run draws
the same examples (`derandomize=True`, no example database).
"""

import itertools

from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
import pytest

from tff_robust.core import fedplus
from tff_robust.core import robust_statistics
from tff_robust.core import superquantile
from tff_robust.core import weiszfeld

_SETTINGS = settings(max_examples=100, deadline=None, database=None, derandomize=True)
_FEW = settings(_SETTINGS, max_examples=50)
_SCALES = st.floats(-30.0, 30.0).map(lambda exponent: 10.0**exponent)  # 1e-30 ... 1e30
_COORDINATES = st.just(0.0) | st.tuples(st.sampled_from([-1.0, 1.0]), _SCALES).map(lambda pair: pair[0] * pair[1])
_SEEDS = st.integers(0, 2**32 - 1)
_INITS = ('mean', 'zero')
_F = 1  # num_byzantine of the Krum-based rules below.


@st.composite
def _clouds(draw, min_points=1, max_points=10, max_dimension=4):
  """(points [m, d], weights [m] > 0, rng): Gaussian points, some far away, weights up to 1e3 apart."""
  num_points = draw(st.integers(min_points, max_points))
  dimension = draw(st.integers(1, max_dimension))
  rng = np.random.default_rng(draw(_SEEDS))
  points = rng.normal(size=(num_points, dimension))
  num_far = draw(st.integers(0, num_points // 3))
  points[:num_far] *= 10.0 ** rng.uniform(1, 4, size=(num_far, 1))  # heterogeneous: median != mean
  weight_spread = draw(st.sampled_from([0.0, 0.5, 1.5]))  # 0: equal weights
  weights = 10.0 ** rng.uniform(-weight_spread, weight_spread, num_points)
  return points, weights, rng


@st.composite
def _tied_clouds(draw, min_points=1, max_points=10, max_dimension=3):
  """(points, weights): coordinates from five values and integer weights, so ties and duplicates abound."""
  num_points = draw(st.integers(min_points, max_points))
  dimension = draw(st.integers(1, max_dimension))
  coordinates = st.sampled_from([-2.0, -0.5, 0.0, 1.0, 3.0])
  points = draw(hnp.arrays(np.float64, (num_points, dimension), elements=coordinates))
  weights = draw(hnp.arrays(np.float64, num_points, elements=st.integers(1, 4).map(float)))
  return points, weights


def _spread(points) -> float:
  """The largest absolute coordinate: the scale of absolute tolerances."""
  return float(np.max(np.abs(points))) or 1.0


def _orthogonal(rng, dimension):
  q, r = np.linalg.qr(rng.normal(size=(dimension, dimension)))
  return q * np.sign(np.diag(r))


def _signed_permutation(rng, dimension):
  """A permutation of the coordinates with random sign flips, as a matrix (an orthogonal map)."""
  return np.eye(dimension)[rng.permutation(dimension)] * rng.choice([-1.0, 1.0], dimension)[:, None]


def _assert_in_box(values, points, *, rtol=1e-12):
  slack = rtol * _spread(points)
  assert np.all(values >= points.min(axis=0) - slack) and np.all(values <= points.max(axis=0) + slack)


def _with_a_heavy_point(rng, others, other_weights, share, copies):
  """(point, points, weights): `copies` duplicates of a new point, holding `share` of the weight, among the others."""
  heavy = rng.normal(size=others.shape[1])
  heavy_weight = share / (1 - share) * other_weights.sum()
  points = np.concatenate([np.tile(heavy, (copies, 1)), others])
  weights = np.concatenate([np.full(copies, heavy_weight / copies), other_weights])
  order = rng.permutation(len(points))  # the copies need not come first
  return heavy, points[order], weights[order]


# ---------------------------------------------------------------------------------------------------
# Smoothed Weiszfeld (RFA) and the geometric median objective.


def _weiszfeld(points, weights, init, smoothing=1e-6, num_passes=6):
  trace = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=num_passes, smoothing=smoothing, init=init)
  return np.array(trace.iterates)


@_SETTINGS
@given(cloud=_clouds(), init=st.sampled_from(_INITS))
def test_weiszfeld_commutes_with_orthogonal_maps_and_from_the_mean_with_translations(cloud, init):
  points, weights, rng = cloud
  rotation = _orthogonal(rng, points.shape[1])
  shift = rng.normal(size=points.shape[1]) * 10 * _spread(points) if init == 'mean' else 0.0  # 'zero' fixes 0
  moved = _weiszfeld(points @ rotation.T + shift, weights, init)
  expected = _weiszfeld(points, weights, init) @ rotation.T + shift
  np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-7 * (_spread(points) + np.max(np.abs(shift))))


@_SETTINGS
@given(cloud=_clouds(), init=st.sampled_from(_INITS), scale=_SCALES)
def test_weiszfeld_scales_with_the_points_and_the_smoothing_from_1e_minus_30_to_1e30(cloud, init, scale):
  points, weights, _ = cloud
  scaled = _weiszfeld(points * scale, weights, init, smoothing=1e-6 * scale)
  assert np.all(np.isfinite(scaled))
  expected = _weiszfeld(points, weights, init) * scale
  np.testing.assert_allclose(scaled, expected, rtol=1e-9, atol=1e-9 * scale * _spread(points))


@_SETTINGS
@given(cloud=_clouds(), init=st.sampled_from(_INITS))
def test_weiszfeld_ignores_the_order_of_the_clients(cloud, init):
  points, weights, rng = cloud
  order = rng.permutation(len(points))
  np.testing.assert_allclose(
      _weiszfeld(points[order], weights[order], init), _weiszfeld(points, weights, init),
      rtol=1e-10, atol=1e-10 * _spread(points),
  )


@_SETTINGS
@given(cloud=st.one_of(_clouds(), _tied_clouds()), init=st.sampled_from(_INITS))
def test_every_weiszfeld_iterate_lies_in_the_bounding_box_of_the_points(cloud, init):
  points, weights = cloud[:2]
  _assert_in_box(_weiszfeld(points, weights, init), points)


@_SETTINGS
@given(cloud=_clouds(), init=st.sampled_from(_INITS), log_smoothing=st.floats(-8.0, 0.0))
def test_weiszfeld_objective_never_rises_by_more_than_half_the_smoothing(cloud, init, log_smoothing):
  # Smoothed Weiszfeld is majorization-minimization of the smoothed objective g_nu, and 0 <= g_nu - g <= nu/2
  # per unit of weight, so the normalised objective can rise by at most nu/2 per pass.
  points, weights, _ = cloud
  smoothing = 10.0**log_smoothing * _spread(points)
  trace = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=8, smoothing=smoothing, init=init)
  objectives = trace.objectives + [weiszfeld.geometric_median_objective(trace.iterates[-1], points, weights)]
  if init == 'mean':  # the first iterate (the mean) was not broadcast, so it has no recorded objective
    objectives.insert(0, weiszfeld.geometric_median_objective(trace.iterates[0], points, weights))
  rises = np.diff(objectives)
  assert np.all(rises <= smoothing / 2 + 1e-12 * _spread(points)), rises


@_SETTINGS
@given(
    point=hnp.arrays(np.float64, st.integers(1, 4), elements=_COORDINATES),
    weights=hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(1e-3, 1e3)),
    init=st.sampled_from(_INITS),
)
def test_weiszfeld_of_identical_points_is_that_point(point, weights, init):
  points = np.tile(point, (len(weights), 1))
  np.testing.assert_allclose(_weiszfeld(points, weights, init), np.tile(point, (6, 1)), rtol=1e-14, atol=0)


@_SETTINGS
@given(
    cloud=_clouds(max_points=8),
    init=st.sampled_from(_INITS),
    share=st.floats(0.55, 0.95),
    copies=st.integers(1, 3),
)
def test_weiszfeld_converges_to_a_point_holding_more_than_half_the_weight(cloud, init, share, copies):
  # The geometric median is then that point; 300 passes reach it within the smoothing nu.
  others, other_weights, rng = cloud
  heavy, points, weights = _with_a_heavy_point(rng, others, other_weights, share, copies)
  smoothing = 1e-9 * _spread(points)
  result = _weiszfeld(points, weights, init, smoothing=smoothing, num_passes=300)[-1]
  assert np.linalg.norm(result - heavy) <= smoothing


@_SETTINGS
@given(cloud=_clouds(), scale=_SCALES)
def test_geometric_median_objective_is_invariant_under_rigid_motions_and_homogeneous(cloud, scale):
  points, weights, rng = cloud
  center = rng.normal(size=points.shape[1])
  rotation, shift = _orthogonal(rng, points.shape[1]), rng.normal(size=points.shape[1]) * _spread(points)
  value = weiszfeld.geometric_median_objective(center, points, weights)
  assert value >= 0
  order = rng.permutation(len(points))
  permuted = weiszfeld.geometric_median_objective(center, points[order], weights[order])
  assert permuted == pytest.approx(value, rel=1e-12)
  moved = weiszfeld.geometric_median_objective(rotation @ center + shift, points @ rotation.T + shift, weights)
  assert moved == pytest.approx(value, rel=1e-9, abs=1e-12 * _spread(points))
  assert weiszfeld.geometric_median_objective(center * scale, points * scale, weights) == pytest.approx(
      value * scale, rel=1e-12
  )


# ---------------------------------------------------------------------------------------------------
# Gather-based robust rules: coordinate median, trimmed mean, (multi-)Krum, Bulyan.

_COORDINATE_RULES = {
    'coordinate_median': robust_statistics.weighted_coordinate_median,
    'trimmed_mean': lambda p, w: robust_statistics.coordinate_trimmed_mean(p, w, 0.2),
}
_DISTANCE_RULES = {
    'krum': lambda p, w: robust_statistics.multi_krum(p, w, _F, 1),
    'multi_krum': lambda p, w: robust_statistics.multi_krum(p, w, _F, len(p) - _F),
    'bulyan': lambda p, w: robust_statistics.bulyan(p, w, _F),
}
_RULES = {**_COORDINATE_RULES, **_DISTANCE_RULES}
_RULE_CLOUDS = _clouds(min_points=4 * _F + 3, max_points=12)  # enough points for every rule


@_SETTINGS
@given(name=st.sampled_from(sorted(_COORDINATE_RULES)), cloud=_RULE_CLOUDS)
def test_coordinate_rules_commute_with_per_coordinate_affine_maps_and_permutations(name, cloud):
  points, weights, rng = cloud
  dimension = points.shape[1]
  factors = rng.choice([-1.0, 1.0], dimension) * 10.0 ** rng.uniform(-3, 3, dimension)  # negative too
  shift, order = rng.normal(size=dimension) * 10 * _spread(points), rng.permutation(dimension)
  rule = _COORDINATE_RULES[name]
  moved = rule(points[:, order] * factors + shift, weights)
  expected = rule(points, weights)[order] * factors + shift
  np.testing.assert_allclose(moved, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(shift)))


@_SETTINGS
@given(name=st.sampled_from(sorted(_RULES)), cloud=_RULE_CLOUDS, scale=_SCALES)
def test_rules_commute_with_signed_coordinate_permutations_translations_and_scales_1e_minus_30_to_1e30(
    name, cloud, scale
):
  # Bulyan and Krum use Euclidean distances, so only maps that preserve their order are allowed: signed
  # coordinate permutations, translations and one positive scale for all coordinates.
  points, weights, rng = cloud
  symmetry = _signed_permutation(rng, points.shape[1])
  shift = rng.normal(size=points.shape[1]) * scale * _spread(points)
  moved = _RULES[name](scale * points @ symmetry.T + shift, weights)
  assert np.all(np.isfinite(moved))
  expected = scale * _RULES[name](points, weights) @ symmetry.T + shift
  np.testing.assert_allclose(moved, expected, rtol=1e-9, atol=1e-9 * scale * _spread(points))


@_SETTINGS
@given(cloud=_clouds(min_points=2 * _F + 3), scale=_SCALES, num_selected=st.integers(1, 3))
def test_krum_commutes_with_every_similarity_and_its_scores_scale_quadratically(cloud, scale, num_selected):
  points, weights, rng = cloud
  rotation, shift = _orthogonal(rng, points.shape[1]), rng.normal(size=points.shape[1]) * scale * _spread(points)
  moved_points = scale * points @ rotation.T + shift
  np.testing.assert_allclose(
      robust_statistics.krum_scores(moved_points, _F), scale**2 * robust_statistics.krum_scores(points, _F),
      rtol=1e-8,
  )
  np.testing.assert_allclose(
      robust_statistics.multi_krum(moved_points, weights, _F, num_selected),
      scale * robust_statistics.multi_krum(points, weights, _F, num_selected) @ rotation.T + shift,
      rtol=1e-9, atol=1e-9 * scale * _spread(points),
  )


# Bulyan's repeated Krum makes its last selection among 2f + 1 points, each scored over max(1, f - 1)
# neighbours: for f = 1 and f = 2 the two points of the closest pair share the lowest score. Ties go to the more
# central point, then the lexicographically smaller (`robust_statistics.krum_order`), so the result does not depend
# on the order of the clients (with ties by client index it did, for f = 1 and 2).
@pytest.mark.parametrize(
    'name, num_byzantine',
    [(name, _F) for name in sorted(_COORDINATE_RULES)]
    + [('krum', 1), ('multi_krum', 1), ('multi_krum', 2), ('bulyan', 1), ('bulyan', 2), ('bulyan', 3)],
)
@_SETTINGS
@given(data=st.data())
def test_rules_ignore_the_order_of_the_clients(name, num_byzantine, data):
  rules = {
      **_COORDINATE_RULES,
      'krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, 1),
      'multi_krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, len(p) - num_byzantine),
      'bulyan': lambda p, w: robust_statistics.bulyan(p, w, num_byzantine),
  }
  points, weights, rng = data.draw(_clouds(min_points=4 * num_byzantine + 3, max_points=4 * num_byzantine + 6))
  order = rng.permutation(len(points))
  np.testing.assert_allclose(
      rules[name](points[order], weights[order]), rules[name](points, weights),
      rtol=1e-12, atol=1e-12 * _spread(points),
  )


@pytest.mark.parametrize('name, num_byzantine', [('krum', 1), ('multi_krum', 1), ('bulyan', 1), ('bulyan', 2)])
@_SETTINGS
@given(data=st.data())
def test_krum_based_rules_ignore_the_order_of_the_clients_even_with_exact_ties(name, num_byzantine, data):
  minimum = (4 if name == 'bulyan' else 2) * num_byzantine + 3
  points, weights = data.draw(_tied_clouds(min_points=minimum, max_points=minimum + 4))
  order = np.random.default_rng(data.draw(_SEEDS)).permutation(len(points))
  rule = {
      'krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, 1),
      'multi_krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, len(p) - num_byzantine - 1),
      'bulyan': lambda p, w: robust_statistics.bulyan(p, w, num_byzantine),
  }[name]
  np.testing.assert_allclose(rule(points[order], weights[order]), rule(points, weights), rtol=1e-12, atol=1e-12)


@_SETTINGS
@given(cloud=_tied_clouds(), seed=_SEEDS)
def test_coordinate_median_ignores_the_order_of_the_clients_even_with_ties(cloud, seed):
  points, weights = cloud
  order = np.random.default_rng(seed).permutation(len(points))
  np.testing.assert_array_equal(
      robust_statistics.weighted_coordinate_median(points[order], weights[order]),
      robust_statistics.weighted_coordinate_median(points, weights),
  )


@_SETTINGS
@given(name=st.sampled_from(sorted(_RULES)), cloud=st.one_of(_RULE_CLOUDS, _tied_clouds(min_points=7, max_points=12)))
def test_rules_stay_within_the_per_coordinate_range_of_the_points(name, cloud):
  points, weights = cloud[:2]
  _assert_in_box(_RULES[name](points, weights), points)


@_SETTINGS
@given(
    cloud=st.one_of(_clouds(min_points=5, max_points=8), _tied_clouds(min_points=5, max_points=8)),
    num_byzantine=st.integers(0, 1),
    num_selected=st.integers(1, 5),
)
def test_multi_krum_is_the_weighted_mean_of_a_lowest_scoring_subset(cloud, num_byzantine, num_selected):
  points, weights = cloud[:2]
  result = robust_statistics.multi_krum(points, weights, num_byzantine, num_selected)
  scores = robust_statistics.krum_scores(points, num_byzantine)
  lowest_scoring_means = [
      np.average(points[list(subset)], axis=0, weights=weights[list(subset)])
      for subset in itertools.combinations(range(len(points)), num_selected)
      if max(scores[list(subset)]) <= min(np.delete(scores, list(subset)), default=np.inf)
  ]
  tolerance = 1e-12 * _spread(points)
  assert any(np.allclose(result, mean, rtol=0, atol=tolerance) for mean in lowest_scoring_means)


@_SETTINGS
@given(
    name=st.sampled_from(sorted(_RULES)),
    point=hnp.arrays(np.float64, st.integers(1, 4), elements=_COORDINATES),
    weights=hnp.arrays(np.float64, st.integers(4 * _F + 3, 12), elements=st.floats(1e-3, 1e3)),
)
def test_rules_return_the_point_that_every_client_sent(name, point, weights):
  result = _RULES[name](np.tile(point, (len(weights), 1)), weights)
  np.testing.assert_allclose(result, point, rtol=1e-14, atol=0)


@_SETTINGS
@given(
    cloud=st.one_of(_clouds(), _tied_clouds()), share=st.floats(0.501, 0.95), copies=st.integers(1, 3), seed=_SEEDS
)
def test_coordinate_median_returns_a_point_holding_more_than_half_the_weight_exactly(cloud, share, copies, seed):
  heavy, points, weights = _with_a_heavy_point(np.random.default_rng(seed), cloud[0], cloud[1], share, copies)
  np.testing.assert_array_equal(robust_statistics.weighted_coordinate_median(points, weights), heavy)


@_SETTINGS
@given(cloud=_clouds(max_points=3), num_byzantine=st.integers(1, 2), extra=st.integers(0, 3), seed=_SEEDS)
def test_krum_rules_return_a_point_sent_by_all_but_num_byzantine_plus_one_clients(cloud, num_byzantine, extra, seed):
  # Copies of one point have Krum score 0 once they are at least m - f - 1 of the m points, so repeated Krum
  # selects only copies; multi-Krum selecting at most that many, and Bulyan, return the point.
  others, other_weights = cloud[0][:num_byzantine + 1], cloud[1][:num_byzantine + 1]
  num_points = 4 * num_byzantine + 3 + extra
  heavy, points, weights = _with_a_heavy_point(
      np.random.default_rng(seed), others, other_weights, 0.5, num_points - len(others)
  )
  for result in (
      robust_statistics.multi_krum(points, weights, num_byzantine, num_points - num_byzantine - 1),
      robust_statistics.bulyan(points, weights, num_byzantine),
  ):
    np.testing.assert_allclose(result, heavy, rtol=1e-14, atol=0)


@_SETTINGS
@given(
    name=st.sampled_from(sorted(_RULES)),
    cloud=_clouds(min_points=3 * 2 + 3, max_points=11),
    num_byzantine=st.integers(1, 2),
    log_distance=st.floats(3.0, 30.0),
)
def test_num_byzantine_far_points_cannot_drag_a_rule_out_of_the_range_of_the_others(
    name, cloud, num_byzantine, log_distance
):
  # f points 1e3 ... 1e30 away in every coordinate; trimmed mean trims k = f values, and the outliers' total
  # weight stays below the others' (the coordinate median's condition).
  honest, honest_weights, rng = cloud
  signs = rng.choice([-1.0, 1.0], size=(num_byzantine, honest.shape[1]))
  outliers = honest.mean(axis=0) + signs * 10.0**log_distance * _spread(honest)
  points = np.concatenate([honest, outliers])
  weights = np.concatenate([honest_weights, np.full(num_byzantine, honest_weights.min())])
  order = rng.permutation(len(points))
  points, weights = points[order], weights[order]
  rules = {
      'coordinate_median': robust_statistics.weighted_coordinate_median,
      'trimmed_mean': lambda p, w: robust_statistics.coordinate_trimmed_mean(p, w, num_byzantine / len(p)),
      'krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, 1),
      'multi_krum': lambda p, w: robust_statistics.multi_krum(p, w, num_byzantine, len(p) - num_byzantine),
      'bulyan': lambda p, w: robust_statistics.bulyan(p, w, num_byzantine),
  }
  _assert_in_box(rules[name](points, weights), honest)


@_SETTINGS
@given(cloud=st.one_of(_clouds(), _tied_clouds()), num_zero=st.integers(1, 4), seed=_SEEDS)
def test_zero_weight_rows_never_move_the_coordinate_median(cloud, num_zero, seed):
  # Only the median has this property in NumPy: trimming counts and Krum scores include zero-weight rows.
  # (The gathering TFF factories drop such rows before applying any rule.)
  points, weights = cloud[:2]
  rng = np.random.default_rng(seed)
  ghosts = rng.normal(size=(num_zero, points.shape[1])) * 10 * _spread(points)
  order = rng.permutation(len(points) + num_zero)
  with_ghosts = np.concatenate([points, ghosts])[order]
  ghost_weights = np.concatenate([weights, np.zeros(num_zero)])[order]
  np.testing.assert_array_equal(
      robust_statistics.weighted_coordinate_median(with_ghosts, ghost_weights),
      robust_statistics.weighted_coordinate_median(points, weights),
  )


# ---------------------------------------------------------------------------------------------------
# Weighted quantile, superquantile and the MM quantile iteration (Delta-FL).

_QUANTILE_VALUES = st.integers(-512, 512).map(lambda n: n / 8.0)  # ties likely, distinct values >= 1/8 apart


@st.composite
def _weighted_values(draw, allow_zero_weights=True, integer_weights=False):
  """(values [n], weights [n] >= 0 with a positive sum)."""
  size = draw(st.integers(1, 12))
  values = draw(hnp.arrays(np.float64, size, elements=_QUANTILE_VALUES))
  if integer_weights:
    elements = st.integers(0 if allow_zero_weights else 1, 6).map(float)
  else:
    elements = st.floats(1e-3, 1e3) | (st.just(0.0) if allow_zero_weights else st.nothing())
  weights = draw(hnp.arrays(np.float64, size, elements=elements))
  assume(weights.sum() > 0)
  return values, weights


def _weight_below(values, weights, threshold, *, inclusive):
  return weights[values <= threshold].sum() if inclusive else weights[values < threshold].sum()


@_SETTINGS
@given(sample=_weighted_values(), level=st.floats(0.0, 1.0), end=st.sampled_from(['lower', 'upper']))
def test_weighted_quantile_is_an_input_value_that_splits_the_weight_at_the_level(sample, level, end):
  # Property 7 with the module's convention: cumulative weights within TIE_TOLERANCE * W of level * W count
  # as reaching it; 'lower' is the smallest value whose weight at or below reaches level * W (minus the
  # tolerance), 'upper' the smallest whose weight at or below exceeds it (plus the tolerance).
  values, weights = sample
  total = weights.sum()
  result = superquantile.weighted_quantile(values, weights, level, end=end)
  assert result in values[weights > 0]
  at_or_below = _weight_below(values, weights, result, inclusive=True)
  below = _weight_below(values, weights, result, inclusive=False)
  slack = 1e-12 * total  # the reference's cumulative sums add in another order
  smallest = values[weights > 0].min()
  if end == 'lower':
    target = (level - superquantile.TIE_TOLERANCE) * total
    assert at_or_below >= target - slack
    assert below < target + slack or result == smallest  # no smaller value reaches the target
  else:
    target = (level + superquantile.TIE_TOLERANCE) * total
    assert below <= target + slack  # no smaller value exceeds the target
    assert at_or_below > target - slack or result == values[weights > 0].max()


@_SETTINGS
@given(
    sample=_weighted_values(),
    level=st.floats(0.0, 1.0),
    end=st.sampled_from(['lower', 'upper']),
    factor=st.floats(-3.0, 3.0).map(lambda exponent: 10.0**exponent),
    shift=st.floats(-1e3, 1e3),
    weight_scale=_SCALES,
    seed=_SEEDS,
)
def test_weighted_quantile_commutes_with_increasing_affine_maps_and_ignores_order_and_weight_scale(
    sample, level, end, factor, shift, weight_scale, seed
):
  values, weights = sample
  expected = superquantile.weighted_quantile(values, weights, level, end=end)
  moved = superquantile.weighted_quantile(factor * values + shift, weights, level, end=end)
  assert moved == factor * expected + shift
  order = np.random.default_rng(seed).permutation(len(values))
  assert superquantile.weighted_quantile(values[order], weights[order], level, end=end) == expected
  assert superquantile.weighted_quantile(values, weights * weight_scale, level, end=end) == expected


@_SETTINGS
@given(sample=st.one_of(_weighted_values(), _weighted_values(integer_weights=True)), level=st.floats(0.0, 1.0))
def test_upper_quantile_of_the_negated_values_is_the_negated_lower_quantile(sample, level):
  values, weights = sample
  lower = superquantile.weighted_quantile(values, weights, level, end='lower')
  assert superquantile.weighted_quantile(-values, weights, 1.0 - level, end='upper') == -lower


@_SETTINGS
@given(
    sample=_weighted_values(allow_zero_weights=False),
    levels=st.lists(st.floats(1e-3, 1.0), min_size=2, max_size=2).map(sorted),
    seed=_SEEDS,
)
def test_superquantile_lies_between_the_mean_and_the_maximum_falls_with_the_level_and_minimises_eq_2(
    sample, levels, seed
):
  values, weights = sample
  tolerance = 1e-12 * (np.max(np.abs(values)) + 1)
  strict, loose = (superquantile.superquantile(values, weights, level) for level in levels)
  mean = np.average(values, weights=weights)
  assert mean - tolerance <= loose <= strict + tolerance <= values.max() + 2 * tolerance
  assert superquantile.superquantile(values, weights, 1.0) == pytest.approx(mean, rel=1e-12, abs=tolerance)
  assert strict >= superquantile.weighted_quantile(values, weights, 1 - levels[0]) - tolerance
  candidates = np.concatenate([values, np.random.default_rng(seed).uniform(values.min() - 1, values.max() + 1, 20)])
  objective = [superquantile.superquantile_objective(eta, values, weights, levels[0]) for eta in candidates]
  assert min(objective) >= strict - tolerance


@_SETTINGS
@given(
    sample=_weighted_values(allow_zero_weights=False),
    level=st.floats(1e-3, 1.0),
    factor=_SCALES,
    shift=st.floats(-1e3, 1e3),
)
def test_superquantile_commutes_with_increasing_affine_maps_at_scales_1e_minus_30_to_1e30(
    sample, level, factor, shift
):
  values, weights = sample
  expected = factor * superquantile.superquantile(values, weights, level) + shift
  result = superquantile.superquantile(factor * values + shift, weights, level)
  assert np.isfinite(result)
  assert result == pytest.approx(expected, rel=1e-9, abs=1e-9 * (factor * np.max(np.abs(values)) + abs(shift)))


def _mm_step(values, weights, level, estimate, relative_smoothing):
  (next_estimate, _), = superquantile.mm_quantile_iterates(
      values, weights, level, initial_estimate=estimate, num_passes=1, relative_smoothing=relative_smoothing
  )
  return next_estimate


@_SETTINGS
@given(
    sample=_weighted_values(),
    level=st.floats(1e-3, 1 - 1e-3),  # at levels 0 and 1 the interval is unbounded: (-inf, min], [max, inf)
    log_smoothing=st.floats(-4.0, -0.5),
    offsets=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=20),
)
def test_mm_step_moves_towards_the_quantile_interval_so_its_fixed_points_lie_within_the_guard(
    sample, level, log_smoothing, offsets
):
  # The docstring's claim: the smoothed MM fixed point lies within nu of the quantile. Checked without
  # running to convergence: from any estimate mu farther than nu(mu) = max(1e-12, s |mu|) below the lower end
  # (above the upper end) of the quantile interval, one MM pass moves up (down).
  values, weights = sample
  relative_smoothing = 10.0**log_smoothing
  lower = superquantile.weighted_quantile(values, weights, level, end='lower')
  upper = superquantile.weighted_quantile(values, weights, level, end='upper')
  span = values.max() - values.min() + 1.0
  for offset in offsets:
    for estimate in (lower - offset * span, upper + offset * span):
      guard = max(superquantile.MIN_SMOOTHING, relative_smoothing * abs(estimate))
      step = _mm_step(values, weights, level, estimate, relative_smoothing) - estimate
      if estimate < lower - guard:
        assert step > 0, (estimate, step)
      elif estimate > upper + guard:
        assert step < 0, (estimate, step)


@_SETTINGS
@given(
    sample=_weighted_values(allow_zero_weights=False),
    level=st.floats(0.0, 1.0),
    log_smoothing=st.floats(-4.0, -0.5),
    initial_estimate=st.floats(0.5, 5.0) | st.floats(-5.0, -0.5),
    scale=st.floats(-30.0, 30.0).map(lambda exponent: 10.0**exponent),
)
def test_mm_iterates_are_finite_at_every_scale_and_scale_with_the_values_above_the_guard_floor(
    sample, level, log_smoothing, initial_estimate, scale
):
  values, weights = sample
  relative_smoothing = 10.0**log_smoothing
  iterates = superquantile.mm_quantile_iterates(
      values, weights, level, initial_estimate=initial_estimate, num_passes=8, relative_smoothing=relative_smoothing
  )
  scaled = superquantile.mm_quantile_iterates(
      scale * values, weights, level, initial_estimate=scale * initial_estimate, num_passes=8,
      relative_smoothing=relative_smoothing,
  )
  assert np.all(np.isfinite(scaled))
  # The guard max(1e-12, s |mu|) has an absolute floor: equivariance needs s |mu_t| above it at both scales.
  estimates = [initial_estimate] + [estimate for estimate, _ in iterates[:-1]]
  smallest_guard = min(relative_smoothing * abs(e) for e in estimates) * min(1.0, scale)
  floor_binds = smallest_guard < 10 * superquantile.MIN_SMOOTHING
  if not floor_binds:
    np.testing.assert_allclose(np.array(scaled), scale * np.array(iterates), rtol=1e-8)


# ---------------------------------------------------------------------------------------------------
# Fed+: prox, residual, the aggregation objective and the aggregator (FedGeoMed+ 'l2', FedCoMed+ 'l1').

_ROBUST_KINDS = ('l2', 'l1')
_DELTAS = st.floats(-2.0, 1.0).map(lambda exponent: 10.0**exponent)
_SMALL_VECTORS = hnp.arrays(np.float64, st.integers(1, 5), elements=st.floats(-10.0, 10.0))  # one party's model


def _psi_over_sigma(theta, delta, kind):
  if kind == 'squared_l2':
    return delta / 2 * theta @ theta
  return delta * (np.linalg.norm(theta) if kind == 'l2' else np.abs(theta).sum())


@_SETTINGS
@given(
    vector=_SMALL_VECTORS,
    delta=_DELTAS,
    kind=st.sampled_from(fedplus.PSI_KINDS),
    seed=_SEEDS,
)
def test_prox_and_residual_split_the_vector_and_the_prox_minimises_eq_11(vector, delta, kind, seed):
  prox = fedplus.prox(vector, delta, kind)
  residual = fedplus.residual(vector, delta, kind)
  np.testing.assert_allclose(prox + residual, vector, rtol=1e-12, atol=1e-12)
  if kind == 'l2':
    assert np.linalg.norm(residual) <= delta * (1 + 1e-12)
  elif kind == 'l1':
    assert np.max(np.abs(residual)) <= delta
  else:
    np.testing.assert_allclose(residual, delta / (1 + delta) * vector, rtol=1e-12)
  objective = lambda theta: _psi_over_sigma(theta, delta, kind) + 0.5 * np.sum((vector - theta) ** 2)
  nudges = np.random.default_rng(seed).normal(size=(20, len(vector))) * 10.0 ** np.arange(-6, 4)[:, None].repeat(2, 0)
  assert min(objective(prox + nudge) for nudge in nudges) >= objective(prox) - 1e-12 * (1 + objective(prox))


@_SETTINGS
@given(
    vectors=st.integers(1, 5).flatmap(
        lambda size: st.tuples(*[hnp.arrays(np.float64, size, elements=st.floats(-10.0, 10.0))] * 2)
    ),
    delta=_DELTAS,
    kind=st.sampled_from(fedplus.PSI_KINDS),
)
def test_prox_and_residual_are_firmly_nonexpansive(vectors, delta, kind):
  first, second = vectors
  difference = first - second
  for operator in (fedplus.prox, fedplus.residual):
    moved = operator(first, delta, kind) - operator(second, delta, kind)
    assert moved @ moved <= moved @ difference + 1e-12 * (1 + difference @ difference)


@_SETTINGS
@given(
    vector=_SMALL_VECTORS,
    delta=_DELTAS,
    kind=st.sampled_from(fedplus.PSI_KINDS),
    scale=_SCALES,
    seed=_SEEDS,
)
def test_prox_scales_with_delta_and_commutes_with_the_symmetries_of_its_norm(vector, delta, kind, scale, seed):
  rng = np.random.default_rng(seed)
  scaled_delta = delta if kind == 'squared_l2' else delta * scale  # 'squared_l2' is linear in v
  np.testing.assert_allclose(
      fedplus.prox(scale * vector, scaled_delta, kind), scale * fedplus.prox(vector, delta, kind),
      rtol=1e-12, atol=1e-12 * scale,
  )
  symmetry = (_orthogonal if kind != 'l1' else _signed_permutation)(rng, len(vector))
  np.testing.assert_allclose(
      fedplus.prox(symmetry @ vector, delta, kind), symmetry @ fedplus.prox(vector, delta, kind),
      rtol=1e-9, atol=1e-9 * (1 + np.max(np.abs(vector))),
  )


def _fedplus(points, weights, delta, kind, solver, max_iterations=20):
  return fedplus.aggregate(
      points, delta, kind, weights=weights, solver=solver, max_iterations=max_iterations, tolerance=0.0
  )


def _fedplus_iterates(points, weights, delta, kind, solver, max_iterations=20):
  """All max_iterations + 1 iterates: a run that stopped on an exactly zero step repeats its last iterate."""
  iterates = _fedplus(points, weights, delta, kind, solver, max_iterations).iterates
  return np.array(iterates + iterates[-1:] * (max_iterations + 1 - len(iterates)))


@_SETTINGS
@given(
    cloud=_clouds(),
    kind=st.sampled_from(_ROBUST_KINDS),
    solver=st.sampled_from(fedplus.SOLVERS),
    delta=_DELTAS,
)
def test_fedplus_aggregate_commutes_with_translations_the_symmetries_of_its_norm_and_client_order(
    cloud, kind, solver, delta
):
  # 'l2' (FedGeoMed+): every orthogonal map; 'l1' (FedCoMed+): signed coordinate permutations.
  points, weights, rng = cloud
  symmetry = (_orthogonal if kind == 'l2' else _signed_permutation)(rng, points.shape[1])
  shift = rng.normal(size=points.shape[1]) * 10 * _spread(points)
  order = rng.permutation(len(points))
  moved = _fedplus_iterates(points[order] @ symmetry.T + shift, weights[order], delta, kind, solver)
  expected = _fedplus_iterates(points, weights, delta, kind, solver)
  np.testing.assert_allclose(
      moved, expected @ symmetry.T + shift,
      rtol=0, atol=1e-8 * (_spread(points) + np.max(np.abs(shift))),
  )


@_SETTINGS
@given(
    cloud=_clouds(),
    kind=st.sampled_from(_ROBUST_KINDS),
    solver=st.sampled_from(fedplus.SOLVERS),
    delta=_DELTAS,
    scale=_SCALES,
)
def test_fedplus_aggregate_scales_with_the_points_and_delta_from_1e_minus_30_to_1e30(
    cloud, kind, solver, delta, scale
):
  points, weights, _ = cloud
  scaled = _fedplus_iterates(scale * points, weights, scale * delta, kind, solver)
  assert np.all(np.isfinite(scaled))
  np.testing.assert_allclose(
      scaled, scale * _fedplus_iterates(points, weights, delta, kind, solver),
      rtol=1e-9, atol=1e-9 * scale * _spread(points),
  )


@_SETTINGS
@given(
    cloud=st.one_of(_clouds(), _tied_clouds()),
    kind=st.sampled_from(_ROBUST_KINDS),
    solver=st.sampled_from(fedplus.SOLVERS),
    delta=_DELTAS,
)
def test_fedplus_iterates_stay_in_the_bounding_box_and_never_raise_the_objective(cloud, kind, solver, delta):
  # Both solvers: the fixed-point step is gradient descent with step 1 on a 1-Lipschitz gradient, IRLS is
  # majorization-minimization of the Huber objective.
  points, weights = cloud[:2]
  iterates = _fedplus(points, weights, delta, kind, solver).iterates
  _assert_in_box(np.array(iterates), points)
  objectives = [fedplus.aggregation_objective(w, points, delta, kind, weights=weights) for w in iterates]
  assert np.all(np.diff(objectives) <= 1e-12 * (1 + abs(objectives[0]))), objectives


@_SETTINGS
@given(
    cloud=_clouds(),
    kind=st.sampled_from(_ROBUST_KINDS),
    solver=st.sampled_from(fedplus.SOLVERS),
    delta=_DELTAS,
)
def test_fedplus_fixed_point_residual_is_bounded_by_the_step_it_causes(cloud, kind, solver, delta):
  # 'fixed_point' steps by the residual itself; an IRLS step is the residual divided by sum(omega)/sum(a) <= 1
  # (per coordinate for 'l1'). So a converged run (step <= tolerance) has residual <= tolerance: eq. (49).
  points, weights, _ = cloud
  result = _fedplus(points, weights, delta, kind, solver)
  for before, after in zip(result.iterates, result.iterates[1:]):
    residual = fedplus.fixed_point_residual(before, points, delta, kind, weights=weights)
    assert np.all(np.abs(residual) <= np.abs(after - before) * (1 + 1e-9) + 1e-12 * _spread(points))


@_SETTINGS
@given(cloud=_clouds(max_points=6), kind=st.sampled_from(fedplus.PSI_KINDS), delta=_DELTAS)
def test_fixed_point_residual_is_minus_the_gradient_of_the_aggregation_objective(cloud, kind, delta):
  points, weights, rng = cloud
  center = points[0] + rng.normal(size=points.shape[1]) * delta
  step = 1e-5 * delta  # G's gradient is 1-Lipschitz: central differences are off by at most step / 2
  objective = lambda w: fedplus.aggregation_objective(w, points, delta, kind, weights=weights)
  gradient = [
      (objective(center + step * unit) - objective(center - step * unit)) / (2 * step)
      for unit in np.eye(points.shape[1])
  ]
  np.testing.assert_allclose(
      fedplus.fixed_point_residual(center, points, delta, kind, weights=weights), -np.array(gradient),
      rtol=1e-4, atol=1e-4 * delta,
  )


@_SETTINGS
@given(
    point=hnp.arrays(np.float64, st.integers(1, 4), elements=_COORDINATES),
    weights=hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(1e-3, 1e3)),
    kind=st.sampled_from(fedplus.PSI_KINDS),
    solver=st.sampled_from(fedplus.SOLVERS),
)
def test_fedplus_aggregate_of_identical_points_is_that_point(point, weights, kind, solver):
  result = _fedplus(np.tile(point, (len(weights), 1)), weights, 0.1, kind, solver)
  np.testing.assert_allclose(result.aggregate, point, rtol=1e-14, atol=0)


@_FEW
@given(
    cloud=_clouds(max_points=8),
    kind=st.sampled_from(_ROBUST_KINDS),
    delta=_DELTAS,
    share=st.floats(0.55, 0.95),
    copies=st.integers(1, 3),
)
def test_fedplus_aggregate_stays_within_delta_times_the_minority_ratio_of_a_heavy_point(
    cloud, kind, delta, share, copies
):
  # At a fixed point the heavy point's residual (norm min(D, delta), weight A) balances the others' (each at
  # most delta, total weight W - A): D <= delta (W - A) / A (per coordinate for 'l1'). With a residual R
  # left, D <= ((W - A) delta + W |R|) / A.
  others, other_weights, rng = cloud
  heavy, points, weights = _with_a_heavy_point(rng, others, other_weights, share, copies)
  result = _fedplus(points, weights, delta, kind, 'irls', max_iterations=500)
  residual = fedplus.fixed_point_residual(result.aggregate, points, delta, kind, weights=weights)
  heavy_weight, total = share * weights.sum(), weights.sum()
  if kind == 'l2':
    distance, residual = np.linalg.norm(result.aggregate - heavy), np.linalg.norm(residual)
  else:
    distance, residual = np.abs(result.aggregate - heavy), np.abs(residual)
  assert np.all(residual * total < (2 * heavy_weight - total) * delta)  # close enough to the fixed point
  assert np.all(distance <= ((total - heavy_weight) * delta + total * residual) / heavy_weight * (1 + 1e-9))
