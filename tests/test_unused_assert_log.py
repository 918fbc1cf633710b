"""`import tff_robust` drops TensorFlow's "Object was never used" report of an unused `assert_less_equal` (what TFF's
secure sum leaves behind), and no other message (`tff_robust._unused_assert_log`)."""

import gc
import logging

import tensorflow as tf

import tff_robust  # pylint: disable=unused-import  (registers the filter)
from tff_robust import _unused_assert_log


class _Records(logging.Handler):

  def __init__(self):
    super().__init__()
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


def _reports_of_unused_ops(make_ops) -> list[str]:
  """The `tensorflow` logger's messages after `make_ops` built ops in a TF1 graph that nobody uses."""
  handler = _Records()
  logger = logging.getLogger('tensorflow')
  logger.addHandler(handler)
  try:
    with tf.Graph().as_default():
      make_ops()
    gc.collect()
  finally:
    logger.removeHandler(handler)
  return [m for m in handler.messages if 'Object was never used' in m]


def test_the_unused_assert_of_tffs_secure_sum_is_not_logged():
  assert _reports_of_unused_ops(lambda: tf.debugging.assert_less_equal(0.0, 1.0, message='bounds')) == []


def test_other_unused_ops_are_still_reported():
  def make_ops():
    value = tf.compat.v1.placeholder(tf.float32)  # not a constant, so that TensorFlow cannot decide the asserts
    tf.debugging.assert_less_equal(value, 1.0, name='my_check')
    tf.debugging.assert_non_negative(value)  # an assert_less_equal inside its own scope

  reports = _reports_of_unused_ops(make_ops)
  assert len(reports) == 2
  assert any("'my_check/" in r for r in reports) and any("'assert_non_negative/" in r for r in reports)


def test_only_error_records_of_that_shape_match():
  message = ("==================================\nObject was never used (type <class 'tensorflow.python.framework.ops."
             "Operation'>):\n<tf.Operation 'assert_less_equal_2/Assert/AssertGuard/Identity' type=Identity>\n...")
  record = lambda level, text: logging.LogRecord('tensorflow', level, __file__, 1, text, None, None)
  assert _unused_assert_log.is_unused_assert_report(record(logging.ERROR, message))
  assert not _unused_assert_log.is_unused_assert_report(record(logging.WARNING, message))
  assert not _unused_assert_log.is_unused_assert_report(record(logging.ERROR, message.replace('less_equal', 'equal')))
  assert not _unused_assert_log.is_unused_assert_report(record(logging.ERROR, message.replace("'assert", "'outer/assert")))
  assert not _unused_assert_log.is_unused_assert_report(record(logging.ERROR, 'Object was never used'))
