"""Neurotoxin's masked update (`aggregators.attacks.masked`) through `UpdateCorruptionFactory`, two rounds running
(the mask from the state's previous aggregate: zeros, then round 1's), against its NumPy reference
(`core.attacks.neurotoxin`)."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.aggregators import update_corruption
from tff_robust.core.attacks import neurotoxin

_UPDATE_TYPE = tff.to_type([(np.float32, [4]), (np.float32, [3])])
_VALUE_TYPE = tff.StructType([_UPDATE_TYPE, tff.TensorType(np.bool_)])


@pytest.fixture(scope='module')
def process():
  return update_corruption.UpdateCorruptionFactory('masked(top=0.3)', tff.aggregators.MeanFactory()).create(
      _VALUE_TYPE, tff.TensorType(np.float32))


def test_two_rounds_of_masked_updates_are_the_numpy_ones(process):
  rng = np.random.default_rng(0)
  state, previous = process.initialize(), np.zeros(7)
  corrupted = np.arange(8) >= 5
  for _ in range(2):
    updates, weights = rng.normal(size=(8, 7)), rng.uniform(1, 3, 8).astype(np.float32)
    values = [[[u[:4].astype(np.float32), u[4:].astype(np.float32)], bool(c)] for u, c in zip(updates, corrupted)]
    output = process.next(state, values, list(weights))
    expected = weights @ neurotoxin.masked_updates(updates, corrupted, previous, 0.3) / weights.sum()
    result = np.concatenate(output.result)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    kept = neurotoxin.kept_coordinates(previous, 0.3)
    assert kept.sum() == (7 if not previous.any() else 7 - 3)  # round 1: none; then ceil(0.3 * 7) masked
    state, previous = output.state, result
  assert not np.allclose(result, weights @ updates / weights.sum())  # the mask changed the attackers' updates


def test_the_mask_sums_and_gathers_nothing(process):
  assert privacy.non_secure_intrinsics(process.next) == frozenset()


def test_a_float64_leaf_is_masked_by_its_float64_magnitudes():
  """The previous aggregate's float64 entries of ~1e-50 (0 in float32) rank as in the NumPy reference: the top
  3 of 7 are masked, where a float32 ranking would find every magnitude 0 and mask nothing."""
  update_type = tff.to_type([(np.float64, [4]), (np.float32, [3])])
  process = update_corruption.UpdateCorruptionFactory('masked(top=0.3)', tff.aggregators.MeanFactory()).create(
      tff.StructType([update_type, tff.TensorType(np.bool_)]), tff.TensorType(np.float32))
  tiny = np.array([1e-50, 4e-50, 3e-50, 2e-50])
  honest = process.next(process.initialize(), [[[tiny, np.zeros(3, np.float32)], False]] * 2, [1.0, 1.0])
  ones = [np.ones(4), np.ones(3, np.float32)]
  output = process.next(honest.state, [[ones, True], [ones, False]], [1.0, 1.0])
  kept = neurotoxin.kept_coordinates(np.concatenate([tiny, np.zeros(3)]), 0.3)
  np.testing.assert_array_equal(kept, [True, False, False, False, True, True, True])
  np.testing.assert_allclose(np.concatenate(output.result), (1.0 + kept) / 2)
