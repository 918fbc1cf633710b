"""Memory peaks, CPU time, busy overlap, CPU pinning and `perf` profiles of this process and of TFF workers,
read from Linux's /proc.

Used by `benchmarks.scaling`. The computations run in the TFF `worker_binary` subprocess (see
`tff_robust.runtime.execution_context`), so its memory and CPU are read from /proc/<worker pid>:
  - peak memory: `VmHWM` of /proc/<pid>/status, the resident set's high-water mark; writing "5" to
    /proc/<pid>/clear_refs resets it to the current resident set (Linux >= 4.0), so a peak can be taken over
    any stretch of work. But the worker keeps freed memory resident for reuse, so in a warm worker that peak
    only shows growth beyond what earlier work left behind: `benchmarks.scaling` takes peaks in fresh workers;
  - CPU time: user + system clock ticks of /proc/<pid>/stat, all threads;
  - where the worker's CPU goes: `perf record --call-graph dwarf -p <pid>` stacks (DWARF unwinding, because
    glibc's malloc has no frame pointers and its callers would be lost), each sample put in the first
    category whose pattern matches a frame of its stack.
"""

import dataclasses
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable, Optional, Sequence, Union

Pid = Union[int, str]  # a process id, or 'self'
_KIB = 1024


def _status_kib(pid: Pid, field: str) -> int:
  with open(f'/proc/{pid}/status') as status:
    for line in status:
      if line.startswith(field + ':'):
        return int(line.split()[1])
  raise RuntimeError(f'/proc/{pid}/status has no {field}')


def resident_bytes(pid: Pid) -> int:
  """The current resident set size (VmRSS) in bytes."""
  return _status_kib(pid, 'VmRSS') * _KIB


def peak_resident_bytes(pid: Pid) -> int:
  """The resident set's high-water mark (VmHWM) in bytes, since the process started or its last reset."""
  return _status_kib(pid, 'VmHWM') * _KIB


def reset_peak(pid: Pid) -> bool:
  """Resets VmHWM of `pid` to its current resident set; False where Linux does not allow it."""
  try:
    with open(f'/proc/{pid}/clear_refs', 'w') as clear_refs:
      clear_refs.write('5')
    return True
  except OSError:
    return False


def cpu_seconds(pid: Pid) -> float:
  """User + system CPU seconds of `pid`, all its threads (clock-tick resolution)."""
  if pid == 'self':
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
  try:
    with open(f'/proc/{pid}/stat') as stat:
      fields = stat.read().rsplit(')', 1)[1].split()  # the command name may contain spaces
  except FileNotFoundError:  # the process has exited (e.g. a worker killed for memory)
    return float('nan')
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


@dataclasses.dataclass(frozen=True)
class MemoryPeak:
  """Peak resident memory over a stretch of work, above the resident set at its start (bytes)."""

  start: int
  peak: int

  @property
  def increase(self) -> int:
    return max(self.peak - self.start, 0)


@dataclasses.dataclass(frozen=True)
class CallRecord:
  """Per call: wall seconds, and CPU seconds of this process and of the worker."""

  wall: list
  python_cpu: list
  worker_cpu: list


class CallRecorder:
  """Wraps a zero-argument call, recording its wall time and the CPU time of this process and of the worker.

  (No memory per call: the worker keeps freed memory resident, so a VmHWM reset before a call in a warm
  worker would only see the call's growth beyond what earlier calls left, not its peak.)
  """

  def __init__(self, call: Callable[[], object], worker_pid: int, on_done: Optional[Callable[[], object]] = None):
    self._call = call
    self._worker_pid = worker_pid
    self._on_done = on_done
    self.record = CallRecord([], [], [])

  def __call__(self):
    python, worker, start = cpu_seconds('self'), cpu_seconds(self._worker_pid), time.perf_counter()
    self._call()
    self.record.wall.append(time.perf_counter() - start)
    self.record.python_cpu.append(cpu_seconds('self') - python)
    self.record.worker_cpu.append(cpu_seconds(self._worker_pid) - worker)
    if self._on_done is not None:
      self._on_done()


# What the worker's CPU samples are doing: the first pattern matching a frame of a sample's stack wins.
PERF_CATEGORIES = (
    ('tf.data: rebuilding each client dataset from its serialised graph, rewriting and finalising it',
     r'DatasetFromGraph|FinalizeDataset|RewriteDataset|DatasetToGraph'),
    ('TF: instantiating function graphs (Grappler, oneDNN rewrite, partitioning, executors, kernels) and '
     'releasing them', r'Instantiate|OptimizeFunctionGraph|GetOrCreateExecutors|CreateGraphs|NewLocalExecutor|'
     r'NewExecutor|CreateKernel|CreateOpKernel|MetaOptimizer|OptimizationPassRegistry|PartitionFunctionGraph|'
     r'GraphConstructor|ImportGraphDef|ConvertGraphDefToGraph|ReleaseHandle|~FunctionHandleCache|~ExecutorImpl'),
    ('thread wake-ups and context switches (kernel scheduler)', r'finish_task_switch|__schedule|futex_'),
    ('TF: executing the graphs (kernels incl. the training math, executor scheduling, dataset iteration)',
     r'OpKernel|ExecutorState|IteratorGetNext|ReduceDataset|Eigen::'),
    ('TFF executor stack (value bookkeeping, federated intrinsics)', r'tensorflow_federated'),
    ('gRPC and protobuf', r'grpc::|grpc_|google::protobuf'),
    ('malloc/free and page faults not attributed to a caller above',
     r'malloc|free|_int_|consolidate|unlink_chunk|mmap|munmap|page_fault|mprotect|brk'),
)


