"""TFF C++ execution contexts: on a `worker_binary` this process owns and always stops, or on remote workers.

`tff.backends.native.set_sync_local_cpp_execution_context()` (installed when TFF is imported) starts a
`worker_binary` that inherits stdout/stderr and is stopped only from a `__del__` that fails at interpreter
shutdown, so the worker outlives Python and keeps pipes open (a CI job hangs on it). This module starts the
same binary itself, sends its output to a log file, stops it at exit (`atexit`) and, through
`worker_launcher`, makes the kernel kill it if this process dies any other way.

The context compiles secure-sum intrinsics to their insecure bodies (`tff.backends.test`), so aggregators
built on `tff.aggregators.SecureSumFactory` run in simulation with the same clipping and quantisation as in
deployment.

Remote execution (`set_remote_execution_context`) uses TFF's own runtime pieces: one address runs every
computation on that executor service (`tff.framework.RemoteExecutor` over gRPC); several addresses shard each
round's cohort over them with TFF's `tff.framework.MergeableCompExecutionContext`, which splits a computation
at its aggregation, runs the client-side part of each shard on its own worker and merges the partial
aggregates. TFF can split only a computation whose aggregations do not depend on one another
(`check_shardable`): FedAvg and the gather-based baselines qualify; the robust aggregators that are a
sequence of secure averages (RFA's Weiszfeld passes, Delta-FL's quantile, Fed+'s delta-medians) do not.
Start a worker with `python -m tff_robust.simulation.worker_service --port=PORT`.
"""

import atexit
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence

import grpc
import portpicker
import tensorflow_federated as tff
from tensorflow_federated.python.core.backends.native import mergeable_comp_compiler

_GRPC_CHANNEL_OPTIONS = [
    ('grpc.max_send_message_length', 2 * 1000 * 1000 * 1000),
    ('grpc.max_receive_message_length', 2 * 1000 * 1000 * 1000),
]
_WORKER_START_TIMEOUT_SECONDS = 60.0
_WORKER_STOP_TIMEOUT_SECONDS = 10.0


def worker_binary_path() -> str:
  """Path of the C++ executor service binary shipped in the TFF wheel."""
  path = os.path.join(os.path.dirname(tff.__file__), 'data', 'worker_binary')
  if not os.path.isfile(path):
    raise RuntimeError(f'TFF worker binary not found at {path}; is tensorflow-federated installed?')
  return path


class LocalWorker:
  """A `worker_binary` subprocess on a loopback port, stopped by `stop()`, at exit, or with its parent."""

  def __init__(self, *, max_concurrent_computation_calls: int = -1, visible_gpus: Optional[str] = None):
    """`visible_gpus`: the worker's CUDA_VISIBLE_DEVICES (None: inherited; see `gpu_placement`)."""
    self.port = portpicker.pick_unused_port()
    self.log_path = os.path.join(tempfile.gettempdir(), f'tff_robust_worker_{os.getpid()}_{self.port}.log')
    self._log_file = open(self.log_path, 'wb')
    self._process: Optional[subprocess.Popen] = subprocess.Popen(
        [
            sys.executable, '-m', 'tff_robust.simulation.worker_launcher', str(os.getpid()),
            worker_binary_path(), f'--port={self.port}',
            f'--max_concurrent_computation_calls={max_concurrent_computation_calls}',
        ],
        stdin=subprocess.DEVNULL,
        stdout=self._log_file,
        stderr=subprocess.STDOUT,
        close_fds=True,
        env=_environment_with_visible_gpus(visible_gpus),
    )
    atexit.register(self.stop)

  @property
  def address(self) -> str:
    return f'localhost:{self.port}'

  @property
  def pid(self) -> Optional[int]:
    return None if self._process is None else self._process.pid

  def is_running(self) -> bool:
    return self._process is not None and self._process.poll() is None

  def check_running(self) -> None:
    if not self.is_running():
      with open(self.log_path, 'rb') as log:
        tail = log.read()[-2000:].decode(errors='replace')
      raise RuntimeError(f'TFF worker_binary on port {self.port} exited; its log ends with:\n{tail}')

  def stop(self) -> None:
    """Stops the worker (SIGINT, then SIGKILL after a grace period). Safe to call more than once."""
    if self._process is None:
      return
    if self._process.poll() is None:
      self._process.terminate()
      try:
        self._process.wait(timeout=_WORKER_STOP_TIMEOUT_SECONDS)
      except subprocess.TimeoutExpired:
        self._process.kill()
        self._process.wait()
    self._process = None
    self._log_file.close()
    atexit.unregister(self.stop)


def _environment_with_visible_gpus(visible_gpus: Optional[str]) -> dict[str, str]:
  environment = dict(os.environ)
  if visible_gpus is not None:
    environment['CUDA_VISIBLE_DEVICES'] = visible_gpus
  return environment


def _wait_until_ready(stub, worker: Optional[LocalWorker], address: str) -> None:
  deadline = time.monotonic() + _WORKER_START_TIMEOUT_SECONDS
  while not stub.is_ready:
    if worker is not None:
      worker.check_running()
    if time.monotonic() > deadline:
      raise TimeoutError(f'TFF executor service at {address} not ready after {_WORKER_START_TIMEOUT_SECONDS}s')
    time.sleep(0.05)


