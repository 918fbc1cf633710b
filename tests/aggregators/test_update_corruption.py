"""UpdateCorruptionFactory: the omniscient identity, Gaussian statistics, ALIE, IPM and sign flipping against
NumPy references of their formulas, and composition with RFA."""

import math
import statistics

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import update_corruption
from tff_robust.aggregators.attacks import stacked_statistics
from tff_robust.core.attacks import directions
from tff_robust.core.attacks import honest_statistics
from tff_robust.core import weiszfeld

_UPDATE_TYPE = tff.to_type([(np.float32, [4]), (np.float32, [2])])
_VALUE_TYPE = tff.StructType([_UPDATE_TYPE, tff.TensorType(np.bool_)])
_WEIGHT_TYPE = tff.TensorType(np.float32)


def _run(process, updates, weights, flags):
  values = [[[u[:4], u[4:]], bool(f)] for u, f in zip(np.asarray(updates, np.float32), flags)]
  output = process.next(process.initialize(), values, [np.float32(w) for w in weights])
  return np.concatenate(output.result), output.measurements


def _cohort(seed=0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(8, 6)).astype(np.float32), rng.uniform(1, 4, 8).astype(np.float32)


def test_omniscient_attack_makes_the_weighted_mean_the_negative_honest_mean():
  updates, weights = _cohort()
  flags = np.arange(8) < 3
  process = update_corruption.UpdateCorruptionFactory('omniscient', tff.aggregators.MeanFactory()).create(
      _VALUE_TYPE, _WEIGHT_TYPE
  )
  result, measurements = _run(process, updates, weights, flags)
  np.testing.assert_allclose(result, -(weights @ updates) / weights.sum(), rtol=1e-5, atol=1e-6)
  assert measurements['num_corrupted_clients'] == 3


def test_omniscient_attack_then_geometric_median_matches_the_references():
  updates, weights = _cohort(1)
  flags = np.arange(8) < 2
  process = update_corruption.UpdateCorruptionFactory(
      'omniscient', geometric_median.GeometricMedianFactory(num_passes=3)
  ).create(_VALUE_TYPE, _WEIGHT_TYPE)
  result, measurements = _run(process, updates, weights, flags)
  attacked = directions.omniscient_updates(updates, weights, flags)
  expected = weiszfeld.smoothed_weiszfeld(attacked, weights, num_passes=3, smoothing=1e-6, init='mean')
  np.testing.assert_allclose(result, expected.iterates[-1], rtol=1e-4, atol=1e-5)
  assert measurements['secure_average_calls'] == 3  # the inner aggregator's measurements pass through


@pytest.mark.parametrize('attack', update_corruption.ATTACKS)
def test_without_corrupted_clients_the_inner_aggregate_is_unchanged(attack):
  updates, weights = _cohort(2)
  mean_rule = lambda points, weights, center: tf.linalg.matvec(points, weights, transpose_a=True) / tf.reduce_sum(
      weights)
  process = update_corruption.UpdateCorruptionFactory(
      attack, tff.aggregators.MeanFactory(), stacked_rule=mean_rule
  ).create(_VALUE_TYPE, _WEIGHT_TYPE)
  result, measurements = _run(process, updates, weights, np.zeros(8, bool))
  np.testing.assert_allclose(result, weights @ updates / weights.sum(), rtol=1e-5, atol=1e-6)
  assert measurements['num_corrupted_clients'] == 0


@pytest.mark.parametrize('mode', ['replace', 'add'])
def test_gaussian_noise_has_the_update_own_standard_deviation(mode):
  update_type = tff.TensorType(np.float32, [20000])
  process = update_corruption.UpdateCorruptionFactory(
      f'gaussian(mode={mode})', tff.aggregators.MeanFactory()
  ).create(tff.StructType([update_type, tff.TensorType(np.bool_)]), _WEIGHT_TYPE)
  original = np.random.default_rng(3).normal(2.0, 3.0, 20000).astype(np.float32)
  output = process.next(process.initialize(), [[original, True]], [np.float32(1.0)])
  noise = output.result - (original if mode == 'add' else 0.0)
  assert abs(np.std(noise) / np.std(original) - 1) < 0.03
  assert abs(np.mean(noise)) < 0.1
  assert abs(np.corrcoef(noise, original)[0, 1]) < 0.05


