"""The NumPy reference of ARC (adaptive robust clipping) against the paper's definition, written out here."""

import numpy as np
import pytest

from tff_robust.core import arc
from tff_robust.core import superquantile


@pytest.mark.parametrize('n,f,k', [(10, 0, 0), (10, 1, 1), (10, 2, 3), (10, 3, 4), (10, 4, 4), (3, 1, 1),
                                   (25, 5, 8), (1, 0, 0)])
def test_clipped_count_is_floor_of_2_f_over_n_times_n_minus_f(n, f, k):
  assert arc.clipped_count(n, f) == k == int(np.floor(2 * (f / n) * (n - f) + 1e-12))


@pytest.mark.parametrize('n,f', [(10, 5), (10, -1), (0, 0), (10, 1.5), (4, 2)])
def test_counts_out_of_range_are_refused(n, f):
  with pytest.raises(ValueError, match='num_'):
    arc.clipped_count(n, f)


@pytest.mark.parametrize('seed,f', [(0, 1), (1, 2), (2, 3), (3, 4)])
def test_exactly_the_k_largest_are_clipped_to_the_next_norm(seed, f):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(10, 6)) * rng.uniform(0.1, 10.0, size=(10, 1))
  norms = np.linalg.norm(points, axis=1)
  k = arc.clipped_count(10, f)
  order = np.argsort(norms)
  clipped = arc.adaptive_robust_clipping(points, f)
  clipped_norms = np.linalg.norm(clipped, axis=1)
  next_norm = norms[order[10 - k - 1]]
  # The k largest now have the (k+1)-th largest norm, in their own direction; the others are unchanged.
  np.testing.assert_allclose(clipped_norms[order[10 - k:]], next_norm)
  np.testing.assert_allclose(clipped[order[10 - k:]] / clipped_norms[order[10 - k:], None],
                             points[order[10 - k:]] / norms[order[10 - k:], None])
  np.testing.assert_array_equal(clipped[order[:10 - k]], points[order[:10 - k]])
  assert arc.threshold(norms, f) == next_norm


def test_the_three_point_example():
  """n = 3, f = 1: k = floor(2/3 * 2) = 1, so (7, 8, 9) is scaled to the norm of (4, 5, 6)."""
  points = np.array([[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]])
  expected = points.copy()
  expected[2] *= np.sqrt(16 + 25 + 36) / np.sqrt(49 + 64 + 81)
  np.testing.assert_allclose(arc.adaptive_robust_clipping(points, 1), expected)


def test_f_zero_is_the_identity():
  points = np.random.default_rng(4).normal(size=(7, 3))
  np.testing.assert_array_equal(arc.adaptive_robust_clipping(points, 0), points)


@pytest.mark.parametrize('n', [3, 7, 10, 25])
def test_the_upper_quantile_at_the_level_is_the_threshold(n):
  rng = np.random.default_rng(n)
  norms = rng.uniform(0.0, 5.0, size=n)
  for f in range((n + 1) // 2):
    level = arc.quantile_level(n, f)
    assert superquantile.weighted_quantile(norms, np.ones(n), level, end='upper') == arc.threshold(norms, f)
