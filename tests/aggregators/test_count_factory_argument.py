"""Every factory that takes a `count_factory` refuses one that is not an unweighted factory, naming the argument."""

import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import bucketing
from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators import quantile

_BUILDERS = {
    'geometric_median': lambda count: geometric_median.GeometricMedianFactory(count_factory=count),
    'centered_clipping': lambda count: centered_clipping.CenteredClippingFactory(1.0, count_factory=count),
    'bucketing': lambda count: bucketing.BucketingFactory(
        tff.aggregators.MeanFactory(), bucket_size=2, max_clients=10, count_factory=count),
    'norm_filter': lambda count: norm_filter.NormFilterFactory(
        tff.aggregators.MeanFactory(), multiplier=2.0, count_factory=count),
    'histogram_quantile': lambda count: histogram_quantile.SecureHistogramQuantileFactory(0.5, count_factory=count),
    'mm_quantile': lambda count: quantile.SecureQuantileFactory(0.5, count_factory=count),
}


@pytest.mark.parametrize('name', sorted(_BUILDERS))
def test_a_weighted_count_factory_is_refused_naming_count_factory(name):
  with pytest.raises(TypeError, match=r'^count_factory must be a tff\.aggregators\.UnweightedAggregationFactory'):
    _BUILDERS[name](tff.aggregators.MeanFactory())


@pytest.mark.parametrize('name', sorted(_BUILDERS))
def test_a_secure_count_factory_is_accepted(name):
  _BUILDERS[name](tff.aggregators.SecureSumFactory(1, 0))
