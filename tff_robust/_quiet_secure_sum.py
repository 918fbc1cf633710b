"""Drops one false alarm of TensorFlow's logger that TFF's secure sums raise: an unused bounds assert.

`tff.aggregators.SecureSumFactory` quantises each client value in `primitives._client_tensor_shift_for_secure_sum`
(TFF 0.87), which creates `tf.debugging.assert_less_equal(lower_bound, upper_bound)` in a traced graph and never
uses it. When that graph is collected, TensorFlow's `tf_should_use` logs, at ERROR level, a 12-line block
"Object was never used (type <class '...Operation'>): <tf.Operation 'assert_less_equal/Assert/AssertGuard/Identity'
type=Identity>" per traced secure sum: about 120 lines for one round of `build_weighted_fed_avg` with the
`recommended_secure` preset. An op that is never used never runs, so the block reports no error; TFF's own
bounds are checked where the factory is built. `import tff_robust` adds `UnusedBoundsAssertFilter` to the
'tensorflow' logger: it drops exactly those records, an unused top-level `assert_less_equal` Identity op, and
passes every other record (other unused objects, other asserts, every other ERROR) unchanged. The one case it also
hides: a user's own unused top-level `tf.debugging.assert_less_equal` in a traced graph, which likewise never runs.
Imports no TensorFlow.
"""

import logging
import re

_UNUSED_BOUNDS_ASSERT = re.compile(
    r"Object was never used \(type <class '[\w.]*Operation'>\):\s*"
    r"<tf\.Operation 'assert_less_equal(?:_\d+)?/Assert/AssertGuard/Identity' type=Identity>"
)


class UnusedBoundsAssertFilter(logging.Filter):
  """Drops `tf_should_use`'s report of an unused top-level `assert_less_equal` op; passes every other record."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not _UNUSED_BOUNDS_ASSERT.search(record.getMessage())


def register() -> None:
  """Adds the filter to the 'tensorflow' logger, once however often it is called."""
  logger = logging.getLogger('tensorflow')
  if not any(isinstance(existing, UnusedBoundsAssertFilter) for existing in logger.filters):
    logger.addFilter(UnusedBoundsAssertFilter())
