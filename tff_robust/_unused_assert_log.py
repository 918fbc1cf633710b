"""Silences one TensorFlow log message that TFF's secure sum causes and nobody can act on.

TFF 0.87's `secure_quantized_sum` (`tensorflow_federated/python/aggregators/primitives.py`, used by every
`tff.aggregators.SecureSumFactory` with float bounds) calls `tf.debugging.assert_less_equal(lower_bound,
upper_bound, ...)` and drops the result. Traced in graph mode, TensorFlow's `tf_should_use` wrapper then logs, when
the unused op is collected, 20 lines at ERROR level: "Object was never used (type <class '...Operation'>):
<tf.Operation 'assert_less_equal/Assert/AssertGuard/Identity' type=Identity> ...". A process with a secure defence
(`defences.build_factory(..., secure_bounds=...)` in TFF's `build_weighted_fed_avg`) printed ten such blocks, about
120 lines, although nothing is wrong: the bounds are constants that satisfy the assert.

`register()` (called by `import tff_robust`) adds a filter to the `tensorflow` logger that drops exactly those
records: an ERROR whose message is `tf_should_use`'s "Object was never used" report of an op named
`assert_less_equal[_N]/Assert/AssertGuard/Identity` (outside any name scope, as TFF creates it; so the asserts
that `assert_non_negative` and its kind build inside their own scope are still reported). Every other message, and
every other unused object, is still logged. The filter cannot see where the op was created (the report carries
only TensorFlow's own frames), so an unused, unnamed `assert_less_equal` of the user's own graph-mode code outside
any name scope is silenced too. Imports nothing.
"""

import logging
import re

_UNUSED_ASSERT = re.compile(
    r"\AObject was never used \(type <class '[\w.]+Operation'>\):\n"
    r"<tf\.Operation 'assert_less_equal(?:_\d+)?/Assert/AssertGuard/Identity' type=Identity>\n"
)
_BANNER = '==================================\n'


def is_unused_assert_report(record: logging.LogRecord) -> bool:
  """Whether `record` is `tf_should_use`'s ERROR report of an unused `assert_less_equal` op (module docstring)."""
  if record.levelno != logging.ERROR:
    return False
  message = record.getMessage()
  return message.startswith(_BANNER) and bool(_UNUSED_ASSERT.match(message[len(_BANNER):]))


class _DropUnusedAssertReports(logging.Filter):

  def filter(self, record: logging.LogRecord) -> bool:
    return not is_unused_assert_report(record)


def register() -> None:
  """Adds the filter to the `tensorflow` logger, once (TensorFlow's `tf_logging` logs through that logger)."""
  logger = logging.getLogger('tensorflow')
  if not any(isinstance(f, _DropUnusedAssertReports) for f in logger.filters):
    logger.addFilter(_DropUnusedAssertReports())
