"""TFF C++ execution contexts: on a `worker_binary` this process owns and always stops, or on remote workers.

`tff.backends.native.set_sync_local_cpp_execution_context()` (installed when TFF is imported) starts a
`worker_binary` that inherits stdout/stderr and is stopped only from a `__del__` that fails at interpreter
shutdown, so the worker outlives Python and keeps pipes open (a CI job hangs on it). This module starts the
same binary itself, sends its output to a log file, stops it at exit (`atexit`) and, through
`worker_launcher`, makes the kernel kill it if this process dies any other way. The binary listens on every
network interface and runs whatever it is sent, unauthenticated; by default this module starts it in a
private network namespace that other hosts cannot reach (`LocalWorker`, `network_isolation`).

The context compiles secure-sum intrinsics to their insecure bodies (`simulation_compiler`, as `tff.backends.test`
does), so aggregators built on `tff.aggregators.SecureSumFactory` run in simulation with the same clipping and
quantisation as in deployment.

Remote execution (`set_remote_execution_context`) runs every computation over the executor services at one
or more addresses (`tff.framework.RemoteExecutor` over gRPC) with `composing_context.ComposingContext`: the
cohort is split into one shard per worker, client values stay on their worker, and each aggregation pass
(RFA's Weiszfeld passes, Delta-FL's quantile passes, Fed+'s medians included) runs on every worker at once
and is merged on the first. Start a worker with `python -m tff_robust.runtime.worker_service --port=PORT` (this host
only, or other hosts through an SSH tunnel), or with its `--tls_*` flags and `credentials_dir` here for mutual TLS
(`worker_channels`: gRPC's own TLS; a worker whose certificate does not verify is refused at once).

A worker that dies. TFF retries a computation whose gRPC call fails as UNAVAILABLE without limit (its
`AsyncExecutionContext.invoke`, backing off to 30 s between attempts), so a run whose worker has died would wait
forever. For the worker this module owns, every gRPC call passes `_WorkerExitInterceptor`: a call that fails after
the worker has exited raises `WorkerExited`, which TFF does not retry, so the computation fails within
milliseconds. On remote workers, given by address, a call that finds its worker unreachable raises
`composing_context.WorkerUnavailable` (of which `WorkerExited` is a kind) naming the address; the runner's
checkpoints resume the run once the worker is back.

Why one module of ~500 lines: the local worker's life (start, readiness, exit detection, stop at exit), the contexts
built on it and the remote contexts share one piece of state, the installed context and its worker
(`_local_worker`, `_context_installed`), which every entry point reads and `discard_tff_default_context` must see;
the launcher, channels, TLS and composing pieces already live in modules of their own.
"""

import atexit
import functools
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence
import warnings

import grpc
import portpicker
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.context_stack import set_default_context as tff_default_context

from tff_robust.runtime import composing_context
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import simulation_compiler
from tff_robust.runtime import worker_binaries
from tff_robust.runtime import worker_channels
from tff_robust.runtime import worker_launcher
from tff_robust.runtime import worker_tls

_WORKER_START_TIMEOUT_SECONDS = 60.0
_WORKER_STOP_TIMEOUT_SECONDS = 10.0
# Where TFF 0.87 defines the worker manager of its import-time context (`local_cpp_executor_factory`).
_TFF_SERVICE_MANAGER_MODULE = 'tensorflow_federated.python.core.impl.executor_stacks.executor_factory'

_UNIX_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


class WorkerExited(composing_context.WorkerUnavailable):
  """The `worker_binary` this process started exited while a computation ran on it; the message says how."""


class NetworkIsolationError(RuntimeError):
  """A worker was asked to run without network exposure (`network_isolation='required'`) and cannot."""


class ExposedWorkerWarning(UserWarning):
  """A local worker listens on every network interface: anyone who can reach its port can run code."""


class PlaintextWorkerWarning(UserWarning):
  """The driver dials a worker off this host without TLS: the network path can read and alter the computation."""


