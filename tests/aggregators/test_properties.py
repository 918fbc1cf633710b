"""Property-based tests (hypothesis) of the TFF aggregation factories on random weights, shapes and scales.

Each factory is checked against its NumPy reference (whose own properties tests/core/test_properties.py
checks) on value types [4], [2, 3] and a named structure of two tensors, with random weights, zero-weight
clients and client orders; then at scales 2^-100 ... 2^100 (7.9e-31 ... 1.3e30, all representable in
float32; powers of two keep the float32 inputs exact, so results must scale to float32 precision). Where a
factory cannot reach that range the test says so and a regression test shows the failure. Every factory that
takes float16 values is also swept over float16's own range (largest entries 2^-2 ... 2^15 below its 65504)
against the same references, to float16 precision: the arithmetic inside is float32 (issue 25).

A TFF call costs 0.05-1 s and every new process is traced and compiled once (lru_cache below), so the
examples are few and the shapes and scales come from small fixed sets. Every run draws the same examples
(`derandomize=True`, no example database).
"""

import collections
import functools

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import delta_median
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import quantile
from tff_robust.core import fedplus
from tff_robust.core import robust_statistics
from tff_robust.core import superquantile
from tff_robust.core import weiszfeld

_SETTINGS = settings(max_examples=12, deadline=None, database=None, derandomize=True)
_WEIGHT_TYPE = tff.TensorType(np.float32)
# A vector, a matrix and a named structure whose keys are not in sorted order (tf.nest would sort them).
_SHAPES = {
    'vector': [4],
    'matrix': [2, 3],
    'kernel_and_bias': collections.OrderedDict(kernel=[2, 2], bias=[2]),
}
_POWERS_OF_TWO = st.integers(-100, 100).map(lambda exponent: 2.0**exponent)  # 7.9e-31 ... 1.3e30
_FLOAT16_POWERS_OF_TWO = st.integers(-8, 8).map(lambda exponent: 2.0**exponent)
_FLOAT16_SHAPE = 'kernel_and_bias'
_F = 1  # num_byzantine of the Krum-based factories.


def _value_type(shape, dtype=np.float32):
  if isinstance(_SHAPES[shape], dict):
    return tff.to_type(collections.OrderedDict((k, (dtype, s)) for k, s in _SHAPES[shape].items()))
  return tff.TensorType(dtype, _SHAPES[shape])


def _dimension(shape):
  sizes = _SHAPES[shape].values() if isinstance(_SHAPES[shape], dict) else [_SHAPES[shape]]
  return sum(int(np.prod(size)) for size in sizes)


def _client_value(shape, row):
  if not isinstance(_SHAPES[shape], dict):
    return row.reshape(_SHAPES[shape])
  value, start = collections.OrderedDict(), 0
  for key, size in _SHAPES[shape].items():
    value[key] = row[start:start + int(np.prod(size))].reshape(size)
    start += int(np.prod(size))
  return value


def _flat(result):
  leaves = result.values() if isinstance(result, dict) else [result]
  return np.concatenate([np.ravel(leaf) for leaf in leaves]).astype(np.float64)


@functools.lru_cache(maxsize=None)
def _process(shape, build, *args, dtype=np.float32):
  """The aggregation process of `_FACTORIES[build](*args)` for `shape` in `dtype`, traced once per session."""
  return _FACTORIES[build](*args).create(_value_type(shape, dtype), _WEIGHT_TYPE)


def _aggregate(shape, points, weights, build, *args, dtype=np.float32):
  """(flat result, measurements) of one call of the process on rows `points` (as `dtype`) with `weights`."""
  process = _process(shape, build, *args, dtype=dtype)
  values = [_client_value(shape, row) for row in np.asarray(points, dtype)]
  output = process.next(process.initialize(), values, [np.float32(w) for w in weights])
  return _flat(output.result), output.measurements


