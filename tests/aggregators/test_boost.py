"""Boosting (`aggregators.attacks.boost`), the update half of model replacement, through `UpdateCorruptionFactory`
against its NumPy reference (`core.attacks.boost`): the weighted mean it leads to, and Bagdasaryan et al.'s closed
form, the FedAvg model replaced by the attackers' own."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.aggregators import update_corruption
from tff_robust.core.attacks import boost

_UPDATE_TYPE = tff.to_type([(np.float32, [4]), (np.float32, [3])])
_VALUE_TYPE = tff.StructType([_UPDATE_TYPE, tff.TensorType(np.bool_)])
_WEIGHT_TYPE = tff.TensorType(np.float32)
_SPECS = {'boost(eta=0.5)': dict(gamma=None, eta=0.5), 'boost(gamma=3)': dict(gamma=3.0, eta=1.0)}


@pytest.fixture(scope='module')
def processes():
  return {spec: update_corruption.UpdateCorruptionFactory(spec, tff.aggregators.MeanFactory()).create(
      _VALUE_TYPE, _WEIGHT_TYPE) for spec in _SPECS}


def _aggregate(process, updates, weights, corrupted):
  values = [[[u[:4], u[4:]], bool(c)] for u, c in zip(updates.astype(np.float32), corrupted)]
  output = process.next(process.initialize(), values, [np.float32(w) for w in weights])
  return np.concatenate(output.result), output.measurements


@pytest.mark.parametrize('spec', sorted(_SPECS))
def test_the_weighted_mean_is_that_of_the_numpy_boosted_updates(processes, spec):
  rng = np.random.default_rng(0)
  updates, weights = rng.normal(size=(9, 7)), rng.uniform(1, 3, 9).astype(np.float32)
  corrupted = np.arange(9) >= 6
  result, measurements = _aggregate(processes[spec], updates, weights, corrupted)
  boosted = boost.boosted_updates(updates, weights, corrupted, **_SPECS[spec])
  np.testing.assert_allclose(result, weights @ boosted / weights.sum(), rtol=1e-5, atol=1e-5)
  assert measurements['num_corrupted_clients'] == 3
  clean, _ = _aggregate(processes[spec], updates, weights, np.zeros(9, bool))  # no attacker: plain FedAvg
  np.testing.assert_allclose(clean, weights @ updates / weights.sum(), rtol=1e-5, atol=1e-5)


def test_model_replacement_makes_the_fedavg_step_land_on_the_attackers_model(processes):
  """Honest clients send the global model back (zero updates); one, then two attackers send G - X_i: with the
  server learning rate 0.5 the attack assumes, G - 0.5 mean = the attackers' weighted mean model."""
  rng = np.random.default_rng(1)
  global_model, weights = rng.normal(size=7), rng.uniform(1, 3, 8).astype(np.float32)
  for attackers in ([3], [0, 6]):
    corrupted = np.isin(np.arange(8), attackers)
    models = rng.normal(size=(8, 7))
    updates = np.where(corrupted[:, None], global_model - models, 0.0)
    result, _ = _aggregate(processes['boost(eta=0.5)'], updates, weights, corrupted)
    replaced = weights[corrupted] @ models[corrupted] / weights[corrupted].sum()
    np.testing.assert_allclose(global_model - 0.5 * result, replaced, atol=2e-5)
    np.testing.assert_allclose(global_model - 0.5 * result,
                               boost.fedavg_step(global_model, boost.boosted_updates(updates, weights, corrupted,
                                                                                     eta=0.5), weights, 0.5),
                               atol=2e-5)


def test_boosting_sums_and_gathers_nothing(processes):
  assert privacy.non_secure_intrinsics(processes['boost(eta=0.5)'].next) == frozenset()