def _compile_for_simulation(computation):
  computation = tff.backends.test.replace_secure_intrinsics_with_bodies(computation)
  return tff.backends.native.desugar_and_transform_to_native(computation)


def _executor_factory(stub, default_num_clients: int) -> tff.framework.ResourceManagingExecutorFactory:
  def executor_stack_fn(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:
      cardinalities[tff.CLIENTS] = default_num_clients
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  return tff.framework.ResourceManagingExecutorFactory(executor_stack_fn)


def _make_context(stub, default_num_clients: int) -> tff.framework.SyncExecutionContext:
  return tff.framework.SyncExecutionContext(
      executor_fn=_executor_factory(stub, default_num_clients),
      compiler_fn=_compile_for_simulation,
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  )


def _compile_to_shards(computation) -> tff.framework.MergeableCompForm:
  return mergeable_comp_compiler.compile_to_mergeable_comp_form(
      tff.backends.test.replace_secure_intrinsics_with_bodies(computation)
  )


class _ShardingContext(tff.framework.MergeableCompExecutionContext):
  """TFF's mergeable-computation context, returning results in the computation's own Python containers.

  Compilation to `MergeableCompForm` drops the Python containers of the result type (a `LearningProcessOutput`
  comes back as an `OrderedDict`); they are restored from the original computation's type signature.
  """

  def invoke(self, comp, arg=None):
    result = tff.structure.from_container(super().invoke(comp, arg), recursive=True)
    return tff.types.type_to_py_container(result, comp.type_signature.result)


def check_shardable(computation, description: str) -> None:
  """Raises ValueError, naming `description`, if TFF cannot shard `computation` over several workers."""
  try:
    _compile_to_shards(computation)
  except ValueError as error:
    raise ValueError(
        f'{description} cannot be sharded over several TFF workers: TFF splits a computation only at '
        'aggregations that do not depend on one another, and this one has dependent aggregations '
        f'({str(error)[:80]}...). Give a single --tff_worker_address.'
    ) from None


def _ready_stub(address: str):
  stub = tff.framework.RemoteExecutorGrpcStub(grpc.insecure_channel(address, _GRPC_CHANNEL_OPTIONS))
  _wait_until_ready(stub, None, address)
  return stub


def set_remote_execution_context(addresses: Sequence[str], *, default_num_clients: int = 0) -> None:
  """Runs every TFF computation on the executor services at `addresses` (`host:port`, already started).

  One address: the computations run there unchanged. Several: each invocation's clients are split into
  `len(addresses)` shards, one per worker (TFF's `MergeableCompExecutionContext`); only computations that
  pass `check_shardable` can run.
  """
  if not addresses:
    raise ValueError('addresses must name at least one TFF worker (host:port)')
  stubs = [_ready_stub(address) for address in addresses]
  if len(stubs) == 1:
    tff.framework.set_default_context(_make_context(stubs[0], default_num_clients))
    return
  shard_contexts = [
      tff.framework.AsyncExecutionContext(
          executor_fn=_executor_factory(stub, default_num_clients),
          compiler_fn=_compile_for_simulation,
          transform_args=tff.tensorflow.transform_args,
          transform_result=tff.tensorflow.transform_result,
      )
      for stub in stubs
  ]
  tff.framework.set_default_context(_ShardingContext(
      shard_contexts, compiler_fn=_compile_to_shards, transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  ))


_local_worker: Optional[LocalWorker] = None


def set_local_execution_context(
    *, default_num_clients: int = 0, max_concurrent_computation_calls: int = -1, visible_gpus: Optional[str] = None
) -> LocalWorker:
  """Installs (once per process) a C++ execution context backed by a worker this process owns.

  Args:
    default_num_clients: number of clients assumed when a computation's arguments do not determine it.
    max_concurrent_computation_calls: the worker's limit on parallel calls of one computation (e.g. client
      training); non-positive means none. TFF's remedy for running out of GPU memory.
    visible_gpus: the worker's CUDA_VISIBLE_DEVICES (`gpu_placement.visible_gpus_setting`); None inherits.

  Returns:
    The `LocalWorker`; call `stop_local_execution_context()` (or let the process exit) to stop it.
  """
  global _local_worker
  if _local_worker is None or not _local_worker.is_running():
    worker = LocalWorker(
        max_concurrent_computation_calls=max_concurrent_computation_calls, visible_gpus=visible_gpus
    )
    stub = tff.framework.RemoteExecutorGrpcStub(grpc.insecure_channel(worker.address, _GRPC_CHANNEL_OPTIONS))
    try:
      _wait_until_ready(stub, worker, worker.address)
    except BaseException:
      worker.stop()
      raise
    tff.framework.set_default_context(_make_context(stub, default_num_clients))
    _local_worker = worker
  return _local_worker


def stop_local_execution_context() -> None:
  """Stops the worker started by `set_local_execution_context`; a later call starts a new one."""
  global _local_worker
  if _local_worker is not None:
    _local_worker.stop()
    _local_worker = None