_FACTORIES = {
    'coordinate_median': baselines.coordinate_median_factory,
    'trimmed_mean': lambda: baselines.trimmed_mean_factory(0.2),
    'multi_krum': lambda: baselines.multi_krum_factory(_F),
    'multi_krum_2': lambda: baselines.multi_krum_factory(_F, num_selected=2),
    'bulyan': lambda: baselines.bulyan_factory(_F),
    'geometric_median': lambda passes, init, smoothing: geometric_median.GeometricMedianFactory(
        num_passes=passes, smoothing=smoothing, init=init
    ),
    'delta_median': lambda norm, solver, delta: delta_median.DeltaMedianFactory(
        norm, delta, solver=solver, max_iterations=5, tolerance=0.0
    ),
    'norm_clipping': baselines.norm_clipping_factory,
}
_GATHERING_REFERENCES = {
    'coordinate_median': robust_statistics.weighted_coordinate_median,
    'trimmed_mean': lambda p, w: robust_statistics.coordinate_trimmed_mean(p, w, 0.2),
    'multi_krum': lambda p, w: robust_statistics.multi_krum(p, w, _F, len(p) - _F),
    'multi_krum_2': lambda p, w: robust_statistics.multi_krum(p, w, _F, 2),
    'bulyan': lambda p, w: robust_statistics.bulyan(p, w, _F),
}


@st.composite
def _clouds(draw, min_points=4 * _F + 3, max_points=9, max_zero_weights=2, shapes=tuple(_SHAPES)):
  """(shape, points [m, d] float32, weights [m] float32): Gaussian points, some far, weights 1/10 ... 10.

  Up to `max_zero_weights` more rows, in random places, have weight 0: clients every factory must ignore.
  """
  shape = draw(st.sampled_from(shapes))
  num_points, num_zero = draw(st.integers(min_points, max_points)), draw(st.integers(0, max_zero_weights))
  rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
  points = rng.normal(size=(num_points + num_zero, _dimension(shape)))
  points[:num_points // 4] *= 10.0 ** rng.uniform(1, 3, size=(num_points // 4, 1))
  weights = 10.0 ** rng.uniform(-1, 1, num_points + num_zero)
  weights[num_points:] = 0.0
  order = rng.permutation(num_points + num_zero)
  return shape, points[order].astype(np.float32), weights[order].astype(np.float32)


def _spread(points):
  return float(np.max(np.abs(points))) or 1.0


def _in_float16(points, scale):
  """`points` scaled to largest |entry| 2^6 * scale (at most 2^14 < 65504 for scale <= 2^8), in float16."""
  return (points / _spread(points) * 2.0**6 * scale).astype(np.float16)


def _used(points, weights):
  """The rows with positive weight, in float64 for the references."""
  return points[weights > 0].astype(np.float64), weights[weights > 0].astype(np.float64)


# ---------------------------------------------------------------------------------------------------
# Gather-based baselines: coordinate median, trimmed mean, multi-Krum, Bulyan.


@pytest.mark.parametrize('name', sorted(_GATHERING_REFERENCES))
@_SETTINGS
@given(cloud=_clouds())
def test_gathering_factories_match_their_numpy_references_and_drop_zero_weight_clients(name, cloud):
  shape, points, weights = cloud
  result, measurements = _aggregate(shape, points, weights, name)
  expected = _GATHERING_REFERENCES[name](*_used(points, weights))
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6 * _spread(points))
  assert measurements['num_clients_used'] == np.count_nonzero(weights)
  assert measurements['num_nonfinite_clients'] == np.count_nonzero(weights == 0)  # dropped rows are counted


@pytest.mark.parametrize('name', sorted(_GATHERING_REFERENCES))
@_SETTINGS
@given(cloud=_clouds(), seed=st.integers(0, 2**32 - 1))
def test_gathering_factories_ignore_the_order_of_the_clients(name, cloud, seed):
  shape, points, weights = cloud
  order = np.random.default_rng(seed).permutation(len(points))
  np.testing.assert_allclose(
      _aggregate(shape, points[order], weights[order], name)[0], _aggregate(shape, points, weights, name)[0],
      rtol=1e-6, atol=1e-6 * _spread(points),
  )


@pytest.mark.parametrize('name', sorted(_GATHERING_REFERENCES))
@_SETTINGS
@given(cloud=_clouds(), scale=_POWERS_OF_TWO)
def test_gathering_factories_are_finite_and_scale_from_2_to_the_minus_100_to_2_to_the_100(name, cloud, scale):
  shape, points, weights = cloud
  scaled, _ = _aggregate(shape, points * np.float32(scale), weights, name)
  assert np.all(np.isfinite(scaled))
  np.testing.assert_allclose(scaled, scale * _aggregate(shape, points, weights, name)[0], rtol=1e-6, atol=0)


