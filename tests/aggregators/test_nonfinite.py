"""The shared leave-out rule for non-finite client values, case by case."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.aggregators import nonfinite

_VALUE = [tf.constant([1.0, -2.0]), tf.constant(3.0)]


def test_finite_value_and_weight_pass_unchanged():
  value, weight, left_out = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(4.0))
  assert not left_out.numpy()
  assert [v.numpy().tolist() for v in value] == [[1.0, -2.0], 3.0]
  assert weight.numpy() == 4.0


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_nonfinite_value_is_zeroed_and_weighted_zero(bad):
  value, weight, left_out = nonfinite.leave_out_if_nonfinite(
      [tf.constant([1.0, bad]), tf.constant(3.0)], tf.constant(4.0)
  )
  assert left_out.numpy()
  assert [v.numpy().tolist() for v in value] == [[0.0, 0.0], 0.0]
  assert weight.numpy() == 0.0


def test_nonfinite_weight_leaves_the_client_out():
  value, weight, left_out = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(np.inf))
  assert left_out.numpy() and weight.numpy() == 0.0
  assert [v.numpy().tolist() for v in value] == [[0.0, 0.0], 0.0]


def test_also_checked_floats_count_and_integers_are_skipped():
  with_int_state = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(1.0), [tf.constant(7), tf.constant(0.5)])
  assert not with_int_state[2].numpy()
  with_nan_state = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(1.0), [tf.constant(7), tf.constant(np.nan)])
  assert with_nan_state[2].numpy() and with_nan_state[1].numpy() == 0.0


@pytest.mark.parametrize('weight', [-1e-30, -4.0, -np.inf])
def test_negative_weight_leaves_the_client_out(weight):
  value, kept_weight, left_out = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(weight))
  assert left_out.numpy() and kept_weight.numpy() == 0.0
  assert [v.numpy().tolist() for v in value] == [[0.0, 0.0], 0.0]


def test_zero_weight_is_not_left_out():
  value, weight, left_out = nonfinite.leave_out_if_nonfinite(_VALUE, tf.constant(0.0))
  assert not left_out.numpy() and weight.numpy() == 0.0
  assert [v.numpy().tolist() for v in value] == [[1.0, -2.0], 3.0]
