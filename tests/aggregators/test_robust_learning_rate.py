"""The robust learning rate (RLR, Özdayi et al. 2021) against its NumPy reference `core.rlr`, the secure-sum audit
and the refusals of its threshold."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.aggregators import robust_learning_rate
from tff_robust.aggregators.defences import building
from tff_robust.aggregators.defences import implementations
from tff_robust.core import rlr
from tests.aggregators import two_tensor_points

THRESHOLD = 5
BOUNDS = implementations.SecureBounds(value_bound=100.0, max_client_weight=3.0)


def _cloud(seed, num_clients=9):
  """Clients whose coordinates agree in sign to varying degrees: a common sign pattern, each client flipping each
  coordinate with its own probability, so that the votes |sum_k sgn| spread over 1..9 across coordinates."""
  rng = np.random.default_rng(seed)
  pattern = rng.choice([-1.0, 1.0], size=5)
  flips = rng.uniform(size=(num_clients, 5)) < rng.uniform(0.0, 0.6, size=(1, 5))
  points = np.where(flips, -pattern, pattern) * rng.uniform(0.1, 3.0, size=(num_clients, 5))
  return points, rng.uniform(0.5, 3.0, size=num_clients)


@pytest.fixture(scope='module')
def process():
  factory = robust_learning_rate.RobustLearningRateFactory(tff.aggregators.MeanFactory(), THRESHOLD)
  return factory.create(*two_tensor_points.TYPES)


@pytest.mark.parametrize('seed', [0, 1, 2, 3])
def test_it_is_the_reference_with_a_mean_inside(process, seed):
  points, weights = _cloud(seed)
  result, measurements = two_tensor_points.aggregate_once(process, points, weights)
  np.testing.assert_allclose(result, rlr.aggregate(points, weights, THRESHOLD), rtol=1e-5, atol=1e-6)
  flipped = int(np.sum(rlr.learning_rate_signs(points, weights, THRESHOLD) < 0))
  assert measurements['num_flipped_coordinates'] == flipped
  assert measurements['secure_average_calls'] == 2 and measurements['num_nonfinite_clients'] == 0


def test_the_clouds_flip_some_coordinates_and_keep_others():
  """The cases above are not vacuous: across them both signs of the learning rate occur."""
  signs = np.concatenate([rlr.learning_rate_signs(*_cloud(seed), THRESHOLD) for seed in range(4)])
  assert 3 <= np.sum(signs < 0) <= len(signs) - 3


def test_clients_of_weight_zero_and_nonfinite_clients_do_not_vote(process):
  points, weights = _cloud(4, num_clients=11)
  weights[0] = 0.0
  points[1, 2] = np.nan
  result, measurements = two_tensor_points.aggregate_once(process, points, weights)
  kept_points, kept_weights = np.nan_to_num(points), np.where(np.arange(11) == 1, 0.0, weights)
  np.testing.assert_allclose(result, rlr.aggregate(kept_points, kept_weights, THRESHOLD), rtol=1e-5, atol=1e-6)
  assert measurements['num_nonfinite_clients'] == 1
  everyone = rlr.learning_rate_signs(np.nan_to_num(points), np.ones(11), THRESHOLD)
  assert np.any(everyone != rlr.learning_rate_signs(kept_points, kept_weights, THRESHOLD))  # had they voted


def test_theta_zero_is_the_mean():
  points, weights = _cloud(5)
  zero = building.build_factory('rlr(theta=0)>mean', clients_per_round=9, num_byzantine=0)
  result, measurements = two_tensor_points.aggregate_once(zero.create(*two_tensor_points.TYPES), points, weights)
  np.testing.assert_allclose(result, weights @ points / weights.sum(), rtol=1e-5, atol=1e-6)
  assert measurements['num_flipped_coordinates'] == 0


def test_with_secure_bounds_every_client_value_is_summed_securely_and_the_votes_are_exact():
  spec = f'rlr(theta={THRESHOLD})>mean'
  secure = building.build_factory(spec, clients_per_round=9, num_byzantine=0, secure_bounds=BOUNDS).create(
      *two_tensor_points.TYPES)
  assert not privacy.non_secure_intrinsics(secure.next)
  privacy.assert_client_values_aggregated_securely(secure.next)
  points, weights = _cloud(6)
  result, measurements = two_tensor_points.aggregate_once(secure, points, weights)
  assert measurements['num_flipped_coordinates'] == np.sum(rlr.learning_rate_signs(points, weights, THRESHOLD) < 0)
  np.testing.assert_allclose(result, rlr.aggregate(points, weights, THRESHOLD), atol=1e-3)  # the mean's quantisation


@pytest.mark.parametrize('threshold', [-1, 2.5, True, None])
def test_a_threshold_that_is_not_a_non_negative_integer_is_refused_by_name(threshold):
  with pytest.raises(ValueError, match='threshold must be an integer >= 0'):
    robust_learning_rate.RobustLearningRateFactory(tff.aggregators.MeanFactory(), threshold)


def test_a_registry_threshold_above_the_cohort_is_refused_by_name():
  with pytest.raises(ValueError, match=r'rlr\(theta=11\): theta must be <= clients_per_round = 10'):
    building.build_factory('rlr(theta=11)>mean', clients_per_round=10, num_byzantine=0)
  with pytest.raises(ValueError, match=r'theta must be <= clients_per_round = 10'):
    building.stacked_rule('rlr(theta=11)>mean', clients_per_round=10, num_byzantine=0)


@pytest.mark.parametrize('rule', ['mean', 'gm', 'median', 'krum(f=2)', 'trimmed_mean(beta=0.2)'])
def test_before_a_rule_that_commutes_with_coordinate_flips_it_flips_that_rules_aggregate(rule):
  """The module docstring's claim, on the stacked forms: rlr>R is s ⊙ R for rules whose distances ignore flips."""
  points, weights = _cloud(7, num_clients=10)
  arguments = [tf.constant(x, tf.float32) for x in (points, weights, np.zeros(5))]
  chained = building.stacked_rule(f'rlr(theta={THRESHOLD})>{rule}', clients_per_round=10, num_byzantine=2)
  alone = building.stacked_rule(rule, clients_per_round=10, num_byzantine=2)
  signs = rlr.learning_rate_signs(points, weights, THRESHOLD)
  assert np.any(signs < 0)
  np.testing.assert_allclose(chained(*arguments).numpy(), signs * alone(*arguments).numpy(), rtol=1e-5, atol=1e-6)