@pytest.mark.parametrize('name', sorted(_GATHERING_REFERENCES))
@_SETTINGS
@given(cloud=_clouds(shapes=(_FLOAT16_SHAPE,)), scale=_FLOAT16_POWERS_OF_TWO)
def test_gathering_factories_match_their_references_on_float16_values_at_float16_scales(name, cloud, scale):
  shape, points, weights = cloud
  points = _in_float16(points, scale)
  result, _ = _aggregate(shape, points, weights, name, dtype=np.float16)
  assert np.all(np.isfinite(result))
  expected = _GATHERING_REFERENCES[name](*_used(points, weights))
  np.testing.assert_allclose(result, expected, rtol=1e-3, atol=1e-6 * _spread(points))


@pytest.mark.parametrize('name', sorted(_GATHERING_REFERENCES))
@_SETTINGS
@given(
    shape=st.sampled_from(sorted(_SHAPES)),
    scale=_POWERS_OF_TWO,
    weights=hnp.arrays(np.float32, st.integers(4 * _F + 3, 9), elements=st.floats(0.125, 8.0, width=32)),
    seed=st.integers(0, 2**32 - 1),
)
def test_gathering_factories_return_the_point_that_every_client_sent(name, shape, scale, weights, seed):
  point = (np.random.default_rng(seed).normal(size=_dimension(shape)) * scale).astype(np.float32)
  result, _ = _aggregate(shape, np.tile(point, (len(weights), 1)), weights, name)
  np.testing.assert_allclose(result, point, rtol=1e-6, atol=0)


@_SETTINGS
@given(cloud=_clouds(min_points=1), share=st.floats(0.51, 0.95), seed=st.integers(0, 2**32 - 1))
def test_coordinate_median_factory_returns_a_point_holding_more_than_half_the_weight_exactly(cloud, share, seed):
  shape, others, other_weights = cloud
  rng = np.random.default_rng(seed)
  heavy = rng.normal(size=others.shape[1]).astype(np.float32)
  copies = rng.integers(1, 4)
  heavy_weight = share / (1 - share) * other_weights.sum() / copies
  points = np.concatenate([np.tile(heavy, (copies, 1)), others])
  weights = np.concatenate([np.full(copies, heavy_weight, np.float32), other_weights])
  order = rng.permutation(len(points))
  result, _ = _aggregate(shape, points[order], weights[order], 'coordinate_median')
  np.testing.assert_array_equal(result, heavy)


# ---------------------------------------------------------------------------------------------------
# GeometricMedianFactory (RFA): smoothed Weiszfeld by secure averages.


@pytest.mark.parametrize('init', ['mean', 'zero'])
@_SETTINGS
@given(cloud=_clouds(min_points=1), seed=st.integers(0, 2**32 - 1))
def test_geometric_median_factory_matches_smoothed_weiszfeld_in_any_client_order(init, cloud, seed):
  shape, points, weights = cloud
  reference = weiszfeld.smoothed_weiszfeld(*_used(points, weights), num_passes=3, smoothing=1e-6, init=init)
  order = np.random.default_rng(seed).permutation(len(points))
  for rows in (slice(None), order):
    result, measurements = _aggregate(shape, points[rows], weights[rows], 'geometric_median', 3, init, 1e-6)
    tolerance = 1e-5 * _spread(points)
    np.testing.assert_allclose(result, reference.iterates[-1], rtol=1e-5, atol=tolerance)
    np.testing.assert_allclose(measurements['objective'], reference.objectives, rtol=1e-4, atol=tolerance)


@_SETTINGS
@given(
    cloud=_clouds(min_points=1, shapes=('kernel_and_bias',)),
    scale=st.sampled_from([2.0**-100, 2.0**100]),
)
def test_geometric_median_factory_scales_with_its_smoothing_from_2_to_the_minus_100_to_2_to_the_100(cloud, scale):
  shape, points, weights = cloud
  scaled_points = points * np.float32(scale)
  scaled, measurements = _aggregate(shape, scaled_points, weights, 'geometric_median', 3, 'mean', 1e-6 * scale)
  assert np.all(np.isfinite(scaled)) and np.all(np.isfinite(measurements['objective']))
  expected = scale * _aggregate(shape, points, weights, 'geometric_median', 3, 'mean', 1e-6)[0]
  np.testing.assert_allclose(scaled, expected, rtol=1e-5, atol=1e-5 * scale * _spread(points))