def _honest_mean_and_std(updates, weights, corrupted):
  """Weighted mean and population (ddof = 0) standard deviation of the honest rows, in float64."""
  honest, w = np.asarray(updates, np.float64)[~corrupted], np.asarray(weights, np.float64)[~corrupted]
  mean = w @ honest / w.sum()
  return mean, np.sqrt(w @ (honest - mean) ** 2 / w.sum())


def _paper_z_max(n, m):
  """Baruch et al. (2019), Algorithm 3: s = floor(n/2 + 1) - m, z_max = Phi^{-1}((n - s) / n)."""
  s = math.floor(n / 2 + 1) - m
  return statistics.NormalDist().inv_cdf((n - s) / n)


def _attacked_mean(attack, updates, weights, corrupted):
  process = update_corruption.UpdateCorruptionFactory(attack, tff.aggregators.MeanFactory()).create(
      _VALUE_TYPE, _WEIGHT_TYPE
  )
  result, measurements = _run(process, updates, weights, corrupted)
  assert measurements['num_corrupted_clients'] == corrupted.sum()
  return result


def _mean_with(updates, weights, corrupted, target_rows):
  attacked = np.asarray(updates, np.float64).copy()
  attacked[corrupted] = target_rows
  return weights @ attacked / weights.sum()


@pytest.mark.parametrize('num_corrupted, z', [(1, None), (3, None), (2, 1.5), (3, -0.7)])
def test_alie_sends_the_honest_mean_minus_z_standard_deviations(num_corrupted, z):
  updates, weights = _cohort(4)
  corrupted = np.arange(8) >= 8 - num_corrupted
  mean, std = _honest_mean_and_std(updates, weights, corrupted)
  z_used = _paper_z_max(8, num_corrupted) if z is None else z
  result = _attacked_mean('alie' if z is None else f'alie(z={z})', updates, weights, corrupted)
  np.testing.assert_allclose(result, _mean_with(updates, weights, corrupted, mean - z_used * std), rtol=1e-5,
                             atol=1e-6)


def test_the_tensorflow_alie_z_max_is_the_numpy_one_one_client_cohorts_included():
  for n, m in ((1, 0), (1, 1), (2, 1), (8, 3), (9, 9), (50, 10)):
    assert stacked_statistics.alie_z_max(n, m).numpy() == pytest.approx(honest_statistics.alie_z_max(n, m), abs=1e-12)


def test_alie_z_max_of_the_paper_for_several_cohorts():
  """The paper's z_max for n = 8 and m = 3: s = 2, Phi^{-1}(6/8) = 0.674; a majority (m = 5) uses s = 1."""
  assert _paper_z_max(8, 3) == pytest.approx(0.6745, abs=1e-4)
  updates, weights = _cohort(5)
  for num_corrupted, s in ((2, 3), (4, 1), (5, 1), (7, 1)):
    corrupted = np.arange(8) < num_corrupted
    mean, std = _honest_mean_and_std(updates, weights, corrupted)
    z = statistics.NormalDist().inv_cdf((8 - s) / 8)
    result = _attacked_mean('alie', updates, weights, corrupted)
    np.testing.assert_allclose(result, _mean_with(updates, weights, corrupted, mean - z * std), rtol=1e-5,
                               atol=1e-6)


def test_alie_without_honest_clients_sends_zeros():
  updates, weights = _cohort(6)
  corrupted = np.ones(8, bool)
  np.testing.assert_array_equal(_attacked_mean('alie', updates[:1], weights[:1], corrupted[:1]), np.zeros(6))
  np.testing.assert_array_equal(_attacked_mean('alie', updates, weights, corrupted), np.zeros(6))


@pytest.mark.parametrize('epsilon', [0.1, 0.5, 2.0])
def test_ipm_sends_minus_epsilon_times_the_honest_mean(epsilon):
  updates, weights = _cohort(7)
  corrupted = np.arange(8) % 3 == 0
  mean, _ = _honest_mean_and_std(updates, weights, corrupted)
  result = _attacked_mean(f'ipm(eps={epsilon})', updates, weights, corrupted)
  np.testing.assert_allclose(result, _mean_with(updates, weights, corrupted, -epsilon * mean), rtol=1e-5,
                             atol=1e-6)


