"""A fork server for the tests: `python -m MODULE ARGS` without paying TensorFlow's import in every run.

Many tests run `python -m experiments.train` as a user does, in a process of its own; each such process spends
5-9 s of this 2-core machine importing TensorFlow and TFF. The fork server is one helper process, started at the
first request, that imports once what the runner's TensorFlow part imports (the imports of
`experiments/train_program.py` outside `experiments`, so that the runner's own modules and absl flags are defined
afresh in each run) and then forks a child per request. The child becomes what a fresh `python -m MODULE ARGS`
would be: a session of its own (so that a timeout kills its whole process group), the requested working
directory (also `sys.path[0]`), environment (`os.environ` replaced) and argv, stdin from /dev/null and
stdout/stderr on the caller's files (passed over a Unix socket). It runs MODULE as `__main__` (`runpy`) and
leaves through the interpreter's own exit: the status of `SystemExit`, a traceback and status 1 for an uncaught
exception, atexit handlers (which stop the run's TFF worker). The caller gets the `subprocess.CompletedProcess`
that `subprocess.run(..., capture_output=True, text=True)` would give, or `subprocess.TimeoutExpired`.

What a child does not get afresh is what happens at import: modules count as imported (`'tensorflow' in
sys.modules`), TensorFlow's start-up messages went to the server's log and not to the run's stderr, string hashes
share the server's seed, and TFF's default context (installed at import) is already discarded
(`execution_context.discard_tff_default_context`; every binary installs its own), and AutoGraph's conversions of
the functions that earlier runs traced are cached already (`tests/autograph_warmup.py`: each run reports them at
exit and the server converts them too, ~1-2 s of every later runner run). Environment variables read at
import (TF_CPP_MIN_LOG_LEVEL, CUDA_VISIBLE_DEVICES, TFDS_DATA_DIR, ...) are honoured all the same: a request whose
environment differs from the server's (other than pytest's per-test PYTEST_CURRENT_TEST) restarts the server with
it. Tests about a fresh interpreter itself (import timing, signals sent to a terminal's process group) start one
(`tests/experiments/train_runs.py`'s `fresh_interpreter`).

Nothing outlives a request: the child dies with the server and the server with the test process
(`PR_SET_DEATHSIG`); after the child exits, the server kills what is left of its session, and the request fails
with `LeakedProcessesError` naming it.

$TFF_ROBUST_TEST_FORK_SERVER=0 turns the server off (`enabled()` is False): the tests then start a fresh
interpreter per run.
"""

import argparse
import ast
import atexit
import gc
import importlib
import io
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from tests import repository
from tests.simulation import proc_files
from tff_robust.runtime import worker_launcher

ENVIRONMENT_VARIABLE = 'TFF_ROBUST_TEST_FORK_SERVER'
_PRELOAD_SOURCE = os.path.join(repository.ROOT, 'experiments', 'train_program.py')
_PER_TEST_VARIABLES = ('PYTEST_CURRENT_TEST',)  # set by pytest for each test phase; nothing reads it at import
_START_TIMEOUT_SECONDS = 600.0
_LEFTOVER_GRACE_SECONDS = 5.0  # a run's worker dies with it (PR_SET_DEATHSIG), not at the same instant
_MAX_MESSAGE_BYTES = 1 << 22


def enabled() -> bool:
  """Whether runs go through the fork server ($TFF_ROBUST_TEST_FORK_SERVER is not '0')."""
  return os.environ.get(ENVIRONMENT_VARIABLE, '1') != '0'


class LeakedProcessesError(RuntimeError):
  """Processes of a forked run were alive after it exited; the server killed them."""


def _import_environment(environment) -> dict[str, str]:
  return {name: value for name, value in environment.items() if name not in _PER_TEST_VARIABLES}


def _text(file) -> str:
  """What `subprocess.run(..., text=True)` makes of the bytes in `file`: locale encoding, universal newlines."""
  file.seek(0)
  return io.TextIOWrapper(io.BytesIO(file.read())).read()


def _kill_group(pid: int) -> None:
  try:
    os.killpg(pid, signal.SIGKILL)
  except ProcessLookupError:
    pass


