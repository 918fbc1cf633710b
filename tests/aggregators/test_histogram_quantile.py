"""SecureHistogramQuantileFactory against an independent NumPy weighted quantile and its stated precision."""

import functools

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import privacy
from tff_robust.core import histogram_quantile as reference

_SCALAR = tff.TensorType(np.float32)
_T = float(np.arcsinh(np.finfo(np.float32).max))  # the first pass spans [-T, T] in asinh(x)


@functools.lru_cache(maxsize=None)
def _process(level, num_passes=2, num_bins=256, mean_factory=None):
  factory = histogram_quantile.SecureHistogramQuantileFactory(
      level, num_passes=num_passes, num_bins=num_bins, mean_factory=mean_factory
  )
  return factory.create(_SCALAR, _SCALAR)


def _run(process, values, weights):
  output = process.next(
      process.initialize(), [np.float32(v) for v in values], [np.float32(w) for w in weights]
  )
  return float(output.result), output.measurements


def _upper_quantile(values, weights, level):
  """min {x_k : sum_{x_j <= x_k} w_j > level W} (ties within 1e-6 W reach it), by sorting, in float64."""
  values, weights = np.asarray(values, np.float64), np.asarray(weights, np.float64)
  keep = weights > 0
  values, weights = values[keep], weights[keep]
  order = np.argsort(values)
  cumulative = np.cumsum(weights[order])
  above = np.nonzero(cumulative > (level + 1e-6) * cumulative[-1])[0]
  return values[order][above[0] if above.size else -1]


def _random_case(rng):
  """Cohorts of 1 to 40 with ties (2 decimals), ~25% zero losses, equal or skewed weights."""
  size = int(rng.choice([1, 2, 3, 10, 40]))
  values = np.round(rng.lognormal(size=size) * 10.0 ** rng.integers(-3, 3), 2)
  values = np.where(rng.random(size) < 0.25, 0.0, values).astype(np.float32)
  if rng.random() < 0.5:
    weights = np.full(size, 7.0)
  else:
    weights = np.maximum(1.0, np.round(np.exp(rng.normal(4.0, 1.5, size))))
  return values, weights.astype(np.float32)


@pytest.mark.parametrize('level', [0.0, 0.2, 0.5, 0.9, 1.0])
def test_result_lower_bounds_the_exact_quantile_within_the_stated_bin_width(level):
  # Stated precision: eta <= q < eta + bin_width, and the last bin spans at most 2T / B^P in asinh(x).
  rng = np.random.default_rng(int(level * 10))
  process = _process(level)
  for _ in range(12):
    values, weights = _random_case(rng)
    exact = _upper_quantile(values, weights, level)
    result, measurements = _run(process, values, weights)
    width = float(measurements['bin_width'])
    # so the filter {x >= eta} differs from {x >= q} only for values in [eta, q), within one bin below q
    assert result <= exact < result + width, (values, weights, result, exact, width)
    assert np.arcsinh(result + width) - np.arcsinh(result) <= 2 * _T / 256**2 * (1 + 1e-3)
    assert measurements['secure_average_calls'] == 2 and measurements['tolerance'] == 0


def test_each_pass_matches_the_numpy_reference_search_and_narrows_the_bin():
  rng = np.random.default_rng(7)
  values, weights = _random_case(rng)
  values, weights = np.concatenate([values, [0.0, 3.25, 3.25]]), np.concatenate([weights, [5, 9, 1]])
  bins = reference.histogram_quantile_passes(values, weights, 0.5, num_bins=16, num_passes=4)
  for num_passes in (1, 2, 3, 4):
    result, measurements = _run(_process(0.5, num_passes=num_passes, num_bins=16), values, weights)
    lower, upper = bins[num_passes - 1]
    assert result == pytest.approx(lower, rel=1e-5, abs=1e-30)
    assert measurements['bin_width'] == pytest.approx(upper - lower, rel=1e-3)
  assert [upper - lower for lower, upper in bins] == sorted([upper - lower for lower, upper in bins], reverse=True)


def test_one_client_gives_its_value_and_no_positive_weight_gives_zero():
  result, measurements = _run(_process(0.5), [2.5], [3.0])
  assert result <= 2.5 < result + measurements['bin_width']
  result, measurements = _run(_process(0.5), [1.0, 2.0], [0.0, 0.0])
  assert result == 0.0 and measurements['bin_width'] == 0.0


def test_upper_end_of_a_tied_interval_in_float32():
  # Three equal devices at theta = 2/3: 1/3 of the weight lies at or below 2, so q is 4 (not 2).
  result, measurements = _run(_process(1 - np.float32(2 / 3)), [2.0, 7.0, 4.0], [20, 20, 20])
  assert 2.0 < result <= 4.0 < result + measurements['bin_width']


def test_nonfinite_values_are_ignored_and_counted():
  result, measurements = _run(_process(0.5), [1.0, 2.0, np.nan, 3.0], [1, 1, 1, np.inf])
  assert result <= 2.0 < result + measurements['bin_width']  # the upper median of {1, 2}
  assert measurements['num_nonfinite_clients'] == 2


def test_with_secure_sums_the_audit_is_empty_and_the_result_holds():
  secure_mean = tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(1.0, 0.0),  # every entry is in [0, 1]
      weight_sum_factory=tff.aggregators.SecureSumFactory(10.0, 0.0),
      no_nan_division=True,
  )
  process = _process(0.5, mean_factory=secure_mean)
  assert privacy.non_secure_intrinsics(process.next) == frozenset()
  assert privacy.non_secure_intrinsics(_process(0.5).next) == frozenset()
  values = np.linspace(1.0, 5.0, 9)
  result, measurements = _run(process, values, np.ones(9))
  assert result <= 3.0 < result + measurements['bin_width']


@pytest.mark.parametrize('kwargs, message', [
    (dict(level=1.5), 'level must be'),
    (dict(level=0.5, num_passes=0), 'num_passes must be an integer >= 1'),
    (dict(level=0.5, num_bins=1), 'num_bins must be an integer >= 2'),
])
def test_bad_arguments_are_named(kwargs, message):
  with pytest.raises(ValueError, match=message):
    histogram_quantile.SecureHistogramQuantileFactory(**kwargs)


def test_non_scalar_values_and_bad_mean_factories_are_refused():
  with pytest.raises(TypeError, match='value_type'):
    histogram_quantile.SecureHistogramQuantileFactory(0.5).create(tff.TensorType(np.float32, [2]), _SCALAR)
  with pytest.raises(TypeError, match='mean_factory'):
    histogram_quantile.SecureHistogramQuantileFactory(0.5, mean_factory=tff.aggregators.SumFactory())