@_SETTINGS
@given(cloud=_clouds(min_points=1), scale=_POWERS_OF_TWO)
def test_geometric_median_factory_with_the_default_smoothing_is_finite_and_in_the_box_at_every_scale(cloud, scale):
  # Distances below the smoothing 1e-6 count as 1e-6, so at small scales this is the weighted mean; the
  # result must still be finite and inside the bounding box of the used points.
  shape, points, weights = cloud
  points = points * np.float32(scale)
  result, _ = _aggregate(shape, points, weights, 'geometric_median', 3, 'mean', 1e-6)
  assert np.all(np.isfinite(result))
  used = _used(points, weights)[0]
  slack = 1e-6 * _spread(used)
  assert np.all(result >= used.min(axis=0) - slack) and np.all(result <= used.max(axis=0) + slack)


@_SETTINGS
@given(
    shape=st.sampled_from(sorted(_SHAPES)),
    init=st.sampled_from(['mean', 'zero']),
    scale=_POWERS_OF_TWO,
    weights=hnp.arrays(np.float32, st.integers(1, 8), elements=st.floats(0.125, 8.0, width=32)),
    seed=st.integers(0, 2**32 - 1),
)
def test_geometric_median_factory_returns_the_point_that_every_client_sent(shape, init, scale, weights, seed):
  # Entries up to 2^100 and total weight up to 64: sum(alpha) |x| / nu stays below float32's 3.4e38 (see
  # test_geometric_median_factory_zeroes_identical_points_whose_weiszfeld_sum_overflows_float32).
  point = np.random.default_rng(seed).uniform(-1, 1, _dimension(shape))
  point = (point / np.max(np.abs(point)) * scale).astype(np.float32)
  result, _ = _aggregate(shape, np.tile(point, (len(weights), 1)), weights, 'geometric_median', 3, init, 1e-6)
  np.testing.assert_allclose(result, point, rtol=1e-6, atol=0)


@_SETTINGS
@given(
    init=st.sampled_from(['mean', 'zero']),
    scale=st.integers(-14, 15).map(lambda exponent: 2.0**exponent),
    weights=hnp.arrays(np.float32, st.integers(1, 8), elements=st.floats(0.125, 8.0, width=32)),
    seed=st.integers(0, 2**32 - 1),
)
def test_geometric_median_factory_returns_the_float16_point_that_every_client_sent(init, scale, weights, seed):
  # Issue 25: at the iterate the Weiszfeld weights alpha / nu = 1e6 overflowed float16 in the inner mean and
  # the aggregate was zeroed (two clients sending [1, 2] got [0, 0]). Entries up to 2^15, subnormal ones too.
  point = np.random.default_rng(seed).uniform(-1, 1, _dimension(_FLOAT16_SHAPE))
  point = (point / np.max(np.abs(point)) * scale).astype(np.float16)
  result, _ = _aggregate(
      _FLOAT16_SHAPE, np.tile(point, (len(weights), 1)), weights, 'geometric_median', 3, init, 1e-6,
      dtype=np.float16,
  )
  np.testing.assert_array_equal(result, point)


@_SETTINGS
@given(cloud=_clouds(min_points=1, shapes=(_FLOAT16_SHAPE,)), scale=_FLOAT16_POWERS_OF_TWO)
def test_geometric_median_factory_matches_smoothed_weiszfeld_on_float16_values_at_float16_scales(cloud, scale):
  shape, points, weights = cloud
  points = _in_float16(points, scale)
  result, measurements = _aggregate(
      shape, points, weights, 'geometric_median', 3, 'mean', 1e-6, dtype=np.float16
  )
  reference = weiszfeld.smoothed_weiszfeld(*_used(points, weights), num_passes=3, smoothing=1e-6, init='mean')
  assert np.all(np.isfinite(result)) and np.all(np.isfinite(measurements['objective']))
  np.testing.assert_allclose(result, reference.iterates[-1], rtol=1e-3, atol=1e-5 * _spread(points))