class ForkServer:
  """A server process started with `environment`; `run` forks one run of a module from it."""

  def __init__(self, environment: dict[str, str]):
    self.environment = dict(environment)
    self._lock = threading.Lock()
    self._log = tempfile.TemporaryFile()
    self._connection, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
      self._process = subprocess.Popen(
          [sys.executable, '-m', 'tests.fork_server', f'--parent_pid={os.getpid()}',
           f'--connection_fd={server_end.fileno()}'],
          cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
          pass_fds=(server_end.fileno(),), env=self.environment,
      )
    finally:
      server_end.close()
    atexit.register(self.stop)
    self._receive(_START_TIMEOUT_SECONDS)  # {'ready': True} once the server has imported TensorFlow

  def is_running(self) -> bool:
    return self._process.poll() is None

  def _receive(self, timeout: Optional[float]) -> dict:
    """The server's next reply; TimeoutError after `timeout` seconds, RuntimeError if the server has died."""
    self._connection.settimeout(timeout)
    message = self._connection.recv(_MAX_MESSAGE_BYTES)
    if not message:
      self._process.wait()
      self._log.seek(0)
      tail = self._log.read()[-3000:].decode(errors='replace')
      raise RuntimeError(f'the fork server exited with status {self._process.returncode}; its output ends:\n{tail}')
    return json.loads(message)

  def run(self, module: str, args, *, cwd, env, timeout: Optional[float] = None) -> subprocess.CompletedProcess:
    """As `subprocess.run([sys.executable, '-m', module, *args], cwd=cwd, env=env, timeout=timeout,
    capture_output=True, text=True, stdin=subprocess.DEVNULL)`, the run forked from this server.

    On timeout the run's process group is killed and `subprocess.TimeoutExpired` carries its output so far.
    """
    command = [sys.executable, '-m', module, *args]
    request = json.dumps(dict(module=module, args=list(args), cwd=os.fspath(cwd), env=dict(env))).encode()
    with self._lock, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
      socket.send_fds(self._connection, [request], [stdout.fileno(), stderr.fileno()])
      pid = self._receive(_START_TIMEOUT_SECONDS)['pid']
      deadline = None if timeout is None else time.monotonic() + timeout
      try:
        outcome = self._receive(None if deadline is None else max(deadline - time.monotonic(), 1e-3))
      except TimeoutError:
        _kill_group(pid)
        self._receive(_START_TIMEOUT_SECONDS)  # the killed run's exit
        raise subprocess.TimeoutExpired(command, timeout, output=_text(stdout), stderr=_text(stderr)) from None
      except BaseException:  # interrupted (pytest-timeout, Ctrl-C): the run goes, and the server with its state
        _kill_group(pid)
        self.stop()
        raise
      if outcome['leftovers']:
        raise LeakedProcessesError(
            f'{command} left processes alive after it exited (killed now): {outcome["leftovers"]}; '
            f'its stderr ends:\n{_text(stderr)[-3000:]}'
        )
      return subprocess.CompletedProcess(command, outcome['returncode'], _text(stdout), _text(stderr))

  def stop(self) -> None:
    """Ends the server (it exits when its connection closes). Safe to call more than once."""
    self._connection.close()
    try:
      self._process.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self._process.kill()
      self._process.wait()
    self._log.close()
    atexit.unregister(self.stop)


_server: Optional[ForkServer] = None


def run(module: str, args, *, cwd, env, timeout: Optional[float] = None) -> subprocess.CompletedProcess:
  """`ForkServer.run` on the session's server, (re)started when `env` differs from its environment."""
  global _server
  if _server is not None and (
      not _server.is_running() or _import_environment(_server.environment) != _import_environment(env)):
    _server.stop()
    _server = None
  if _server is None:
    _server = ForkServer(env)
  return _server.run(module, args, cwd=cwd, env=env, timeout=timeout)


def python_m(module: str, args, *, cwd=repository.ROOT, timeout: Optional[float] = 600) -> subprocess.CompletedProcess:
  """What `subprocess.run([sys.executable, '-m', module, *args], cwd=cwd, capture_output=True, text=True,
  timeout=timeout)` gives, with the test process's environment: forked from the session's server when `enabled()`
  (no 5-9 s of TensorFlow imports per run), else a fresh interpreter.

  A forked child that died by SIGSEGV (a fork of a multi-threaded process can, rarely: NOTES.md) runs once more in a
  fresh interpreter; the experiment binaries resume what the crashed run wrote. Tests of what happens before or
  during imports, or with another environment, start their own interpreter.
  """
  if enabled():
    result = run(module, list(args), cwd=cwd, env=os.environ, timeout=timeout)
    if result.returncode != -signal.SIGSEGV:
      return result
  return subprocess.run([sys.executable, '-m', module, *args], cwd=cwd, capture_output=True, text=True,
                        timeout=timeout, stdin=subprocess.DEVNULL)


