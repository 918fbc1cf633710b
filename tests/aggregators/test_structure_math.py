"""Structure helpers against NumPy, including scales where naive squares overflow or underflow."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.aggregators import structure_math


@pytest.mark.parametrize('scale', [1e-30, 1e-12, 1.0, 1e12, 1e30])
def test_global_norm_matches_numpy_at_every_scale(scale):
  rng = np.random.default_rng(0)
  parts = [rng.normal(size=(4, 3)) * scale, rng.normal(size=5) * scale]
  structure = [tf.constant(p, tf.float32) for p in parts]
  expected = np.linalg.norm(np.concatenate([p.ravel() for p in parts]).astype(np.float64))
  np.testing.assert_allclose(structure_math.global_l2_norm(structure).numpy(), expected, rtol=1e-5)


def test_global_norm_of_zeros_is_zero_and_float64_is_kept():
  assert structure_math.global_l2_norm([tf.zeros([3]), tf.zeros([2, 2])]).numpy() == 0.0
  norm = structure_math.global_l2_norm([tf.constant([3.0, 4.0], tf.float64)])
  assert norm.dtype == tf.float64 and norm.numpy() == 5.0


def test_all_finite_and_zeros_where():
  finite = [tf.constant([1.0, 2.0]), tf.constant(3.0)]
  assert structure_math.all_finite(finite).numpy()
  assert not structure_math.all_finite([tf.constant([1.0, np.nan]), tf.constant(3.0)]).numpy()
  zeroed = structure_math.zeros_where(tf.constant(True), finite)
  assert [z.numpy().tolist() for z in zeroed] == [[0.0, 0.0], 0.0]
  kept = structure_math.zeros_where(tf.constant(False), finite)
  assert [k.numpy().tolist() for k in kept] == [[1.0, 2.0], 3.0]
