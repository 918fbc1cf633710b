"""SecureGeometricMedianFactory: secure sums with bounds derived from nu, the client weights and a value bound.

Against the non-secure geometric median (and the NumPy reference of smoothed Weiszfeld) to the secure sums'
quantisation tolerance; a value or weight beyond the stated bounds is reported; nothing is summed in plain.
"""

import collections
import functools
import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import privacy
from tff_robust.aggregators import secure_geometric_median
from tff_robust.core import weiszfeld
from tests.processes import small_model
from tests.aggregators import two_tensor_points

_NUM_ELEMENTS = 5
_VALUE_BOUND = 10.0
_SMOOTHING = 1e-2


@functools.lru_cache(maxsize=None)
def _secure(max_client_weight, init='mean', num_passes=3):
  return secure_geometric_median.SecureGeometricMedianFactory(
      value_bound=_VALUE_BOUND, max_client_weight=max_client_weight, smoothing=_SMOOTHING,
      num_passes=num_passes, init=init,
  ).create(*two_tensor_points.TYPES)


def _cloud(seed, max_client_weight, num_points=9):
  """Points inside [-V, V]^5 (two of them far from the rest, so the median is not the mean), and weights up to
  max_client_weight, as example counts are (the largest is exactly the bound)."""
  rng = np.random.default_rng(seed)
  points = rng.uniform(-2.0, 2.0, size=(num_points, _NUM_ELEMENTS))
  points[:2] = rng.uniform(8.0, _VALUE_BOUND, size=(2, _NUM_ELEMENTS))
  weights = rng.integers(1, max_client_weight + 1, num_points).astype(np.float64)
  weights[0] = max_client_weight
  return points.astype(np.float32), weights.astype(np.float32)


def _quantisation_tolerance(points, weights, center, num_passes):
  """A bound on what the secure sums' 32-bit quantisation can move an iterate: each pass sums m values
  quantised to steps of 2B / (2^32 - 1) and m weights to steps of W_b / (2^32 - 1); at a centre v with
  Weiszfeld weights beta_i that moves v by at most m (step_B + |v| step_W) / sum beta. Summed over the passes."""
  value_sum_bound, weight_sum_bound = secure_geometric_median.secure_sum_bounds(
      value_bound=_VALUE_BOUND, max_client_weight=float(weights.max()), smoothing=_SMOOTHING,
      num_elements=_NUM_ELEMENTS,
  )
  betas = weights / np.maximum(_SMOOTHING, np.linalg.norm(points - center, axis=1))
  levels = 2.0**32 - 1
  per_pass = len(points) * (2 * value_sum_bound / levels + np.abs(center).max() * weight_sum_bound / levels)
  return num_passes * per_pass / betas.sum()


def test_the_bounds_follow_from_nu_the_weights_and_the_value_bound():
  # beta_i |w_ij| <= W V / nu; alpha_i ||v - w_i|| <= W 2 V sqrt(n) (the objective); beta_i <= W / nu.
  assert secure_geometric_median.secure_sum_bounds(
      value_bound=2.0, max_client_weight=50.0, smoothing=1e-2, num_elements=5
  ) == pytest.approx((50.0 * 2.0 / 1e-2, 50.0 / 1e-2))
  assert secure_geometric_median.secure_sum_bounds(
      value_bound=2.0, max_client_weight=1.0, smoothing=0.5, num_elements=100
  ) == pytest.approx((1.0 * 2.0 * 2 * math.sqrt(100), 2.0))
  assert secure_geometric_median.secure_sum_bounds(
      value_bound=2.0, max_client_weight=3.0, smoothing=4.0, num_elements=1
  ) == pytest.approx((3.0 * 2.0 * 2.0, 3.0))


@pytest.mark.parametrize('max_client_weight', [1, 50], ids=['uniform', 'examples'])
@pytest.mark.parametrize('init', ['mean', 'zero'])
def test_matches_the_non_secure_median_to_the_quantisation_tolerance(max_client_weight, init):
  points, weights = _cloud(seed=3, max_client_weight=max_client_weight)
  exact = geometric_median.GeometricMedianFactory(smoothing=_SMOOTHING, init=init).create(*two_tensor_points.TYPES)
  reference = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=3, smoothing=_SMOOTHING, init=init)
  secure_result, secure_measurements = two_tensor_points.aggregate_once(
      _secure(max_client_weight, init), points, weights
  )
  exact_result, exact_measurements = two_tensor_points.aggregate_once(exact, points, weights)
  np.testing.assert_allclose(exact_result, reference.iterates[-1], rtol=1e-5, atol=1e-5)
  tolerance = _quantisation_tolerance(points, weights, reference.iterates[-1], num_passes=3)
  assert tolerance < 1e-3
  np.testing.assert_allclose(secure_result, exact_result, atol=tolerance + 1e-5)
  np.testing.assert_allclose(secure_measurements['objective'], exact_measurements['objective'], rtol=1e-4)
  assert secure_measurements['num_clients_beyond_bounds'] == 0
  assert secure_measurements['mean']['mean_weight']['secure_upper_clipped_count'] == 0
  assert secure_measurements['mean']['mean_value']['secure_upper_clipped_count'] == 0
  assert secure_measurements['mean']['mean_value']['secure_lower_clipped_count'] == 0