NETWORK_ISOLATION_ENVIRONMENT_VARIABLE = 'TFF_ROBUST_NETWORK_ISOLATION'
_NETWORK_ISOLATION_MODES = {
    'auto': worker_launcher.ISOLATE_OR_EXPOSE,
    'required': worker_launcher.ISOLATE,
    'off': worker_launcher.EXPOSE,
}
_exposure_warned = False


def _launcher_network_mode(network_isolation: Optional[str]) -> str:
  if network_isolation is None:
    network_isolation = os.environ.get(NETWORK_ISOLATION_ENVIRONMENT_VARIABLE) or 'auto'
  if network_isolation not in _NETWORK_ISOLATION_MODES:
    raise ValueError(
        f"network_isolation (or ${NETWORK_ISOLATION_ENVIRONMENT_VARIABLE}) must be one of "
        f"{sorted(_NETWORK_ISOLATION_MODES)}, got {network_isolation!r}"
    )
  return _NETWORK_ISOLATION_MODES[network_isolation]


def _warn_exposed_once(port: int, reason: str) -> None:
  global _exposure_warned
  if not _exposure_warned:
    _exposure_warned = True
    warnings.warn(
        f'The local TFF worker listens on port {port} on every network interface ({reason}): anyone who can '
        'reach this host can run TensorFlow code through it as this user. To refuse instead, pass '
        f"network_isolation='required' or set ${NETWORK_ISOLATION_ENVIRONMENT_VARIABLE}=required. "
        'This warning is shown once per process.',
        ExposedWorkerWarning, stacklevel=4,
    )


def _private_directory() -> str:
  """A new directory that only this user can enter (mode 0700), short enough to hold a Unix socket's path."""
  parent = tempfile.gettempdir()
  if len(parent) > _UNIX_SOCKET_PATH_MAX - 48:  # room for the directory and socket names
    parent = '/tmp'
  return tempfile.mkdtemp(prefix='tff_robust_worker_', dir=parent)


