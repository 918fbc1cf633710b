"""Nearest-neighbour mixing (Allouah et al. 2023, Algorithm 1) against an independent NumPy reference."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import nearest_neighbor_mixing
from tff_robust.aggregators import privacy

_VALUE_TYPE = tff.TensorType(np.float32, [4])
_WEIGHT_TYPE = tff.TensorType(np.float32)


def _mixed(points, num_byzantine):
  """Row i: the mean of the n - f rows nearest to row i (stable sort of the distances, itself at distance 0)."""
  distances = np.linalg.norm(points[:, None] - points[None], axis=2)
  nearest = np.argsort(distances, axis=1, kind='stable')[:, :len(points) - num_byzantine]
  return points[nearest].mean(axis=1)


def test_mixing_matches_the_reference():
  points = np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
  np.testing.assert_allclose(nearest_neighbor_mixing.mix(points, 2).numpy(), _mixed(points, 2), rtol=1e-6)
  np.testing.assert_allclose(nearest_neighbor_mixing.mix(points, 0).numpy(), np.tile(points.mean(0), (7, 1)),
                             rtol=1e-5, atol=1e-6)


def test_nnm_then_coordinate_median_matches_the_reference_and_gathers():
  rng = np.random.default_rng(1)
  points = rng.normal(size=(9, 4)).astype(np.float32)
  points[:2] = 50.0  # two attackers
  factory = nearest_neighbor_mixing.nearest_neighbor_mixing_factory(2, baselines.coordinate_median_factory())
  process = factory.create(_VALUE_TYPE, _WEIGHT_TYPE)
  output = process.next(process.initialize(), list(points), [np.float32(1.0)] * 9)
  np.testing.assert_allclose(output.result, np.median(_mixed(points.astype(np.float64), 2), axis=0), rtol=1e-5)
  assert privacy.non_secure_intrinsics(process.next) == frozenset({'federated_aggregate'})


def test_each_client_mixes_its_own_update_as_the_reference_does():
  points = np.random.default_rng(3).normal(size=(7, 4)).astype(np.float32)
  for i in range(7):
    np.testing.assert_allclose(
        nearest_neighbor_mixing.mix_one(points[i], points, 2).numpy(), _mixed(points, 2)[i], rtol=1e-6)
  # f >= m: the client keeps its own update (max(m - f, 1) = 1 neighbour, itself)
  np.testing.assert_allclose(nearest_neighbor_mixing.mix_one(points[4], points, 9).numpy(), points[4])


def test_mixing_before_a_weighted_mean_matches_the_reference_over_the_usable_clients():
  """NNM before TFF's mean (the chains' client-side form): the weighted mean of the mixed usable updates. A NaN
  client and a weight-0 client take no part in anyone's mix and send nothing."""
  rng = np.random.default_rng(4)
  points = rng.normal(size=(9, 4)).astype(np.float32)
  points[:2] = 40.0 + rng.normal(size=(2, 4)).astype(np.float32)  # two attackers
  points[5, 1] = np.nan
  weights = rng.uniform(0.5, 3.0, 9).astype(np.float32)
  weights[7] = 0.0
  usable = np.array([True] * 5 + [False, True, False, True])
  factory = nearest_neighbor_mixing.NearestNeighborMixingFactory(tff.aggregators.MeanFactory(), 2)
  process = factory.create(_VALUE_TYPE, _WEIGHT_TYPE)
  output = process.next(process.initialize(), list(points), list(weights))
  mixed = _mixed(points[usable].astype(np.float64), 2)
  np.testing.assert_allclose(output.result, np.average(mixed, axis=0, weights=weights[usable]), rtol=1e-5)
  assert output.measurements['num_clients_mixed'] == 7


def test_too_few_clients_give_the_insufficient_round():
  factory = nearest_neighbor_mixing.nearest_neighbor_mixing_factory(3, baselines.coordinate_median_factory())
  with pytest.raises(ValueError, match='more than num_byzantine = 3'):
    factory.check_clients_per_round(3)
  process = factory.create(_VALUE_TYPE, _WEIGHT_TYPE)
  output = process.next(process.initialize(), [np.ones(4, np.float32)] * 3, [np.float32(1.0)] * 3)
  assert output.measurements['insufficient_clients'] == 1
  np.testing.assert_array_equal(output.result, np.zeros(4))


def test_bad_arguments_name_the_argument():
  with pytest.raises(ValueError, match='num_byzantine must be an integer >= 0'):
    nearest_neighbor_mixing.nearest_neighbor_mixing_factory(-1, baselines.coordinate_median_factory())
  with pytest.raises(TypeError, match='then must be a gathering.GatheringRobustFactory'):
    nearest_neighbor_mixing.nearest_neighbor_mixing_factory(1, tff.aggregators.MeanFactory())