def test_fixed_bounds_below_the_weiszfeld_weights_would_clip_silently():
  """Why the bounds are derived: the README's old recipe (both secure sums bounded by 100) with weights up to
  50 and nu = 1e-2 clips Weiszfeld weights of up to 5000 and lands far from the median."""
  points, weights = _cloud(seed=3, max_client_weight=50)
  fixed = tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0),
      weight_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0, lower_bound_threshold=0.0),
      no_nan_division=True,
  )
  clipped = geometric_median.GeometricMedianFactory(smoothing=_SMOOTHING, mean_factory=fixed)
  clipped_result, _ = two_tensor_points.aggregate_once(clipped.create(*two_tensor_points.TYPES), points, weights)
  secure_result, _ = two_tensor_points.aggregate_once(_secure(50), points, weights)
  median = weiszfeld.smoothed_weiszfeld(points, weights, num_passes=3, smoothing=_SMOOTHING, init='mean')
  error = lambda result: np.abs(result - median.iterates[-1]).max()
  assert error(clipped_result) > 100 * max(error(secure_result), 1e-6)


def test_a_client_at_the_iterate_with_a_large_value_is_summed_without_clipping():
  """The value bound's 1/nu term is needed: a client of the largest weight at the weighted mean (distance 0, so
  beta = W / nu) with an entry of 0.9 V sends beta w = 0.9 W V / nu at every Weiszfeld pass, 20 times what a
  bound of W V max(1, 2 sqrt(n)) would let through (the median is that client, by symmetry)."""
  center = np.zeros(_NUM_ELEMENTS)
  center[0] = 0.9 * _VALUE_BOUND
  offsets = np.zeros((2, _NUM_ELEMENTS))
  offsets[:, 1:] = [[1.0, -2.0, 0.5, 1.5], [-1.0, 0.5, 2.0, -1.0]]
  points = np.vstack([center, center + offsets, center - offsets]).astype(np.float32)
  weights = np.array([50.0, 20.0, 30.0, 20.0, 30.0], np.float32)
  secure_result, measurements = two_tensor_points.aggregate_once(_secure(50), points, weights)
  np.testing.assert_allclose(secure_result, center, atol=1e-3)
  assert measurements['num_clients_beyond_bounds'] == 0
  assert measurements['mean']['mean_value']['secure_upper_clipped_count'] == 0
  assert measurements['mean']['mean_weight']['secure_upper_clipped_count'] == 0
  # The clipped counts are the last pass's only, and a clipped second pass still ends at the centre here: the
  # objective at the broadcast iterates shows it (Weiszfeld never increases it; a bound without 1/nu took it
  # from 1.73 to 8.75).
  first, second = measurements['objective']
  assert second <= first * (1 + 1e-5)


@pytest.mark.parametrize('where', ['value', 'negative value', 'weight'])
def test_a_client_beyond_the_stated_bounds_is_reported(where):
  points, weights = _cloud(seed=5, max_client_weight=50)
  if where == 'value':
    points[4, 2] = 3 * _VALUE_BOUND
  elif where == 'negative value':
    points[6, 0] = -1.5 * _VALUE_BOUND
  else:
    weights[4] = 51.0
  _, measurements = two_tensor_points.aggregate_once(_secure(50), points, weights)
  assert measurements['num_clients_beyond_bounds'] == 1


def test_nonfinite_clients_are_counted_apart_and_not_as_beyond_bounds():
  points, weights = _cloud(seed=6, max_client_weight=1)
  points[3, 0] = np.nan
  result, measurements = two_tensor_points.aggregate_once(_secure(1), points, weights)
  assert np.all(np.isfinite(result))
  assert measurements['num_nonfinite_clients'] == 1
  assert measurements['num_clients_beyond_bounds'] == 0


def test_sums_nothing_in_plain():
  process = _secure(1)
  privacy.assert_client_values_aggregated_securely(process.next)
  assert {a.intrinsic for a in privacy.client_aggregations(process.next)} == {'federated_secure_sum_bitwidth'}


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(value_bound=0.0), 'value_bound'),
        (dict(value_bound=float('inf')), 'value_bound'),
        (dict(max_client_weight=-1.0), 'max_client_weight'),
        (dict(smoothing=0.0), 'smoothing'),
        (dict(num_passes=0), 'num_passes'),
        (dict(init='median'), 'init'),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, message):
  arguments = dict(value_bound=1.0, max_client_weight=1.0, smoothing=1e-2) | kwargs
  with pytest.raises(ValueError, match=message):
    secure_geometric_median.SecureGeometricMedianFactory(**arguments)


def test_is_a_model_aggregator_of_tff_fedavg():
  def dataset(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(8, small_model.NUM_FEATURES)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=(x[:, 0] > 0).astype(np.int32))).batch(4)

  process = tff.learning.algorithms.build_weighted_fed_avg(
      small_model.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1),
      client_weighting=tff.learning.ClientWeighting.UNIFORM,
      model_aggregator=secure_geometric_median.SecureGeometricMedianFactory(
          value_bound=1.0, max_client_weight=1.0, smoothing=1e-2
      ),
  )
  state = process.initialize()
  output = process.next(state, [dataset(seed) for seed in range(4)])
  aggregator = output.metrics['aggregator']
  assert aggregator['secure_average_calls'] == 3 and aggregator['num_clients_beyond_bounds'] == 0
  before, after = (np.concatenate([np.ravel(w) for w in process.get_model_weights(s).trainable])
                   for s in (state, output.state))
  assert np.all(np.isfinite(after)) and not np.allclose(before, after)
