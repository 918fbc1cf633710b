"""Builds the next round's client data on a background thread while the current round trains.

A round's client data (each cohort client's dataset, `client_pipelines.cohort_client_data`) is built on the
driver: NumPy and tf.data work during which TFF's worker would otherwise idle (0.10-0.12 of a 50-role
Shakespeare round, `benchmarks.shakespeare_round_cost`). Started for round t + 1 as round t's `process.next` is
called, it overlaps the worker's training instead.

The data is the same as built in the foreground: a build is a function of the round number and the cohort alone
(the cohort is drawn by the caller, in round order, before the build starts), builds run one at a time in round
order, and the shuffles they create take explicit seeds (`tf.data` seeds do not depend on the thread).
"""

import concurrent.futures
from typing import Callable, Optional, Sequence


class RoundDataPrefetcher:
  """`get(round_num, cohort)` returns `build(round_num, cohort)`, from a background build if `start` began it.

  At most one build is pending. An exception raised by a background build is raised by the `get` that asks for
  its round (never earlier), so a failing round-t+1 build cannot end round t. Use as a context manager (or call
  `close`): a build no round asked for is discarded when it ends.
  """

  def __init__(self, build: Callable[[int, Sequence[str]], list]):
    self._build = build
    self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix='round-data')
    self._pending: Optional[tuple[int, tuple, concurrent.futures.Future]] = None

  def start(self, round_num: int, cohort: Sequence[str]) -> None:
    """Begins building round `round_num`'s data for `cohort` in the background (replacing a pending build)."""
    self.wait()
    self._pending = (round_num, tuple(cohort), self._executor.submit(self._build, round_num, list(cohort)))

  def get(self, round_num: int, cohort: Sequence[str]) -> list:
    """Round `round_num`'s client data for `cohort`: the pending build's if it is for them, else built now."""
    pending, self._pending = self._pending, None
    if pending is not None and pending[:2] == (round_num, tuple(cohort)):
      return pending[2].result()
    if pending is not None:
      concurrent.futures.wait([pending[2]])
    return self._build(round_num, list(cohort))

  def wait(self) -> None:
    """Blocks until the pending build (if any) has ended; it stays available to `get`."""
    if self._pending is not None:
      concurrent.futures.wait([self._pending[2]])

  def close(self) -> None:
    """Waits for a running build and drops it; later calls to `start` fail."""
    self._pending = None
    self._executor.shutdown(wait=True, cancel_futures=True)

  def __enter__(self) -> 'RoundDataPrefetcher':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()
