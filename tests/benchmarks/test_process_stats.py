"""`process_stats.BusyOverlap` and `pin_to_cores` on processes whose CPU use is known: busy loops and sleepers."""

import os
import subprocess
import sys
import time

import pytest

from benchmarks import process_stats

_BUSY_LOOP = [sys.executable, '-c', 'import time\nend = time.time() + 30\nwhile time.time() < end: pass']


@pytest.fixture
def started():
  """Yields a function starting a command; kills what it started."""
  processes = []

  def start(command):
    processes.append(subprocess.Popen(command))
    return processes[-1].pid

  yield start
  for process in processes:
    process.kill()
    process.wait()


def test_a_busy_process_beside_a_sleeping_one_never_overlaps(started):
  busy, sleeping = started(_BUSY_LOOP), started(['sleep', '30'])
  time.sleep(0.3)
  with process_stats.BusyOverlap([busy, sleeping], interval=0.1) as overlap:
    time.sleep(1.0)
  assert overlap.any_busy >= 5 and overlap.both_busy == 0 and overlap.overlap == 0.0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason='needs two cores')
def test_two_busy_processes_on_their_own_cores_overlap_and_stay_pinned(started):
  cores = sorted(os.sched_getaffinity(0))[:2]
  pids = [started(_BUSY_LOOP) for _ in cores]
  for pid, core in zip(pids, cores):
    process_stats.pin_to_cores(pid, {core})
  with process_stats.BusyOverlap(pids, interval=0.2) as overlap:  # long samples: the machine may be loaded
    time.sleep(1.5)
  assert [os.sched_getaffinity(pid) for pid in pids] == [{core} for core in cores]
  assert overlap.overlap > 0.5, (overlap.both_busy, overlap.any_busy)
