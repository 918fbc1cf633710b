"""Every process builder that takes a `count_factory` refuses one that is not an unweighted factory, naming the
argument, before building a computation that would fail on its types."""

import pytest
import tensorflow_federated as tff

from tests.processes import small_model
from tff_robust.processes import composition
from tff_robust.processes import delta_fl
from tff_robust.processes import fedplus
from tff_robust.processes import fedprox
from tff_robust.processes import personalized_rfa
from tff_robust.processes import rfa


def _sgd():
  return tff.learning.optimizers.build_sgdm(learning_rate=0.1)


_BUILDERS = {
    'fed_avg': lambda count: composition.build_fed_avg_process(small_model.model_fn, _sgd(), count_factory=count),
    'fed_sgd': lambda count: composition.build_fed_sgd_process(small_model.model_fn, _sgd(), count_factory=count),
    'rfa': lambda count: rfa.build_rfa_process(small_model.model_fn, _sgd(), count_factory=count),
    'fedprox': lambda count: fedprox.build_fedprox_process(small_model.model_fn, 0.1, _sgd(), count_factory=count),
    'fedplus': lambda count: fedplus.build_fedplus_process(
        small_model.model_fn, _sgd(), sigma=0.1, count_factory=count),
    'personalized_rfa': lambda count: personalized_rfa.build_personalized_rfa_process(
        small_model.model_fn, _sgd(), count_factory=count),
    'delta_fl_exact': lambda count: delta_fl.build_delta_fl_process(
        small_model.model_fn, _sgd(), conformity_level=0.5, count_factory=count),
    'delta_fl_secure': lambda count: delta_fl.build_delta_fl_process(
        small_model.model_fn, _sgd(), conformity_level=0.5, quantile_method='secure', count_factory=count),
}


@pytest.mark.parametrize('name', sorted(_BUILDERS))
def test_a_weighted_count_factory_is_refused_naming_count_factory(name):
  with pytest.raises(TypeError, match=r'^count_factory must be a tff\.aggregators\.UnweightedAggregationFactory'):
    _BUILDERS[name](tff.aggregators.MeanFactory())