def perf_available() -> bool:
  return shutil.which('perf') is not None


@dataclasses.dataclass(frozen=True)
class PerfProfile:
  """Fractions of a process's CPU samples per category, in the order of the categories given."""

  samples: int
  frequency: int
  fractions: dict  # category label -> fraction of the samples

  @property
  def cpu_seconds(self) -> float:
    return self.samples / self.frequency


def perf_profile(pid: int, work: Callable[[], object], categories: Sequence[tuple], *,
                 frequency: int = 99) -> PerfProfile:
  """Samples `pid`'s stacks with `perf record` while `work` runs and sorts them into `categories`.

  Args:
    pid: the process to sample (all its threads).
    work: what to run while sampling.
    categories: (label, regular expression) pairs; a sample goes to the first whose pattern matches any
      function name on its stack, or to 'other'.
    frequency: samples per second per CPU.

  Raises:
    RuntimeError: if perf fails (not installed, or not permitted by kernel.perf_event_paranoid).
  """
  directory = tempfile.mkdtemp(prefix='scaling_perf_')
  data = os.path.join(directory, 'perf.data')
  try:
    recorder = subprocess.Popen(
        ['perf', 'record', '-q', '-F', str(frequency), '--call-graph', 'dwarf,16384', '-o', data, '-p', str(pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # perf attaches asynchronously
    if recorder.poll() is not None:
      raise RuntimeError(f'perf record exited: {recorder.stderr.read().decode(errors="replace")[-500:]}')
    try:
      work()
    finally:
      recorder.send_signal(signal.SIGINT)
      recorder.wait()
    # --no-inline: resolving inlined frames runs addr2line over the 300 MB worker binary (minutes).
    script = subprocess.run(['perf', 'script', '--no-inline', '-i', data, '-F', 'comm,ip,sym'],
                            capture_output=True, text=True, check=True)
  finally:
    shutil.rmtree(directory, ignore_errors=True)
  samples, fractions = _categorise(script.stdout, categories)
  return PerfProfile(samples, frequency, fractions)


def _categorise(script_output: str, categories: Sequence[tuple]) -> tuple:
  """(number of samples, {label: fraction}) from `perf script` output: one stack per blank-line block."""
  patterns = [(label, re.compile(pattern)) for label, pattern in categories]
  counts = {label: 0 for label, _ in categories}
  counts['other'] = 0
  samples = 0
  for block in script_output.split('\n\n'):
    lines = block.strip().split('\n')
    if not lines[0]:
      continue
    stack = '\n'.join(lines[1:])  # lines[0] is the thread name
    samples += 1
    label = next((label for label, pattern in patterns if pattern.search(stack)), 'other')
    counts[label] += 1
  return samples, {label: count / max(samples, 1) for label, count in counts.items()}


def pin_to_cores(pid: int, cores: set) -> None:
  """Restricts every thread of `pid` to `cores` (what `taskset -a -p` does); threads it starts later inherit it."""
  for thread in os.listdir(f'/proc/{pid}/task'):
    os.sched_setaffinity(int(thread), cores)


class BusyOverlap:
  """Samples the CPU time of several processes every `interval` seconds while it is entered (a `with` block).

  A process is busy in a sample when its CPU time (clock ticks of /proc/<pid>/stat) grew since the previous
  sample. `both_busy` / `any_busy` counts the samples in which every process was busy / at least one was, so
  `overlap = both_busy / any_busy` is the fraction of the busy time during which all ran at once: near 0 for
  processes that take turns, near 1 for processes that run in parallel all along.
  """

  def __init__(self, pids: Sequence[int], interval: float = 0.02):
    self._pids = list(pids)
    self._interval = interval
    self.both_busy = 0
    self.any_busy = 0
    self._stop = None
    self._thread = None

  def _sample(self) -> None:
    previous = [cpu_seconds(pid) for pid in self._pids]
    while not self._stop.wait(self._interval):
      current = [cpu_seconds(pid) for pid in self._pids]
      busy = [now > before for now, before in zip(current, previous)]
      self.both_busy += all(busy)
      self.any_busy += any(busy)
      previous = current

  def __enter__(self):
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._sample, daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc_info):
    self._stop.set()
    self._thread.join()

  @property
  def overlap(self) -> float:
    return self.both_busy / self.any_busy if self.any_busy else float('nan')
