"""Two fresh local TFF workers behind the composing context, for the tests of sharded execution."""

import contextlib

import tensorflow_federated as tff

from tff_robust.runtime import execution_context


@contextlib.contextmanager
def two_worker_context():
  """Yields the context over two fresh local workers (`set_remote_execution_context`), not installed: the
  session's context stays current. Stops both workers after and checks that they stopped."""
  previous = tff.framework.get_context_stack().current
  workers = [execution_context.LocalWorker() for _ in range(2)]
  try:
    execution_context.set_remote_execution_context([worker.address for worker in workers])
    context = tff.framework.get_context_stack().current
    tff.framework.set_default_context(previous)
    yield context
  finally:
    tff.framework.set_default_context(previous)
    for worker in workers:
      worker.stop()
      assert not worker.is_running(), 'a worker outlived the test'
