"""`_quiet_secure_sum` drops only TensorFlow's report of the unused bounds assert that TFF's secure sums create."""

import logging

import pytest

import tff_robust  # pylint: disable=unused-import  (registers the filter)
from tff_robust import _quiet_secure_sum


def _report(op_name: str, kind: str = 'Operation') -> str:
  """The block `tf_should_use` logs for an unused object (TF 2.14's wording)."""
  return ('==================================\n'
          f"Object was never used (type <class 'tensorflow.python.framework.ops.{kind}'>):\n"
          f"<tf.Operation '{op_name}' type=Identity>\n"
          'If you want to mark it as used call its "mark_used()" method.\n'
          'It was originally created here:\n  File "check_ops.py", line 974, in assert_less_equal\n'
          '==================================')


def _passes(message: str) -> bool:
  record = logging.LogRecord('tensorflow', logging.ERROR, __file__, 1, message, None, None)
  return _quiet_secure_sum.UnusedBoundsAssertFilter().filter(record)


@pytest.mark.parametrize('name', ['assert_less_equal/Assert/AssertGuard/Identity',
                                  'assert_less_equal_1/Assert/AssertGuard/Identity',
                                  'assert_less_equal_12/Assert/AssertGuard/Identity'])
def test_the_unused_bounds_assert_is_dropped(name):
  assert not _passes(_report(name))


@pytest.mark.parametrize('message', [
    _report('assert_greater/Assert/AssertGuard/Identity'),          # another assert
    _report('scope/assert_less_equal/Assert/AssertGuard/Identity'),  # a scoped one: not TFF's top-level assert
    _report('assert_less_equal/Assert/AssertGuard/Identity', kind='Tensor'),
    'Object was never used (type <class \'tensorflow.python.framework.ops.Tensor\'>): <tf.Tensor ...>',
    'Failed to run the worker: assert_less_equal/Assert/AssertGuard/Identity',  # a real error naming the op
    'lower_bound must be smaller than upper_bound for secagg quantization',
])
def test_every_other_record_passes(message):
  assert _passes(message)


def test_importing_tff_robust_registers_the_filter_once_on_tensorflows_logger():
  _quiet_secure_sum.register()
  filters = logging.getLogger('tensorflow').filters
  assert sum(isinstance(f, _quiet_secure_sum.UnusedBoundsAssertFilter) for f in filters) == 1