@_SETTINGS
@given(
    cloud=_clouds(min_points=1, max_points=4, shapes=('vector',)),
    share=st.floats(0.75, 0.95),
    seed=st.integers(0, 2**32 - 1),
)
def test_geometric_median_factory_converges_to_a_point_holding_most_of_the_weight(cloud, share, seed):
  # Weiszfeld contracts towards such a point by about (1 - share) / share per pass: 16 passes suffice at 3/4.
  shape, others, other_weights = cloud
  rng = np.random.default_rng(seed)
  heavy = rng.normal(size=others.shape[1]).astype(np.float32)
  points = np.concatenate([heavy[None], others])
  weights = np.concatenate([[share / (1 - share) * other_weights.sum()], other_weights]).astype(np.float32)
  result, _ = _aggregate(shape, points, weights, 'geometric_median', 16, 'mean', 1e-6)
  np.testing.assert_allclose(result, heavy, rtol=0, atol=1e-5 * _spread(points))


@pytest.mark.parametrize('num_passes', [2, 3, 4])
def test_geometric_median_factory_keeps_identical_points_whose_weiszfeld_sum_overflows_float32(num_passes):
  # At the iterate the Weiszfeld weights reach alpha / nu: sum(alpha) |x| / nu = 4 * 100 * 1e30 / 1e-6 overflows
  # float32. Such a pass is not taken, so every pass after the mean keeps the mean, the points themselves.
  point = np.array([1e30, -1e30, 2e29, 0.0], np.float32)
  result, measurements = _aggregate(
      'vector', np.tile(point, (4, 1)), np.full(4, 100.0), 'geometric_median', num_passes, 'mean', 1e-6
  )
  np.testing.assert_allclose(result, point, rtol=1e-6)
  assert measurements['overflowed_passes'] == num_passes - 1


# ---------------------------------------------------------------------------------------------------
# DeltaMedianFactory (Fed+): delta-geometric ('l2') and delta-coordinate-wise ('l1') medians.

_NORMS_AND_SOLVERS = [(norm, solver) for norm in delta_median.NORMS for solver in delta_median.SOLVERS]


@pytest.mark.parametrize('norm, solver', _NORMS_AND_SOLVERS)
@_SETTINGS
@given(cloud=_clouds(min_points=1), seed=st.integers(0, 2**32 - 1))
def test_delta_median_factory_matches_the_fedplus_iterations_in_any_client_order(norm, solver, cloud, seed):
  shape, points, weights = cloud
  used_points, used_weights = _used(points, weights)
  reference = fedplus.aggregate(
      used_points, 0.5, norm, weights=used_weights, solver=solver, max_iterations=5, tolerance=0.0
  )
  order = np.random.default_rng(seed).permutation(len(points))
  for rows in (slice(None), order):
    result, _ = _aggregate(shape, points[rows], weights[rows], 'delta_median', norm, solver, 0.5)
    np.testing.assert_allclose(result, reference.aggregate, rtol=1e-5, atol=1e-5 * _spread(points))


@pytest.mark.parametrize('norm, solver', _NORMS_AND_SOLVERS)
@_SETTINGS
@given(
    cloud=_clouds(min_points=1, shapes=('kernel_and_bias',)),
    scale=st.sampled_from([2.0**-100, 2.0**100]),
)
def test_delta_median_factory_scales_with_delta_from_2_to_the_minus_100_to_2_to_the_100(norm, solver, cloud, scale):
  # delta must scale with the values (it is absolute), and so must the stopping tolerance: these processes
  # use tolerance 0. (With the default 1e-6, values below ~1e-6 stop after the first step.)
  shape, points, weights = cloud
  scaled_points = points * np.float32(scale)
  scaled, measurements = _aggregate(shape, scaled_points, weights, 'delta_median', norm, solver, 0.5 * scale)
  assert np.all(np.isfinite(scaled)) and np.isfinite(measurements['step_norm'])
  expected = scale * _aggregate(shape, points, weights, 'delta_median', norm, solver, 0.5)[0]
  np.testing.assert_allclose(scaled, expected, rtol=1e-5, atol=1e-5 * scale * _spread(points))


