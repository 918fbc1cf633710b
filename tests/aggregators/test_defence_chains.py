"""Every registered component's stacked TensorFlow rule against its factory, and the chains' privacy audit.

The factories' own tests compare them with NumPy references; here the stacked rules (what an adaptive attacker
evaluates) must compute what the factories compute on the same updates, to float tolerance.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import bucketing
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators import privacy
from tff_robust.aggregators import quantile
from tff_robust.aggregators.defences import arc as arc_factory
from tff_robust.aggregators.defences import building
from tff_robust.aggregators.defences import implementations
from tff_robust.core import arc
from tests.aggregators import two_tensor_points

CLIENTS, BYZANTINE = 10, 2
BOUNDS = implementations.SecureBounds(value_bound=100.0, max_client_weight=3.0)


def _cloud(seed, num_clients=CLIENTS):
  """Eight clients around a common direction with norms 1-6, two far ones (norm ~40), uneven weights."""
  rng = np.random.default_rng(seed)
  points = rng.normal(loc=0.5, size=(num_clients, 5)) * rng.uniform(0.5, 2.0, size=(num_clients, 1))
  points[:2] = rng.normal(loc=-18.0, size=(2, 5))
  return points, rng.uniform(0.5, 3.0, size=num_clients)


def _stacked(spec, points, weights, center=None):
  rule = building.stacked_rule(spec, clients_per_round=len(points), num_byzantine=BYZANTINE)
  center = np.zeros(points.shape[1]) if center is None else center
  tensors = [tf.constant(x, tf.float32) for x in (points, weights, center)]
  return rule(*tensors).numpy()


def _factory_rounds(factory, rounds):
  """The factory's aggregates over successive rounds of `rounds` [(points, weights)], from its initial state."""
  process = factory.create(*two_tensor_points.TYPES)
  state, results = process.initialize(), []
  for points, weights in rounds:
    state, result, _ = two_tensor_points.run_round(process, state, points, weights)
    results.append(result)
  return results


@pytest.mark.parametrize('spec', [
    'mean', 'gm', 'gm(passes=1,init=zero)', 'gm(passes=5,nu=0.01)', 'median', 'trimmed_mean', 'krum',
    'krum(select=0)', 'bulyan(f=1)', 'clipping(c=3)>gm', 'nnm>gm', 'nnm(f=1)>median', 'clipping(c=2)>nnm>krum',
    'weak_dp(m=2,sigma=0)', 'rlr(theta=6)>mean', 'rlr(theta=6)>gm', 'flame(lambda=0)',
])
def test_stacked_rule_matches_the_factory(spec):
  points, weights = _cloud(0)
  factory = building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE)
  [result] = _factory_rounds(factory, [(points, weights)])
  np.testing.assert_allclose(_stacked(spec, points, weights), result, rtol=2e-5, atol=2e-5)


def test_centered_clipping_starts_from_the_previous_aggregate_in_both():
  spec = 'centered_clipping(tau=0.5,iters=3)'
  rounds = [_cloud(1), _cloud(2)]
  first, second = _factory_rounds(
      building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE), rounds)
  np.testing.assert_allclose(_stacked(spec, *rounds[0]), first, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(_stacked(spec, *rounds[1], center=first), second, rtol=1e-5, atol=1e-5)


def test_bucketing_is_the_identity_permutation_of_the_clients_in_key_order():
  spec = 'bucketing(s=3,keys=hashed)>gm'
  points, weights = _cloud(3)
  [result] = _factory_rounds(
      building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE), [(points, weights)])
  keys = [int(bucketing.hashed_key([tf.constant(p[:3]), tf.constant(p[3:])], 0, tf.constant(0), 4096))
          for p in points.astype(np.float32)]
  assert len(set(keys)) == CLIENTS  # no two clients share a bucket by a tie
  order = np.argsort(keys)
  np.testing.assert_allclose(_stacked(spec, points[order], weights[order]), result, rtol=1e-5, atol=1e-5)


def test_arc_with_the_exact_quantile_matches_and_the_secure_one_is_within_its_bin():
  points, weights = _cloud(4)
  exact = arc_factory.AdaptiveRobustClippingFactory(
      tff.aggregators.MeanFactory(), num_byzantine=BYZANTINE, num_clients=CLIENTS,
      quantile_factory=quantile.exact_quantile_factory(arc.quantile_level(CLIENTS, BYZANTINE)),
  )
  [exact_result] = _factory_rounds(exact, [(points, weights)])
  stacked = _stacked('arc>mean', points, weights)
  np.testing.assert_allclose(stacked, exact_result, rtol=1e-5, atol=1e-5)
  [secure_result] = _factory_rounds(
      building.build_factory('arc>mean', clients_per_round=CLIENTS, num_byzantine=BYZANTINE), [(points, weights)])
  threshold = arc.threshold(np.linalg.norm(points, axis=1), BYZANTINE)
  assert np.linalg.norm(secure_result - stacked) <= 0.0028 * threshold