class LocalWorker:
  """A `worker_binary` subprocess, network-isolated by default, stopped by `stop()`, at exit or with its parent.

  Network exposure. TFF 0.87's binary always listens on every interface and runs, unauthenticated, whatever
  TensorFlow graph it is sent. With `network_isolation='auto'` (the default) or `'required'` it starts in a
  network namespace of its own that has only a loopback interface (`worker_launcher`), and this process
  talks to it through a Unix socket in a private directory: no other host and no other user of this host can
  reach it. That adds one local relay hop per gRPC stream, which costs nothing measurable in a round
  (`benchmarks/isolation_cost.py`: isolated / exposed round time 0.98-1.04, within the machine's noise;
  the relay's CPU time is 0.1-0.3 % of a round). Where
  the kernel refuses namespaces, `'auto'` starts the worker exposed with one `ExposedWorkerWarning` per
  process naming the port, and `'required'` raises `NetworkIsolationError`; `'off'` never isolates (and
  warns likewise). A whole-process alternative (re-executing the driver inside the namespace) was rejected:
  the driver would lose its network (dataset downloads, remote services), it cannot work in a notebook, and
  it must run before anything else in the program. Joining the worker's namespace from a thread (`setns`)
  needs CAP_SYS_ADMIN, so it fails for ordinary users (measured: EPERM).

  Logs. The binary's output goes to `LOG_DIR/tff_worker.log` when `log_dir` is given (e.g. a run's output
  directory), appended across runs; otherwise to a private temporary directory that a clean `stop()`
  removes. When the worker dies on its own that log is kept and `check_running` names it.
  """

  def __init__(
      self, *, max_concurrent_computation_calls: Optional[int] = None, visible_gpus: Optional[str] = None,
      network_isolation: Optional[str] = None, log_dir: Optional[str] = None, worker_binary: Optional[str] = None,
  ):
    """`max_concurrent_computation_calls`: client computations the worker runs at once at most; None: one per CPU
    core (`gpu_placement.client_concurrency`); non-positive: no limit (TFF's default).

    `visible_gpus`: the worker's CUDA_VISIBLE_DEVICES (None: inherited; see `gpu_placement`).

    `network_isolation`: 'auto', 'required' or 'off' (see the class docstring); None reads
    $TFF_ROBUST_NETWORK_ISOLATION, and 'auto' where that is unset.

    `worker_binary`: the executable to start, e.g. TFF's worker built with CUDA; None reads
    $TFF_ROBUST_WORKER_BINARY, and the TFF wheel's binary where that is unset (`worker_binaries.resolve`).
    """
    network_mode = _launcher_network_mode(network_isolation)
    self.binary = worker_binaries.resolve(worker_binary)
    self.port = portpicker.pick_unused_port()
    self._private_dir = _private_directory()
    self._unix_socket = os.path.join(self._private_dir, 'worker.sock')
    if log_dir is None:
      self.log_path = os.path.join(self._private_dir, 'worker.log')
    else:
      os.makedirs(log_dir, exist_ok=True)
      self.log_path = os.path.join(log_dir, 'tff_worker.log')
    self._log_file = open(self.log_path, 'ab')
    concurrency = gpu_placement.client_concurrency(max_concurrent_computation_calls)
    try:
      launched = worker_launcher.launch(
          [self.binary, f'--port={self.port}', f'--max_concurrent_computation_calls={concurrency}'],
          network=network_mode, port=self.port, unix_socket=self._unix_socket, stdout=self._log_file,
          stderr=subprocess.STDOUT, env=_environment_with_visible_gpus(visible_gpus),
      )
      self._process, status = launched.process, launched.status
    except TimeoutError:  # the launcher was killed
      self._log_file.close()
      shutil.rmtree(self._private_dir, ignore_errors=True)
      raise
    atexit.register(self.stop)
    if not status:
      self.check_running()
      raise RuntimeError(f'TFF worker launcher closed its status pipe without a status; log: {self.log_path}')
    outcome, _, reason = status.partition(' ')
    if network_mode == worker_launcher.EXPOSE:
      reason = "network_isolation='off'"
    self.network_isolated = outcome == 'isolated'
    self.exposure_reason = None if self.network_isolated else reason
    if outcome == 'refused':
      self._shut_down(keep_log=False)
      raise NetworkIsolationError(
          f'The TFF worker cannot run network-isolated: {reason}. network_isolation=\'auto\' (or '
          f'${NETWORK_ISOLATION_ENVIRONMENT_VARIABLE}=auto) runs it exposed where namespaces are refused, with '
          'a warning; \'off\' always does.'
      )
    if not self.network_isolated:
      _warn_exposed_once(self.port, reason)

  @property
  def address(self) -> str:
    """The gRPC target of the worker: its Unix socket when isolated, else its loopback port."""
    return f'unix:{self._unix_socket}' if self.network_isolated else f'localhost:{self.port}'

  @property
  def pid(self) -> Optional[int]:
    """The `worker_binary`'s process id (the launcher became the binary)."""
    return None if self._process is None else self._process.pid

  def is_running(self) -> bool:
    """Whether the worker process was started and has not exited."""
    return self._process is not None and self._process.poll() is None

  def exit_description(self) -> str:
    """How the worker ended, e.g. 'was killed by signal 9 (SIGKILL)' or 'exited with status 1'."""
    if self._process is None:
      return 'was stopped'
    status = self._process.poll()
    if status is None:
      return 'is running'
    if status < 0:
      return f'was killed by signal {-status} ({signal.Signals(-status).name})'
    return f'exited with status {status}'

  def check_running(self) -> None:
    """Raises RuntimeError naming how the worker ended and the tail of its log, unless it is running."""
    if not self.is_running():
      with open(self.log_path, 'rb') as log:
        tail = log.read()[-2000:].decode(errors='replace')
      raise RuntimeError(
          f'TFF worker_binary on port {self.port} {self.exit_description()}; its log ({self.log_path}) ends with:'
          f'\n{tail}'
      )

  def stop(self) -> None:
    """Stops the worker (SIGTERM, then SIGKILL after a grace period). Safe to call more than once.

    The private directory (Unix socket, and the log unless `log_dir` was given) is removed, except the log of
    a worker that had already exited on its own: that one is kept for `check_running`'s message.
    """
    if self._process is not None:
      self._shut_down(keep_log=self._process.poll() is not None)

  def _shut_down(self, *, keep_log: bool) -> None:
    _stop_process(self._process)
    self._process = None
    self._log_file.close()
    if os.path.exists(self._unix_socket):
      os.remove(self._unix_socket)
    if not (keep_log and os.path.dirname(self.log_path) == self._private_dir):
      shutil.rmtree(self._private_dir, ignore_errors=True)
    atexit.unregister(self.stop)


