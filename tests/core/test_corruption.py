"""Corrupted-set selection (RFA eq. 5) and the NumPy omniscient attack (`core.attacks.directions`)."""

import numpy as np
import pytest

from tff_robust.core import corruption
from tff_robust.core.attacks import directions


@pytest.mark.parametrize('fraction', [0.01, 0.1, 0.25, 0.4])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_corrupted_weight_share_reaches_rho_within_one_client(fraction, seed):
  rng = np.random.default_rng(seed)
  ids = [f'c{i}' for i in range(50)]
  weights = rng.integers(5, 200, 50).astype(float)
  chosen = corruption.select_corrupted_clients(ids, weights, fraction, seed)
  share = sum(w for i, w in zip(ids, weights) if i in chosen) / weights.sum()
  assert share >= fraction
  largest = max(w for i, w in zip(ids, weights) if i in chosen)
  assert share - largest / weights.sum() < fraction  # the last client added overshoots rho by < its weight


def test_selection_is_seeded_and_empty_at_zero():
  ids, weights = [f'c{i}' for i in range(20)], np.ones(20)
  assert corruption.select_corrupted_clients(ids, weights, 0.0, 0) == frozenset()
  assert corruption.select_corrupted_clients(ids, weights, 0.3, 4) == corruption.select_corrupted_clients(
      ids, weights, 0.3, 4
  )
  assert len(corruption.select_corrupted_clients(ids, weights, 0.3, 4)) == 6


@pytest.mark.parametrize('fraction', [-0.1, 1.5])
def test_bad_fraction_is_rejected(fraction):
  with pytest.raises(ValueError, match='fraction'):
    corruption.select_corrupted_clients(['a'], [1.0], fraction, 0)


def test_omniscient_attack_negates_the_cohort_weighted_sum():
  rng = np.random.default_rng(0)
  updates, weights = rng.normal(size=(10, 6)), rng.uniform(1, 5, 10)
  corrupted = np.arange(10) < 3
  attacked = directions.omniscient_updates(updates, weights, corrupted)
  np.testing.assert_allclose(weights @ attacked, -(weights @ updates), atol=1e-10)
  np.testing.assert_array_equal(attacked[~corrupted], updates[~corrupted])
  np.testing.assert_array_equal(directions.omniscient_updates(updates, weights, np.zeros(10, bool)), updates)