# The server side.


def _preloaded_modules() -> list[str]:
  """The modules `experiments/train_program.py` imports, except the runner's own (`experiments.*`)."""
  with open(_PRELOAD_SOURCE) as f:
    tree = ast.parse(f.read())
  modules = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      modules += [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      modules += [f'{node.module}.{alias.name}' for alias in node.names]
  return [module for module in modules if not module.startswith('experiments')]


def _preload() -> None:
  for name in _preloaded_modules():
    try:
      importlib.import_module(name)
    except ModuleNotFoundError:  # `from package import function`: the package is imported
      pass
  from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
  execution_context.discard_tff_default_context()
  # The garbage collector of a child would touch, and so copy, every page the imports filled: a child's interpreter
  # exit took 3.5 s instead of 0.8 s (a fresh interpreter's takes ~4 s after these imports).
  gc.freeze()


def _send(connection: socket.socket, reply: dict) -> None:
  connection.send(json.dumps(reply).encode())


def _become_run(request: dict, output_fds: list[int], connection: socket.socket, server_pid: int,
                started_fd: int) -> None:
  """In the forked child: turns this process into a fresh `python -m` of the request, short of running it."""
  connection.close()
  os.setsid()
  worker_launcher.die_with_parent(server_pid)
  os.close(started_fd)  # the server may now hand out the pid: the process group exists
  stdin = os.open(os.devnull, os.O_RDONLY)
  for target, source in ((0, stdin), *zip((1, 2), output_fds)):
    os.dup2(source, target)
    os.close(source)
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  tempfile.tempdir = None  # cached from the server's $TMPDIR
  sys.path[0] = os.getcwd()  # as `python -m` sets it
  sys.argv = [request['module'], *request['args']]  # runpy sets argv[0] to the module's file


def _serve(connection: socket.socket) -> None:
  from tests import autograph_warmup  # pylint: disable=g-import-not-at-top  (imports TensorFlow: the server's alone)
  converted = set()  # what the runs so far reported converting
  while True:
    message, output_fds, _, _ = socket.recv_fds(connection, _MAX_MESSAGE_BYTES, 2)
    if not message:
      return  # the test process closed its end
    request = json.loads(message)
    started_read, started_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    server_pid = os.getpid()
    conversions = tempfile.TemporaryFile()  # what the run converts with AutoGraph, reported at its exit
    pid = os.fork()
    if pid == 0:  # the run: leaves through the interpreter's exit, never back into this loop
      os.close(started_read)
      _become_run(request, output_fds, connection, server_pid, started_write)
      atexit.register(autograph_warmup.report, conversions)  # registered first, so run after the run's own handlers
      runpy.run_module(request['module'], run_name='__main__', alter_sys=True)
      sys.exit(0)
    os.close(started_write)
    for fd in output_fds:
      os.close(fd)
    os.read(started_read, 1)  # end of file once the child has its own session
    os.close(started_read)
    _send(connection, {'pid': pid})
    _, status = os.waitpid(pid, 0)
    _send(connection, {'returncode': os.waitstatus_to_exitcode(status), 'leftovers': _kill_leftovers(pid)})
    with conversions:
      autograph_warmup.convert_reported(conversions, converted)  # for the runs forked from now on


def _kill_leftovers(session: int) -> list[str]:
  """Kills the processes still alive in the run's session after a grace period; their pids and names."""
  deadline = time.monotonic() + _LEFTOVER_GRACE_SECONDS
  while (leftovers := proc_files.live_processes_of_session(session)) and time.monotonic() < deadline:
    time.sleep(0.05)
  described = []
  for pid in leftovers:
    try:
      described.append(f'{pid} ({proc_files.command_name(pid)})')
      os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
      pass
  deadline = time.monotonic() + _LEFTOVER_GRACE_SECONDS
  while proc_files.live_processes_of_session(session) and time.monotonic() < deadline:  # SIGKILL takes a moment
    time.sleep(0.01)
  return described


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser(prog='fork_server')
  parser.add_argument('--parent_pid', type=int, required=True)
  parser.add_argument('--connection_fd', type=int, required=True)
  args = parser.parse_args(argv[1:])
  worker_launcher.die_with_parent(args.parent_pid)
  connection = socket.socket(fileno=args.connection_fd)
  _preload()
  _send(connection, {'ready': True})
  _serve(connection)


if __name__ == '__main__':
  main(sys.argv)