def test_ipm_default_epsilon_is_karimireddy_et_al_s():
  assert update_corruption.DEFAULT_IPM_EPSILON == 0.1
  updates, weights = _cohort(8)
  corrupted = np.arange(8) < 2
  mean, _ = _honest_mean_and_std(updates, weights, corrupted)
  np.testing.assert_allclose(_attacked_mean('ipm', updates, weights, corrupted),
                             _mean_with(updates, weights, corrupted, -0.1 * mean), rtol=1e-5, atol=1e-6)


def test_sign_flipping_sends_minus_the_own_update():
  updates, weights = _cohort(9)
  corrupted = np.array([1, 0, 0, 1, 0, 1, 0, 0], bool)
  result = _attacked_mean('sign_flipping', updates, weights, corrupted)
  np.testing.assert_allclose(result, _mean_with(updates, weights, corrupted, -updates[corrupted]), rtol=1e-5,
                             atol=1e-6)


def test_bad_arguments():
  with pytest.raises(ValueError, match="unknown attack 'label_flip'"):
    update_corruption.UpdateCorruptionFactory('label_flip', tff.aggregators.MeanFactory())
  with pytest.raises(ValueError, match='mode must be one of replace, add'):
    update_corruption.UpdateCorruptionFactory('gaussian(mode=x)', tff.aggregators.MeanFactory())
  for z in (math.inf, -math.inf, math.nan):
    with pytest.raises(ValueError, match="attack 'alie': z must be a finite number"):
      update_corruption.UpdateCorruptionFactory(f'alie(z={z})', tff.aggregators.MeanFactory())
  for epsilon in (-0.1, math.inf, math.nan):
    with pytest.raises(ValueError, match="attack 'ipm': eps must be a finite number >= 0"):
      update_corruption.UpdateCorruptionFactory(f'ipm(eps={epsilon})', tff.aggregators.MeanFactory())
  with pytest.raises(ValueError, match='needs the defence\'s stacked rule'):
    update_corruption.UpdateCorruptionFactory('line_search', tff.aggregators.MeanFactory())
  with pytest.raises(TypeError, match='value_type'):
    update_corruption.UpdateCorruptionFactory('gaussian', tff.aggregators.MeanFactory()).create(
        _UPDATE_TYPE, _WEIGHT_TYPE
    )


def _seeded_gaussian_noise(leaves, seed, round_num):
  """The documented draw: sigma * stateless_normal(seed = (seed + round, fingerprint) + (0, leaf index)), sigma the
  std of the whole update and the fingerprint the sum of its float32 bit patterns (as int32) modulo 2^31 - 1."""
  flat = np.concatenate([np.ravel(leaf) for leaf in leaves]).astype(np.float32)
  fingerprint = int(flat.view(np.int32).astype(np.int64).sum() % 2147483647)
  return [
      np.std(flat) * tf.random.stateless_normal(leaf.shape, seed=[seed + round_num, fingerprint + i]).numpy()
      for i, leaf in enumerate(leaves)
  ]


@pytest.mark.parametrize('mode', ['replace', 'add'])
def test_gaussian_draw_is_pinned_to_its_seed_round_and_update(mode):
  """Pins the Gaussian attack's exact draw (the registry must keep it): seed 5, rounds 0 and 1."""
  process = update_corruption.UpdateCorruptionFactory(
      f'gaussian(mode={mode})', tff.aggregators.MeanFactory(), seed=5
  ).create(_VALUE_TYPE, _WEIGHT_TYPE)
  updates, weights = _cohort(10)
  flags = np.arange(8) < 3
  values = [[[u[:4], u[4:]], bool(f)] for u, f in zip(updates, flags)]
  state = process.initialize()
  for round_num in range(2):
    output = process.next(state, values, [np.float32(w) for w in weights])
    state = output.state
    attacked = np.asarray(updates, np.float64).copy()
    for i in np.flatnonzero(flags):
      noise = np.concatenate(_seeded_gaussian_noise([updates[i][:4], updates[i][4:]], 5, round_num))
      attacked[i] = noise + (updates[i] if mode == 'add' else 0)
    np.testing.assert_allclose(np.concatenate(output.result), weights @ attacked / weights.sum(), rtol=1e-5,
                               atol=1e-6)