def _environment_with_visible_gpus(visible_gpus: Optional[str]) -> dict[str, str]:
  environment = dict(os.environ)
  if visible_gpus is not None:
    environment['CUDA_VISIBLE_DEVICES'] = visible_gpus
  return environment


class _WorkerExitInterceptor(grpc.UnaryUnaryClientInterceptor):
  """Turns a gRPC call that failed because `worker` has exited into `WorkerExited` (which TFF does not retry).

  A call that fails while the worker still runs (or before its exit can be observed: the connection may break
  a moment earlier) is returned as it failed, for TFF to retry; the retry's call then sees the exit.
  """

  def __init__(self, worker: LocalWorker):
    self._worker = worker

  def intercept_unary_unary(self, continuation, client_call_details, request):
    outcome = continuation(client_call_details, request)
    if outcome.exception() is not None and not self._worker.is_running():
      raise WorkerExited(
          f'the local TFF worker_binary (pid {self._worker.pid}) {self._worker.exit_description()} during a '
          f'computation; its log: {self._worker.log_path}'
      ) from outcome.exception()
    return outcome


def _wait_until_ready(is_ready, channel, address: str, *, worker: Optional[LocalWorker] = None, tls: bool = False):
  """Waits until `is_ready()`, or TimeoutError with gRPC's reason why `channel` is not ready; a TLS channel whose
  handshake fails raises `worker_channels.WorkerCertificateError` at once (`worker_channels.check_handshake`)."""
  deadline = time.monotonic() + _WORKER_START_TIMEOUT_SECONDS
  while not is_ready():
    if worker is not None:
      worker.check_running()
    if tls:
      worker_channels.check_handshake(channel, address)
    if time.monotonic() > deadline:
      failure = worker_channels.connection_failure(channel)
      if failure is None:  # it connected just now
        return
      raise TimeoutError(f'TFF executor service at {address} not ready after {_WORKER_START_TIMEOUT_SECONDS}s '
                         f'({failure})')
    time.sleep(0.05)