@_SETTINGS
@given(
    shape=st.sampled_from(sorted(_SHAPES)),
    norm_and_solver=st.sampled_from(_NORMS_AND_SOLVERS),
    scale=_POWERS_OF_TWO,
    weights=hnp.arrays(np.float32, st.integers(1, 8), elements=st.floats(0.125, 8.0, width=32)),
    seed=st.integers(0, 2**32 - 1),
)
def test_delta_median_factory_returns_the_point_that_every_client_sent(shape, norm_and_solver, scale, weights, seed):
  point = (np.random.default_rng(seed).normal(size=_dimension(shape)) * scale).astype(np.float32)
  result, _ = _aggregate(shape, np.tile(point, (len(weights), 1)), weights, 'delta_median', *norm_and_solver, 0.5)
  np.testing.assert_allclose(result, point, rtol=1e-6, atol=0)


@_SETTINGS
@given(
    norm_and_solver=st.sampled_from(_NORMS_AND_SOLVERS),
    cloud=_clouds(min_points=1, shapes=(_FLOAT16_SHAPE,)),
    scale=_FLOAT16_POWERS_OF_TWO,
)
def test_delta_median_factory_matches_the_fedplus_iterations_on_float16_values_at_float16_scales(
    norm_and_solver, cloud, scale
):
  # Issue 25: float16 values failed inside the computation (a float16 value times a float32 weight).
  shape, points, weights = cloud
  points = _in_float16(points, scale)
  norm, solver = norm_and_solver
  result, measurements = _aggregate(shape, points, weights, 'delta_median', norm, solver, 0.5, dtype=np.float16)
  used_points, used_weights = _used(points, weights)
  reference = fedplus.aggregate(
      used_points, 0.5, norm, weights=used_weights, solver=solver, max_iterations=5, tolerance=0.0
  )
  assert np.all(np.isfinite(result)) and np.isfinite(measurements['step_norm'])
  np.testing.assert_allclose(result, reference.aggregate, rtol=1e-3, atol=1e-5 * _spread(points))


# ---------------------------------------------------------------------------------------------------
# Quantile factories (Delta-FL): exact (gathered) and secure (MM by secure averages).

_SCALAR = tff.TensorType(np.float32)


@functools.lru_cache(maxsize=None)
def _quantile_process(kind, level, dtype=np.float32):
  value_type = tff.TensorType(dtype)
  if kind == 'exact':
    return quantile.exact_quantile_factory(level).create(value_type, _SCALAR)
  return quantile.SecureQuantileFactory(level, num_passes=5).create(value_type, _SCALAR)


def _quantile(kind, level, values, weights, dtype=np.float32):
  process = _quantile_process(kind, level, dtype)
  output = process.next(process.initialize(), [dtype(v) for v in values], [np.float32(w) for w in weights])
  return output.result, output.measurements


@_SETTINGS
@given(
    level=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
    values=hnp.arrays(np.float32, st.integers(1, 10), elements=st.integers(-64, 64).map(lambda n: n / 8)),
    weights=st.data(),
    scale=_POWERS_OF_TWO,
)
def test_exact_quantile_factory_equals_the_upper_weighted_quantile_at_every_scale(level, values, weights, scale):
  weights = weights.draw(hnp.arrays(
      np.float32, len(values), elements=st.sampled_from([0.0, 0.5, 1.0, 3.0]) | st.floats(0.125, 8.0, width=32)
  ))
  values = values * np.float32(scale)
  result, measurements = _quantile('exact', level, values, weights)
  if not np.any(weights > 0):
    assert result == 0 and measurements['insufficient_clients'] == 1
    return
  assert result == superquantile.weighted_quantile(values, weights, level, end='upper')


@pytest.mark.parametrize('level', [0.2, 0.5, 0.8])
@_SETTINGS
@given(
    values=hnp.arrays(np.float32, st.integers(1, 10), elements=st.floats(0.0625, 16.0, width=32)),
    weights=st.data(),
    scale=_POWERS_OF_TWO,
)
def test_secure_quantile_factory_matches_the_mm_iterates_and_is_finite_at_every_scale(level, values, weights, scale):
  # Five passes from 0 (not converged): the factory and the reference must agree on every pass, including
  # below ~1e-10 where the absolute guard floor 1e-12 takes over and the estimate is no longer scaled.
  weights = weights.draw(hnp.arrays(np.float32, len(values), elements=st.floats(0.125, 8.0, width=32)))
  values = values * np.float32(scale)
  result, measurements = _quantile('secure', level, values, weights)
  assert np.isfinite(result) and np.isfinite(measurements['tolerance'])
  estimate, tolerance = superquantile.mm_quantile_iterates(
      values, weights, level, initial_estimate=0.0, num_passes=5, relative_smoothing=1e-2
  )[-1]
  assert result == pytest.approx(estimate, rel=1e-4)
  assert measurements['tolerance'] == pytest.approx(tolerance, rel=1e-4)


