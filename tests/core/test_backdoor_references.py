"""The NumPy references of the defences against backdoors against hand-worked cases of their papers' formulas:
norm bounding with weak DP (Sun et al. 2019), the robust learning rate (Özdayi et al. 2021) and FLAME (Nguyen et
al. 2022)."""

import numpy as np
import pytest

from tff_robust.core import flame
from tff_robust.core import rlr
from tff_robust.core import weak_dp


def test_weak_dp_clips_each_update_to_m_then_averages_with_weights_then_adds_sigma_z():
  points = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])  # norms 5, 0.5, 0
  weights = np.array([1.0, 2.0, 1.0])
  # clip to M = 1: [0.6, 0.8], [0.3, 0.4] (inside), [0, 0]; weighted mean (0.6 + 0.6, 0.8 + 0.8) / 4
  np.testing.assert_allclose(weak_dp.clipped_mean(points, weights, 1.0), [0.3, 0.4])
  np.testing.assert_allclose(weak_dp.aggregate(points, weights, 1.0, 0.5, [2.0, -1.0]), [1.3, -0.1])
  np.testing.assert_array_equal(weak_dp.clipped_mean(points, np.zeros(3), 1.0), [0.0, 0.0])


def test_the_noise_multiplier_is_sigma_n_over_m():
  assert weak_dp.noise_multiplier(0.01, 2.0, 100) == pytest.approx(0.5)


def test_rlr_flips_the_coordinates_fewer_than_theta_clients_agree_on():
  points = np.array([
      [1.0, 1.0, -2.0, 0.0],
      [2.0, -1.0, -1.0, 0.0],
      [1.0, 1.0, -3.0, 5.0],
      [9.0, 9.0, 9.0, 9.0],  # weight 0: takes no part, does not vote
  ])
  weights = np.array([1.0, 1.0, 2.0, 0.0])
  np.testing.assert_array_equal(rlr.sign_votes(points, weights), [3, 1, -3, 1])
  np.testing.assert_array_equal(rlr.learning_rate_signs(points, weights, 2), [1, -1, 1, -1])
  mean = np.array([5.0, 2.0, -9.0, 10.0]) / 4
  np.testing.assert_allclose(rlr.aggregate(points, weights, 2), mean * [1, -1, 1, -1])
  np.testing.assert_allclose(rlr.aggregate(points, weights, 0), mean)  # theta = 0: FedAvg
  np.testing.assert_allclose(rlr.aggregate(points, weights, 4), -mean)  # theta > n: every coordinate flipped


def _honest_and_backdoor(rng, honest=7, attackers=3, dimension=20):
  """Honest updates around one direction, attackers around another (a backdoor's), all of norm ~1."""
  direction, backdoor = rng.normal(size=dimension), rng.normal(size=dimension)
  points = np.concatenate([direction + 0.3 * rng.normal(size=(honest, dimension)),
                           backdoor + 0.05 * rng.normal(size=(attackers, dimension))])
  return points / np.linalg.norm(direction), np.arange(honest + attackers) < honest


@pytest.mark.parametrize('seed', range(5))
def test_flame_keeps_an_honest_majority_and_drops_the_backdoor_group(seed):
  """The cluster holds at least n//2 + 1 = 6 updates, none an attacker's (an honest update far from the others may
  be dropped too: the cluster is the first single-linkage group of 6, not every honest update)."""
  points, honest = _honest_and_backdoor(np.random.default_rng(seed))
  kept = flame.majority_cluster(points)
  assert not np.any(kept & ~honest) and kept.sum() >= 6, kept


def test_flame_clips_the_kept_updates_to_the_median_norm_of_all_and_averages_them():
  points = np.array([[1.0, 0.0], [4.0, 0.1], [2.0, -0.1], [0.0, -8.0]])  # the last one points elsewhere
  weights = np.array([1.0, 1.0, 2.0, 1.0])
  mean, median, kept = flame.noise_free_aggregate(points, weights)
  np.testing.assert_array_equal(kept, [True, True, True, False])
  norms = np.linalg.norm(points, axis=1)
  assert median == pytest.approx((norms[2] + norms[1]) / 2)  # the mean of the two middle norms of all four
  clipped = points[:3] * np.minimum(1.0, median / norms[:3])[:, None]
  np.testing.assert_allclose(mean, weights[:3] @ clipped / 4.0)
  np.testing.assert_allclose(flame.aggregate(points, weights, 0.01, [1.0, -2.0]),
                             mean + 0.01 * median * np.array([1.0, -2.0]))


def test_flame_cosine_distances_put_a_zero_update_at_distance_one():
  distances = flame.cosine_distances([[1.0, 0.0], [0.0, 0.0], [-2.0, 0.0]])
  np.testing.assert_allclose(distances, [[0, 1, 2], [1, 0, 1], [2, 1, 0]])


def test_flame_keeps_a_single_update_and_both_of_two():
  np.testing.assert_array_equal(flame.majority_cluster([[1.0, 2.0]]), [True])
  np.testing.assert_array_equal(flame.majority_cluster([[1.0, 2.0], [-1.0, 0.5]]), [True, True])