def _executor_factory(stub, default_num_clients: int) -> tff.framework.ResourceManagingExecutorFactory:
  def executor_stack_fn(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:
      cardinalities[tff.CLIENTS] = default_num_clients
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  return tff.framework.ResourceManagingExecutorFactory(executor_stack_fn)


def _make_context(stub, default_num_clients: int, optimize_graphs: bool = True) -> tff.framework.SyncExecutionContext:
  return tff.framework.SyncExecutionContext(
      executor_fn=_executor_factory(stub, default_num_clients),
      compiler_fn=functools.partial(simulation_compiler.compile_for_simulation, optimize_graphs=optimize_graphs),
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  )


def local_worker_context(
    worker: LocalWorker, *, default_num_clients: int = 0, optimize_graphs: bool = True
) -> tff.framework.SyncExecutionContext:
  """The execution context `set_local_execution_context` installs, on `worker` (ready), for `install`ing;
  `optimize_graphs` as in `simulation_compiler.compile_for_simulation`.

  A call that fails because `worker` has exited raises `WorkerExited` (see the module docstring).
  """
  channel = grpc.intercept_channel(
      worker_channels.open_channel(worker.address), _WorkerExitInterceptor(worker)
  )
  stub = tff.framework.RemoteExecutorGrpcStub(channel)
  _wait_until_ready(lambda: stub.is_ready, channel, worker.address, worker=worker)
  return _make_context(stub, default_num_clients, optimize_graphs)


def _warn_plaintext(addresses: Sequence[str]) -> None:
  if addresses:
    warnings.warn(
        f'Dialling the TFF workers at {", ".join(addresses)} in plain gRPC: whoever is on the network path can read '
        'the model and the data and alter the computation. Start them with worker_service --tls_* and pass '
        f'credentials_dir ({worker_tls.CREDENTIALS_FLAG}), or reach them through an SSH tunnel to 127.0.0.1.',
        PlaintextWorkerWarning, stacklevel=3,
    )


def _ready_stub(address: str, credentials: Optional[worker_tls.ClientCredentials] = None):
  """TFF's stub on a channel to `address` once the channel is ready.

  The stub is made only then: it subscribes to the channel's connectivity, and closing a subscribed channel races
  gRPC's polling thread, which then prints a `ValueError: Cannot monitor channel state: Channel closed!` traceback
  under the one-line refusal. Before, readiness is asked of the channel itself (`connection_failure`).
  """
  channel = worker_channels.open_channel(address, credentials)
  try:
    _wait_until_ready(lambda: worker_channels.connection_failure(channel) is None, channel, address,
                      tls=credentials is not None)
  except BaseException:
    channel.close()  # or gRPC goes on reconnecting in the background
    raise
  return tff.framework.RemoteExecutorGrpcStub(channel)


def set_remote_execution_context(
    addresses: Sequence[str], *, default_num_clients: int = 0, credentials_dir: Optional[str] = None,
) -> None:
  """Runs every TFF computation on the executor services at `addresses` (`host:port`, already started).

  `credentials_dir`: mutual TLS with workers started with `worker_service --tls_*`: a directory holding `ca.pem`
  (the authority that signed the workers' certificates), `client.pem` and `client.key` (this driver's certificate,
  signed by the authority of the workers' `--tls_client_ca`), e.g. `driver/` of `scripts/make_test_certificates.sh`.
  A file that cannot serve raises ValueError naming it; a worker whose certificate does not verify (or names
  another host than its address), or that refuses this driver's, raises `worker_channels.WorkerCertificateError`
  naming its address. None: plain gRPC (a worker on loopback or behind an SSH tunnel); other addresses then get
  one `PlaintextWorkerWarning` naming them.

  Each invocation's clients are split into `len(addresses)` contiguous shards, one per worker, and every
  computation is evaluated by `composing_context.ComposingContext`: client work and each aggregation pass on
  all workers at once, partial aggregates merged on the first worker. One address is the same code path with
  one shard. A computation that calls an intrinsic it cannot split is refused before anything runs
  (`composing_context.UnsupportedIntrinsicError`, naming it); every algorithm of this package runs.
  """
  global _context_installed
  if not addresses:
    raise ValueError('addresses must name at least one TFF worker (host:port)')
  credentials = None if credentials_dir is None else worker_tls.client_credentials(credentials_dir, 'credentials_dir')
  if credentials is None:
    _warn_plaintext([address for address in addresses if not worker_channels.is_loopback(address)])
  stubs = [_ready_stub(address, credentials) for address in addresses]
  _context_installed = True
  tff.framework.set_default_context(composing_context.ComposingContext(
      stubs, simulation_compiler.compile_for_simulation, default_num_clients=default_num_clients,
      worker_names=[f'at {address}' for address in addresses]))


_local_worker: Optional[LocalWorker] = None
_context_installed = False  # set once this module installs a context (local or remote)


def discard_tff_default_context() -> None:
  """Replaces the context TFF installs at import by one that runs nothing, unless this module installed one.

  TFF's own context holds a worker manager whose `__del__` prints an ignored `AttributeError ... 'Popen'` at
  interpreter exit. A binary that may exit before installing its context (a refused command, missing data)
  calls this first, so that it exits quietly.

  A worker that context started is stopped here (`_stop_tff_default_workers`): the manager's `__del__` stops it
  with SIGINT and waits without limit, which never returns where SIGINT is ignored (a process started in the
  background by a shell, `nohup`, and every process it starts).
  """
  if not _context_installed:
    _stop_tff_default_workers()
    tff_default_context.set_no_default_context()
    gc.collect()  # the manager sits in reference cycles: collect it while `subprocess` is still importable


def _stop_tff_default_workers() -> None:
  """Stops the worker of every live `ServiceManager` of TFF's import-time context (SIGTERM, then SIGKILL after a
  grace period) and empties the manager, so that its `__del__` has nothing left to signal or wait for."""
  for manager in gc.get_objects():
    if (type(manager).__module__ != _TFF_SERVICE_MANAGER_MODULE or type(manager).__name__ != 'ServiceManager'
        or not isinstance(getattr(manager, '_process', None), subprocess.Popen)):
      continue
    _stop_process(manager._process)  # pylint: disable=protected-access
    manager._process = None  # pylint: disable=protected-access


def _stop_process(process: subprocess.Popen) -> None:
  """Stops `process` if it still runs (SIGTERM, then SIGKILL after `_WORKER_STOP_TIMEOUT_SECONDS`) and reaps it."""
  if process.poll() is None:
    process.terminate()
    try:
      process.wait(timeout=_WORKER_STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
      process.kill()
  process.wait()


def set_local_execution_context(
    *, default_num_clients: int = 0, max_concurrent_computation_calls: Optional[int] = None,
    visible_gpus: Optional[str] = None,
    network_isolation: Optional[str] = None, log_dir: Optional[str] = None, worker_binary: Optional[str] = None,
    optimize_graphs: bool = True,
) -> LocalWorker:
  """Installs (once per process) a C++ execution context backed by a worker this process owns.

  Args:
    default_num_clients: number of clients assumed when a computation's arguments do not determine it.
    max_concurrent_computation_calls: the worker's limit on parallel calls of one computation (e.g. client
      training); None: one per CPU core this process may use, which made rounds faster than no limit on 2 cores
      (`gpu_placement.client_concurrency`, `benchmarks/results.md` section 6); non-positive: no limit (TFF's).
    visible_gpus: the worker's CUDA_VISIBLE_DEVICES (`gpu_placement.visible_gpus_setting`); None inherits.
    network_isolation: 'auto' (default): the worker runs in a private network namespace that no other host
      can reach, or, where the kernel refuses one, exposed on every interface with one warning;
      'required': isolated or `NetworkIsolationError`; 'off': exposed. None reads
      $TFF_ROBUST_NETWORK_ISOLATION ('auto' where unset). See `LocalWorker`.
    log_dir: directory for the worker's log (`tff_worker.log`), e.g. the run's output directory; None: a
      private temporary directory removed when the worker stops cleanly.
    worker_binary: the executable to start instead of the TFF wheel's `worker_binary`, e.g. one built from TFF's
      source with CUDA (the wheel's has no CUDA: `gpu_placement`); None reads $TFF_ROBUST_WORKER_BINARY, and
      the wheel's where that is unset. It is started through `worker_launcher`, network isolation included.
    optimize_graphs: whether computations are compiled with Grappler (`simulation_compiler`); the default True is
      TFF's own lowering, False compiles several times faster (the test session's choice).

  Returns:
    The `LocalWorker`; call `stop_local_execution_context()` (or let the process exit) to stop it.

  Raises (from a computation): `WorkerExited` as soon as a call fails because the worker has exited (killed, out
  of memory), instead of TFF's endless retrying (see the module docstring).
  """
  global _local_worker, _context_installed
  if _local_worker is None or not _local_worker.is_running():
    worker = LocalWorker(
        max_concurrent_computation_calls=max_concurrent_computation_calls, visible_gpus=visible_gpus,
        network_isolation=network_isolation, log_dir=log_dir, worker_binary=worker_binary,
    )
    try:
      context = local_worker_context(
          worker, default_num_clients=default_num_clients, optimize_graphs=optimize_graphs
      )
    except BaseException:
      worker.stop()
      raise
    tff.framework.set_default_context(context)
    _local_worker = worker
    _context_installed = True
  return _local_worker


def stop_local_execution_context() -> None:
  """Stops the worker started by `set_local_execution_context`; a later call starts a new one."""
  global _local_worker
  if _local_worker is not None:
    _local_worker.stop()
    _local_worker = None
