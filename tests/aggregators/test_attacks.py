"""The TFF attacks (`tff_robust.aggregators.attacks`) against their NumPy references (`tff_robust.core.attacks`):
the stacked TensorFlow payloads eagerly, then every attack through `UpdateCorruptionFactory` on a small cohort,
the previous aggregate kept in the state, and the privacy audit naming the gathering."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.aggregators import robust_rules
from tff_robust.aggregators import update_corruption
from tff_robust.aggregators.attacks import fang_trimmed_mean
from tff_robust.aggregators.attacks import registry
from tff_robust.core import robust_statistics
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import directions
from tff_robust.core.attacks import fang
from tff_robust.core.attacks import line_search
from tff_robust.core.attacks import mimic
from tff_robust.core.attacks import norm_aware
from tff_robust.core.attacks import perturbation_search
from tff_robust.core.attacks import rop

_UPDATE_TYPE = tff.to_type([(np.float32, [4]), (np.float32, [3])])
_VALUE_TYPE = tff.StructType([_UPDATE_TYPE, tff.TensorType(np.bool_)])
_WEIGHT_TYPE = tff.TensorType(np.float32)


def _tf_median(points, weights, center):
  del center
  return robust_rules.coordinate_median(points, weights)


def _np_median(points, weights, center):
  del center
  return robust_statistics.weighted_coordinate_median(points, weights)


# spec -> NumPy reference target(updates, weights, corrupted, previous)
_REFERENCES = {
    'norm_aware': lambda u, w, c, v: norm_aware.target(u, w, c, 'omniscient', 1.0),
    'norm_aware(direction=ipm,c=1.4)': lambda u, w, c, v: norm_aware.target(u, w, c, 'ipm', 1.4),
    'norm_aware(direction=alie,c=0.5)': lambda u, w, c, v: norm_aware.target(u, w, c, 'alie', 0.5),
    'min_max': lambda u, w, c, v: perturbation_search.target(u, w, c, 'min_max', 'unit_vec', 10.0, 1e-5),
    'min_max(direction=std)': lambda u, w, c, v: perturbation_search.target(u, w, c, 'min_max', 'std', 10.0, 1e-5),
    'min_sum(direction=sign)': lambda u, w, c, v: perturbation_search.target(u, w, c, 'min_sum', 'sign', 10.0, 1e-5),
    'fang_krum': lambda u, w, c, v: fang.krum_target(u, w, c, 1e-5),
    'mimic': lambda u, w, c, v: mimic.target(u, w, c),
    'rop': lambda u, w, c, v: rop.target(u, w, c, v, 1.0, 1.0, 0.9, 90.0),
    'rop(radius=0.3,pi=0.5,lam=0,angle=150)': lambda u, w, c, v: rop.target(u, w, c, v, 0.3, 0.5, 0.0, 150.0),
    'line_search(direction=ipm)': lambda u, w, c, v: line_search.target(u, w, c, v, _np_median, 'ipm', 10.0, 11, 12),
}


def _cohort(seed, m=9, num_corrupted=3):
  rng = np.random.default_rng(seed)
  updates = rng.normal(0.2, 1.0, size=(m, 7)).astype(np.float32)
  return updates, rng.uniform(1, 3, m).astype(np.float32), np.arange(m) >= m - num_corrupted


def _payload(spec, updates, weights, corrupted, previous):
  attack = registry.build(spec, stacked_rule=_tf_median)
  return attack.payload(tf.constant(updates, tf.float64), tf.constant(weights, tf.float64),
                        tf.constant(corrupted), tf.constant(previous, tf.float64))


def _objective(updates, weights, corrupted, x):
  """||median(updates with the corrupted rows x) - honest mean||."""
  mean = weights[~corrupted] @ updates[~corrupted] / weights[~corrupted].sum()
  attacked = np.asarray(updates, np.float64).copy()
  attacked[corrupted] = x
  return np.linalg.norm(_np_median(attacked, weights, None) - mean)


@pytest.mark.parametrize('spec', sorted(_REFERENCES))
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_stacked_payload_matches_the_numpy_reference(spec, seed):
  updates, weights, corrupted = _cohort(seed)
  previous = np.random.default_rng(seed + 10).normal(size=7) * (seed > 0)  # seed 0: the first round
  expected = _REFERENCES[spec](updates, weights, corrupted, previous)
  got = _payload(spec, updates, weights, corrupted, previous).numpy()
  if spec.startswith('line_search'):  # the median's objective is flat in places: compare what the search reaches
    assert _objective(updates, weights, corrupted, got) >= _objective(updates, weights, corrupted, expected) - 1e-5
  else:
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_stacked_fang_trimmed_mean_bounds_match_the_reference():
  updates, weights, corrupted = _cohort(4, m=11)
  updates[:, :3] *= -2
  low, high = fang_trimmed_mean.trimmed_mean_bounds(
      tf.constant(updates, tf.float64), tf.constant(weights, tf.float64), tf.constant(corrupted), 2.0)
  expected_low, expected_high = fang.trimmed_mean_bounds(updates, weights, corrupted, 2.0)
  np.testing.assert_allclose(low.numpy(), expected_low, rtol=1e-12)
  np.testing.assert_allclose(high.numpy(), expected_high, rtol=1e-12)


def _run(process, state, updates, weights, corrupted):
  values = [[[u[:4], u[4:]], bool(f)] for u, f in zip(updates, corrupted)]
  output = process.next(state, values, [np.float32(w) for w in weights])
  return output.state, np.concatenate(output.result), output.measurements


@pytest.fixture(scope='module')
def processes():
  """One process per attack spec, built once for the module (inner: the weighted mean)."""
  built = {}

  def get(spec):
    if spec not in built:
      built[spec] = update_corruption.UpdateCorruptionFactory(
          spec, tff.aggregators.MeanFactory(), seed=3, stacked_rule=_tf_median
      ).create(_VALUE_TYPE, _WEIGHT_TYPE)
    return built[spec]

  return get


def _sent_by_the_corrupted(result, updates, weights, corrupted):
  """What the corrupted clients sent on average, read off the weighted mean."""
  honest = weights[~corrupted] @ updates[~corrupted].astype(np.float64)
  return (result * weights.sum() - honest) / weights[corrupted].sum()


@pytest.mark.parametrize('spec', sorted(_REFERENCES))
def test_the_tff_attack_sends_the_numpy_reference_two_rounds_running(processes, spec):
  """Round 1 with the state's zero previous aggregate, round 2 with round 1's aggregate."""
  process = processes(spec)
  state, previous = process.initialize(), np.zeros(7)
  for seed in (5, 6):
    updates, weights, corrupted = _cohort(seed)
    state, result, measurements = _run(process, state, updates, weights, corrupted)
    sent = _sent_by_the_corrupted(result, updates, weights, corrupted)
    expected = _REFERENCES[spec](updates, weights, corrupted, previous)
    if spec.startswith('line_search'):
      assert _objective(updates, weights, corrupted, sent) >= _objective(updates, weights, corrupted, expected) - 1e-4
    else:
      np.testing.assert_allclose(sent, expected, rtol=2e-4, atol=2e-4)
    assert measurements['num_corrupted_clients'] == 3
    previous = result


def test_fang_trimmed_mean_clients_draw_their_own_values_within_the_bounds(processes):
  process = processes('fang_trimmed_mean')
  updates, weights, corrupted = _cohort(7, m=10, num_corrupted=1)
  _, result, _ = _run(process, process.initialize(), updates, weights, corrupted)
  low, high = fang.trimmed_mean_bounds(updates, weights, corrupted, 2.0)
  sent = _sent_by_the_corrupted(result, updates, weights, corrupted)
  assert np.all(sent >= low - 1e-4) and np.all(sent <= high + 1e-4)
  assert np.std((sent - low) / (high - low)) > 0.1  # uniform draws, not one end of the interval


def test_fang_trimmed_mean_corrupted_clients_each_draw_their_own_values(processes):
  """Two corrupted clients: the mean shows only their weighted average, so the round runs twice with their weights
  swapped (1, 3) and (3, 1). The bounds and the draws do not depend on a corrupted client's weight, so the two
  means give each client's values: v1 = (3 s_b - s_a) / 2, v2 = (3 s_a - s_b) / 2. One draw shared by all
  corrupted clients would give v1 = v2."""
  process = processes('fang_trimmed_mean')
  updates, weights, corrupted = _cohort(7, m=10, num_corrupted=2)
  low, high = fang.trimmed_mean_bounds(updates, weights, corrupted, 2.0)
  sent = []
  for corrupted_weights in ([1.0, 3.0], [3.0, 1.0]):
    weights[corrupted] = corrupted_weights
    _, result, _ = _run(process, process.initialize(), updates, weights, corrupted)
    sent.append(_sent_by_the_corrupted(result, updates, weights, corrupted))
  first = (3 * sent[1] - sent[0]) / 2
  second = (3 * sent[0] - sent[1]) / 2
  for values in (first, second):
    assert np.all(values >= low - 1e-3) and np.all(values <= high + 1e-3)
  positions = [(values - low) / (high - low) for values in (first, second)]
  assert np.max(np.abs(positions[0] - positions[1])) > 0.2


def test_rop_state_keeps_the_previous_aggregate_and_static_attacks_keep_none(processes):
  state = processes('rop').initialize()
  assert 'previous_aggregate' in state
  updates, weights, corrupted = _cohort(8)
  state, result, _ = _run(processes('rop'), state, updates, weights, corrupted)
  np.testing.assert_allclose(np.concatenate(state['previous_aggregate']), result)
  assert 'previous_aggregate' not in processes('mimic').initialize()


@pytest.mark.parametrize('spec', ['min_max', 'mimic', 'fang_trimmed_mean'])
def test_the_privacy_audit_names_the_gathering_of_a_gathered_attack(processes, spec):
  assert 'federated_aggregate' in privacy.non_secure_intrinsics(processes(spec).next)


@pytest.mark.parametrize('spec', ['omniscient', 'alie', 'ipm', 'gaussian', 'sign_flipping'])
def test_the_static_attacks_sum_and_gather_nothing(processes, spec):
  assert privacy.non_secure_intrinsics(processes(spec).next) == frozenset()


def test_every_catalog_name_has_an_implementation():
  for name in catalog.ATTACK_NAMES:
    assert registry.build(name, stacked_rule=_tf_median) is not None


def test_omniscient_direction_matches_its_reference_through_norm_aware_at_c_equal_its_norm_ratio():
  """norm_aware(direction=omniscient) is the omniscient target rescaled: same direction."""
  updates, weights, corrupted = _cohort(9)
  got = _payload('norm_aware', updates, weights, corrupted, np.zeros(7)).numpy()
  target = directions.omniscient_target(updates, weights, corrupted)
  np.testing.assert_allclose(got / np.linalg.norm(got), target / np.linalg.norm(target), atol=1e-6)


@pytest.mark.slow  # two builds of every attack
@pytest.mark.parametrize('name', catalog.ATTACK_NAMES)
def test_an_attack_draws_other_numbers_under_another_seed_iff_the_catalog_says_it_does(name):
  """`AttackInfo.draws_random_numbers` decides whether the robustness sweep builds a process per seed: an attack
  that uses its seed but is not marked would send the same draws for every seed of a sweep."""
  updates, weights, corrupted = _cohort(7)
  sent = []
  for seed in (0, 1):
    process = update_corruption.UpdateCorruptionFactory(
        name, tff.aggregators.MeanFactory(), seed=seed, stacked_rule=_tf_median).create(_VALUE_TYPE, _WEIGHT_TYPE)
    sent.append(_run(process, process.initialize(), updates, weights, corrupted)[1])
  assert (not np.allclose(sent[0], sent[1])) == catalog.ATTACKS[name].draws_random_numbers