@pytest.mark.parametrize('num_clients,num_byzantine', [(10, 2), (10, 4), (7, 1), (25, 5)])
def test_the_stacked_arc_is_the_papers(num_clients, num_byzantine):
  rng = np.random.default_rng(num_clients + num_byzantine)
  points = rng.normal(size=(num_clients, 5)) * rng.uniform(0.1, 10.0, size=(num_clients, 1))
  weights = rng.uniform(0.5, 2.0, size=num_clients)
  rule = building.stacked_rule('arc>mean', clients_per_round=num_clients, num_byzantine=num_byzantine)
  result = rule(*[tf.constant(x, tf.float32) for x in (points, weights, np.zeros(5))]).numpy()
  expected = weights @ arc.adaptive_robust_clipping(points, num_byzantine) / weights.sum()
  np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_norm_filter_with_the_exact_median_matches_and_the_secure_one_too_away_from_the_threshold():
  points, weights = _cloud(5)
  spec = 'norm_filter(k=1.5)>mean'
  exact = norm_filter.NormFilterFactory(
      tff.aggregators.MeanFactory(), 1.5, quantile_factory=quantile.exact_quantile_factory(0.5))
  [exact_result] = _factory_rounds(exact, [(points, weights)])
  stacked = _stacked(spec, points, weights)
  np.testing.assert_allclose(stacked, exact_result, rtol=1e-5, atol=1e-5)
  norms = np.linalg.norm(points, axis=1)
  median = np.sort(norms)[np.searchsorted(np.cumsum(weights[np.argsort(norms)]), weights.sum() / 2, side='right')]
  assert not np.any((norms > 1.5 * median * (1 - 0.003)) & (norms <= 1.5 * median))  # nobody in the last bin
  [secure_result] = _factory_rounds(
      building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE), [(points, weights)])
  np.testing.assert_allclose(stacked, secure_result, rtol=1e-5, atol=1e-5)


def test_a_nonfinite_client_is_left_out_by_both():
  spec = 'arc>centered_clipping(tau=2)'
  points, weights = _cloud(6)
  points[4, 1] = np.nan
  [result] = _factory_rounds(
      building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE), [(points, weights)])
  np.testing.assert_allclose(_stacked(spec, points, weights), result, rtol=1e-3, atol=1e-3)  # ARC's bin


@pytest.mark.parametrize('spec', [
    'mean', 'gm', 'centered_clipping', 'clipping>gm', 'bucketing(s=2)>centered_clipping(tau=0.3)',
    'norm_filter(k=1.5)>centered_clipping(tau=0.3)', 'arc>clipping>norm_filter>bucketing>gm',
    'rlr(theta=3)>weak_dp(m=2,sigma=0.1)',
])
def test_secure_chains_aggregate_every_client_value_by_secure_sums(spec):
  factory = building.build_factory(spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE, secure_bounds=BOUNDS)
  process = factory.create(*two_tensor_points.TYPES)
  assert not privacy.non_secure_intrinsics(process.next)
  privacy.assert_client_values_aggregated_securely(process.next)


def test_a_secure_chain_computes_what_the_plain_one_does():
  spec = 'arc>bucketing(s=2,keys=hashed)>gm'
  points, weights = _cloud(7)
  plain, secure = (_factory_rounds(building.build_factory(
      spec, clients_per_round=CLIENTS, num_byzantine=BYZANTINE, secure_bounds=bounds), [(points, weights)])[0]
                   for bounds in (None, BOUNDS))
  np.testing.assert_allclose(secure, plain, rtol=1e-2, atol=1e-2)  # the secure sums' quantisation


def test_a_secure_chain_refuses_buckets_of_one_client_which_would_reveal_each_update():
  building.build_factory('bucketing(s=1)>gm', clients_per_round=CLIENTS, num_byzantine=BYZANTINE)  # in the clear
  with pytest.raises(ValueError, match=r"bucketing's s\) must be >= 2 with a secure sum_factory"):
    building.build_factory('bucketing(s=1)>gm', clients_per_round=CLIENTS, num_byzantine=BYZANTINE,
                           secure_bounds=BOUNDS)


def test_nnm_before_a_secure_rule_makes_the_chain_gather_and_the_audit_says_so():
  assert not building.registry.is_secure('nnm>gm')
  process = building.build_factory('nnm>gm', clients_per_round=CLIENTS, num_byzantine=BYZANTINE).create(
      *two_tensor_points.TYPES)
  assert 'federated_aggregate' in privacy.non_secure_intrinsics(process.next)
  with pytest.raises(privacy.NotSecurelyAggregatedError, match='federated_aggregate'):
    privacy.assert_client_values_aggregated_securely(process.next)
  with pytest.raises(ValueError, match='nnm gathers the client updates'):
    building.build_factory('nnm>gm', clients_per_round=CLIENTS, num_byzantine=BYZANTINE, secure_bounds=BOUNDS)


@pytest.mark.parametrize('kwargs,message', [
    (dict(clients_per_round=0, num_byzantine=0), 'clients_per_round'),
    (dict(clients_per_round=10, num_byzantine=-1), 'num_byzantine'),
    (dict(clients_per_round=10, num_byzantine=5), 'num_byzantine'),  # ARC needs f < n / 2
])
def test_bad_counts_are_refused_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    building.build_factory('arc>gm', **kwargs)
