"""UpdateCorruptionFactory: the omniscient identity, Gaussian statistics, and composition with RFA."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import update_corruption
from tff_robust.core import corruption
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
  attacked = corruption.omniscient_updates(updates, weights, flags)
  expected = weiszfeld.smoothed_weiszfeld(attacked, weights, num_passes=3, smoothing=1e-6, init='mean')
  np.testing.assert_allclose(result, expected.iterates[-1], rtol=1e-4, atol=1e-5)
  assert measurements['secure_average_calls'] == 3  # the inner aggregator's measurements pass through


@pytest.mark.parametrize('attack', ['omniscient', 'gaussian'])
def test_without_corrupted_clients_the_inner_aggregate_is_unchanged(attack):
  updates, weights = _cohort(2)
  process = update_corruption.UpdateCorruptionFactory(attack, tff.aggregators.MeanFactory()).create(
      _VALUE_TYPE, _WEIGHT_TYPE
  )
  result, measurements = _run(process, updates, weights, np.zeros(8, bool))
  np.testing.assert_allclose(result, weights @ updates / weights.sum(), rtol=1e-5, atol=1e-6)
  assert measurements['num_corrupted_clients'] == 0


@pytest.mark.parametrize('mode', ['replace', 'add'])
def test_gaussian_noise_has_the_update_own_standard_deviation(mode):
  update_type = tff.TensorType(np.float32, [20000])
  process = update_corruption.UpdateCorruptionFactory(
      'gaussian', tff.aggregators.MeanFactory(), gaussian_mode=mode
  ).create(tff.StructType([update_type, tff.TensorType(np.bool_)]), _WEIGHT_TYPE)
  original = np.random.default_rng(3).normal(2.0, 3.0, 20000).astype(np.float32)
  output = process.next(process.initialize(), [[original, True]], [np.float32(1.0)])
  noise = output.result - (original if mode == 'add' else 0.0)
  assert abs(np.std(noise) / np.std(original) - 1) < 0.03
  assert abs(np.mean(noise)) < 0.1
  assert abs(np.corrcoef(noise, original)[0, 1]) < 0.05


def test_bad_arguments():
  with pytest.raises(ValueError, match='attack'):
    update_corruption.UpdateCorruptionFactory('label_flip', tff.aggregators.MeanFactory())
  with pytest.raises(ValueError, match='gaussian_mode'):
    update_corruption.UpdateCorruptionFactory('gaussian', tff.aggregators.MeanFactory(), gaussian_mode='x')
  with pytest.raises(TypeError, match='value_type'):
    update_corruption.UpdateCorruptionFactory('gaussian', tff.aggregators.MeanFactory()).create(
        _UPDATE_TYPE, _WEIGHT_TYPE
    )
