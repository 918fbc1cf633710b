"""One line and exit status 4, not a traceback, when a sweep's or table's TFF worker dies or becomes unreachable.

`experiments.train` reports a dead worker itself (`train_program.run`); the sweep and table binaries wrap their
absl `main` in `reports_worker_exit`, so a worker that is killed (SIGKILL, the out-of-memory killer) ends them the
same way: `error: <what happened, and the worker's log>. <how to resume>` on stderr, status
`exit_statuses.WORKER_EXITED`.
"""

import functools
import sys
from typing import Callable

from experiments import exit_statuses
from tff_robust.runtime import composing_context
from tff_robust.runtime import execution_context


def reports_worker_exit(resume_hint: str) -> Callable[[Callable], Callable]:
  """Decorates an absl `main(argv)`: a lost worker (`composing_context.WorkerUnavailable`, of which the own
  worker's `WorkerExited` is a kind) becomes one line ending in `resume_hint` and exit status 4.

  Whatever `main` ends with, the local execution context (and the worker it owns) is stopped.
  """

  def decorate(main: Callable) -> Callable:

    @functools.wraps(main)
    def main_reporting_worker_exit(argv):
      try:
        return main(argv)
      except composing_context.WorkerUnavailable as error:
        print(f'error: {error}. {resume_hint}', file=sys.stderr)
        return exit_statuses.WORKER_EXITED
      finally:
        execution_context.stop_local_execution_context()

    return main_reporting_worker_exit

  return decorate
