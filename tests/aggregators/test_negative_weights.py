"""A client that reports a negative weight is left out and counted by every weighted robust factory.

Every rule here needs alpha_i >= 0 (RFA's eq. (6): alpha_i > 0). Six clients send x with weight 1 and a seventh
sends -1.5 x with a negative weight: each factory must return what it returns for the six alone (x for the
location rules), never a mean whose denominator a client pulled towards 0, and count the seventh. Without the
leave-out, the geometric median's first pass alone is (6 x + 3 x) / 4.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import bucketing
from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import delta_median
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators import quantile
from tff_robust.aggregators import robust_learning_rate

_X = np.array([0.5, -1.25, 2.0], np.float32)
_OTHER = -1.5 * _X  # within the norm filter's 2 x median norm, so only its weight can leave it out

# name: (factory builder, its scalar-valued-ness, the measurement counting the negative-weight client)
_FACTORIES = {
    'geometric_median_mean': (lambda: geometric_median.GeometricMedianFactory(init='mean'), 'num_nonfinite_clients'),
    'geometric_median_zero': (lambda: geometric_median.GeometricMedianFactory(init='zero'), 'num_nonfinite_clients'),
    'delta_median': (lambda: delta_median.DeltaMedianFactory('l2', 0.5), 'num_nonfinite_clients'),
    'centered_clipping': (lambda: centered_clipping.CenteredClippingFactory(100.0, 3), 'num_nonfinite_clients'),
    'norm_clipping': (lambda: baselines.norm_clipping_factory(100.0), 'num_nonfinite_clients'),
    'bucketing': (
        lambda: bucketing.BucketingFactory(geometric_median.GeometricMedianFactory(), bucket_size=1, max_clients=8),
        'num_nonfinite_clients',
    ),
    'norm_filter': (
        lambda: norm_filter.NormFilterFactory(tff.aggregators.MeanFactory(no_nan_division=True), 2.0),
        'num_dropped_clients',
    ),
    'robust_learning_rate': (
        lambda: robust_learning_rate.RobustLearningRateFactory(tff.aggregators.MeanFactory(no_nan_division=True), 1),
        'num_nonfinite_clients',
    ),
    'coordinate_median': (baselines.coordinate_median_factory, 'num_nonfinite_clients'),
}
_SCALAR_FACTORIES = {
    'exact_quantile': lambda: quantile.exact_quantile_factory(0.5),
    'secure_quantile': lambda: quantile.SecureQuantileFactory(0.5, num_passes=30),
    'secure_histogram_quantile': lambda: histogram_quantile.SecureHistogramQuantileFactory(0.5),
}


def _run(factory, value_type, weight_type, values, weights):
  process = factory.create(value_type, weight_type)
  return process.next(process.initialize(), values, weights)


@pytest.mark.parametrize('weight_dtype', [np.float32, np.int32])
@pytest.mark.parametrize('name', sorted(_FACTORIES))
def test_a_negative_weight_client_is_left_out_and_counted(name, weight_dtype):
  build, count_name = _FACTORIES[name]
  values = [_X] * 3 + [_OTHER] + [_X] * 3
  weights = [weight_dtype(w) for w in (1, 1, 1, -2, 1, 1, 1)]
  output = _run(build(), tff.TensorType(np.float32, [3]), tff.TensorType(weight_dtype), values, weights)
  np.testing.assert_allclose(output.result, _X, rtol=1e-5, atol=1e-6)
  assert output.measurements[count_name] == 1


@pytest.mark.parametrize('name', sorted(_SCALAR_FACTORIES))
def test_a_negative_weight_client_does_not_move_a_quantile(name):
  values = [np.float32(v) for v in (1.0, 2.0, 3.0, 1000.0, 4.0, 5.0)]
  weights = [np.float32(w) for w in (1, 1, 1, -4, 1, 1)]
  output = _run(_SCALAR_FACTORIES[name](), tff.TensorType(np.float32), tff.TensorType(np.float32), values, weights)
  assert output.result == pytest.approx(3.0, abs=0.1)  # the median of 1 ... 5 (the MM's smoothed fixed point)
  assert output.measurements['num_nonfinite_clients'] == 1
