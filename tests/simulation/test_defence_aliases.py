"""The runner's defence algorithms are aliases of registry chains with the same results as the factories the
runner built for them before the registry (pinned here as they were built)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from experiments import train_flags
from tff_robust.aggregators import baselines
from tff_robust.aggregators import bucketing
from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import defences
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators.defences import implementations
from tff_robust.aggregators.defences import registry
from tff_robust.processes import rfa
from tff_robust.simulation import algorithms
from tests.aggregators import two_tensor_points

CLIENTS = 12
# Every parameter away from its default, so that each reaches its factory. Bucket size 1: the buckets are the
# clients, so that bucketing's random permutation cannot change the result.
CONFIG = algorithms.AlgorithmConfig(
    rfa_num_passes=4, rfa_smoothing=1e-3, trim_fraction=0.2, num_byzantine=2, num_selected=5, clipping_norm=2.0,
    bucket_size=1, centered_clipping_radius=0.5, centered_clipping_iterations=2, norm_filter_multiplier=1.5,
)


def _centered_clipping():
  return centered_clipping.CenteredClippingFactory(CONFIG.centered_clipping_radius, CONFIG.centered_clipping_iterations)


# The `model_aggregator` if-chain of `tff_robust.simulation.algorithms` before the registry, name by name.
_BEFORE = {
    'fedavg': tff.aggregators.MeanFactory,
    'rfa': lambda: rfa.rfa_aggregator(num_passes=CONFIG.rfa_num_passes, smoothing=CONFIG.rfa_smoothing),
    'rfa_one_step': lambda: rfa.rfa_aggregator(smoothing=CONFIG.rfa_smoothing, one_step=True),
    'coordinate_median': baselines.coordinate_median_factory,
    'trimmed_mean': lambda: baselines.trimmed_mean_factory(CONFIG.trim_fraction),
    'multi_krum': lambda: baselines.multi_krum_factory(CONFIG.num_byzantine, CONFIG.num_selected),
    'bulyan': lambda: baselines.bulyan_factory(CONFIG.num_byzantine),
    'norm_clipping': lambda: baselines.norm_clipping_factory(CONFIG.clipping_norm),
    'bucketing_rfa': lambda: bucketing.BucketingFactory(
        rfa.rfa_aggregator(num_passes=CONFIG.rfa_num_passes, smoothing=CONFIG.rfa_smoothing),
        bucket_size=CONFIG.bucket_size, max_clients=CLIENTS),
    'centered_clipping': _centered_clipping,
    'filtered_centered_clipping': lambda: norm_filter.NormFilterFactory(
        _centered_clipping(), CONFIG.norm_filter_multiplier),
}


def test_every_defence_algorithm_is_pinned():
  assert set(_BEFORE) == set(algorithms.DEFENCE_ALGORITHM_NAMES)


@pytest.mark.parametrize('name', sorted(_BEFORE))
def test_the_alias_aggregates_as_before(name):
  rng = np.random.default_rng(0)
  points = rng.normal(size=(CLIENTS, 5)) * rng.uniform(0.2, 3.0, size=(CLIENTS, 1))
  points[:2] = 8.0
  weights = rng.uniform(0.5, 2.0, size=CLIENTS)
  results = []
  for factory in (_BEFORE[name](), algorithms.model_aggregator(name, CONFIG, CLIENTS)):
    process = factory.create(*two_tensor_points.TYPES)
    state = process.initialize()
    for _ in range(2):  # centered clipping's second round starts from its state
      state, result, _ = two_tensor_points.run_round(process, state, points, weights)
    results.append(result)
  np.testing.assert_array_equal(results[1], results[0])


def test_a_defence_replaces_fedavgs_mean_only():
  with pytest.raises(ValueError, match='aggregator of fedavg; rfa has its own'):
    algorithms.check_settings('rfa', algorithms.AlgorithmConfig(defence='arc>gm'), clients_per_round=10)
  aggregator = algorithms.check_settings('fedavg', algorithms.AlgorithmConfig(defence='nnm>gm'), clients_per_round=10)
  assert type(aggregator).__name__ == 'NearestNeighborMixingFactory'


# A component that exists only here: TFF's own weighted mean (NaN, not 0, without weight) as a rule.
TFF_MEAN = implementations.Implementation(
    build=lambda arguments, inner, context: tff.aggregators.MeanFactory(),
    stacked=lambda arguments, context: lambda points, weights, center: tf.reduce_sum(
        points * weights[:, None], axis=0) / tf.reduce_sum(weights),
)


def test_a_new_component_is_one_implementation_and_one_registry_entry(monkeypatch):
  """Registered, it runs through the runner's code unchanged: flag check, aggregator, stacked rule."""
  entry = registry.Entry('tff_mean', registry.RULE, 'tests.simulation.test_defence_aliases:TFF_MEAN', True,
                         "TFF's MeanFactory")
  monkeypatch.setitem(registry.REGISTRY, 'tff_mean', entry)
  assert train_flags._defence_is_valid({'defence': 'clipping(c=2)>tff_mean', 'algorithm': 'fedavg'})
  config = algorithms.AlgorithmConfig(defence='clipping(c=2)>tff_mean')
  aggregator = algorithms.check_settings('fedavg', config, clients_per_round=CLIENTS)
  points, weights = np.eye(3, 5) * 4.0, np.ones(3)
  result, _ = two_tensor_points.aggregate_once(aggregator.create(*two_tensor_points.TYPES), points, weights)
  np.testing.assert_allclose(result, np.eye(3, 5).sum(axis=0) * 2.0 / 3.0, rtol=1e-6)  # each clipped to 2
  rule = defences.stacked_rule(config.defence, clients_per_round=CLIENTS, num_byzantine=0)
  np.testing.assert_allclose(rule(points, weights, np.zeros(5)), result, rtol=1e-6)


def test_the_runs_seed_reaches_the_defence_chain_for_its_noise(monkeypatch):
  built = []
  monkeypatch.setattr(defences, 'build_factory', lambda spec, **kwargs: built.append((spec, kwargs['seed'])))
  config = algorithms.AlgorithmConfig(defence='rlr>weak_dp')
  algorithms.check_settings('fedavg', config, clients_per_round=10, seed=7)
  assert ('rlr>weak_dp', 7) in built


@pytest.mark.parametrize('spec', ['krum', 'clipping(c=1)>krum', 'nnm>krum', 'norm_filter(k=2)>bulyan'])
def test_a_cohort_too_small_for_the_rule_that_ends_a_chain_is_refused(spec):
  config = algorithms.AlgorithmConfig(defence=spec, num_byzantine=2)
  with pytest.raises(ValueError, match='clients_per_round=5 is too small: .* cannot aggregate 5 clients per round'):
    algorithms.check_settings('fedavg', config, clients_per_round=5)