@pytest.mark.parametrize('kind', ['exact', 'secure'])
@_SETTINGS
@given(
    level=st.sampled_from([0.2, 0.5, 0.8]),
    values=hnp.arrays(np.float16, st.integers(1, 10), elements=st.integers(1, 128).map(lambda n: n / 8)),
    weights=st.data(),
    scale=_FLOAT16_POWERS_OF_TWO,
)
def test_quantile_factories_on_float16_values_match_their_references_at_float16_scales(
    kind, level, values, weights, scale
):
  # Values n/8 * 2^k, exact in float16, from 2^-11 to 2^12. Issue 25: the secure quantile's MM weights 1 / e_k
  # (up to 1 / nu) overflowed float16 and the result was NaN.
  weights = weights.draw(hnp.arrays(np.float32, len(values), elements=st.floats(0.125, 8.0, width=32)))
  values = (values * np.float16(scale)).astype(np.float16)
  result, measurements = _quantile(kind, level, values, weights, dtype=np.float16)
  assert result.dtype == np.float16 and np.isfinite(result)
  if kind == 'exact':
    assert result == superquantile.weighted_quantile(values, weights, level, end='upper')
    return
  estimate, tolerance = superquantile.mm_quantile_iterates(
      values, weights, level, initial_estimate=0.0, num_passes=5, relative_smoothing=1e-2
  )[-1]
  assert result == pytest.approx(estimate, rel=1e-3)
  assert measurements['tolerance'] == pytest.approx(tolerance, rel=1e-4)


# ---------------------------------------------------------------------------------------------------
# Norm clipping (`norm_clipping.NormClippingFactory`: each update clipped, then a weighted mean).


def _clipped_mean(points, weights):
  rows = points.astype(np.float64)
  clipped = rows * np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(rows, axis=1), 1e-300))[:, None]
  return np.average(clipped, axis=0, weights=weights)


@_SETTINGS
@given(cloud=_clouds(min_points=1), largest_norm=_POWERS_OF_TWO)
def test_norm_clipping_factory_clips_each_update_to_norm_1_then_averages_up_to_norms_of_2_to_the_100(
    cloud, largest_norm
):
  # TFF's clipping_factory, used before, squared each norm in float32: above ~1.8e19 it was inf and the update
  # was zeroed instead of clipped (a float16 update above norm 256 too).
  shape, points, weights = cloud
  norms = np.linalg.norm(points.astype(np.float64), axis=1)
  points = (points * np.float32(largest_norm / norms.max())).astype(np.float32)
  result, _ = _aggregate(shape, points, weights, 'norm_clipping', 1.0)
  np.testing.assert_allclose(result, _clipped_mean(points, weights), rtol=1e-5, atol=1e-6)
  assert np.linalg.norm(result) <= 1.0 + 1e-6


@_SETTINGS
@given(cloud=_clouds(min_points=1, shapes=(_FLOAT16_SHAPE,)), scale=_FLOAT16_POWERS_OF_TWO)
def test_norm_clipping_factory_clips_float16_updates_to_norm_1_at_float16_scales(cloud, scale):
  shape, points, weights = cloud
  points = _in_float16(points, scale)  # norms up to 2^14 * sqrt(6), their squares far beyond float16
  result, _ = _aggregate(shape, points, weights, 'norm_clipping', 1.0, dtype=np.float16)
  np.testing.assert_allclose(result, _clipped_mean(points, weights), rtol=1e-3, atol=1e-3)


def test_norm_clipping_factory_clips_an_update_whose_squared_norm_overflows_float32():
  points = np.array([[2e19, 0, 0, 0], [0, 0.5, 0, 0]], np.float32)
  result, _ = _aggregate('vector', points, np.ones(2), 'norm_clipping', 1.0)
  np.testing.assert_allclose(result, [0.5, 0.25, 0, 0], rtol=1e-6)  # TFF's clipping_factory: [0, 0.25, 0, 0]
