"""Starts TFF's C++ `worker_binary` so that it dies with its launching process and, by default, no host sees it.

Usage (internal: `launch()`, by `execution_context.LocalWorker` and `worker_service`):

  python -m tff_robust.runtime.worker_launcher --parent_pid=PID --network=isolate|isolate_or_expose|expose \
      --status_fd=FD (--unix_socket=PATH | --listen_fd=FD [--tls_cert=C --tls_key=K --tls_client_ca=CA]) \
      [--relay_alive_fd=FD] --port=PORT -- BINARY [ARGS...]

Dying with the parent: the launcher asks Linux to SIGKILL it when its parent dies (`PR_SET_DEATHSIG`), then
replaces itself with the worker binary (the death signal survives `execve`). So even a parent killed with
SIGKILL, which runs no `atexit` handler, leaves no worker holding the terminal's or CI's pipes open.

Network isolation: TFF 0.87's `worker_binary` always listens on `[::]:PORT`, every interface, and serves
unauthenticated gRPC that runs any TensorFlow graph it is sent. With `--network=isolate` the launcher first
moves itself into a new network namespace (Linux `unshare(CLONE_NEWNET)`; without root, together with a new
user namespace, `CLONE_NEWUSER`, which unprivileged users may create), brings its loopback interface up, and
only then starts the binary: the namespace has no interface but loopback, so no other host, and no process
outside it, can reach the port. The driving Python process stays in the host's namespace (it keeps its own
network: downloads, remote services) and reaches the worker through a filesystem Unix socket, `PATH`, in a
directory only its user can open: a forked relay process inside the namespace accepts on `PATH` and connects
each accepted stream to the worker's `127.0.0.1:PORT`. Filesystem sockets are found by path, not by network
namespace, which is what lets the relay bridge the two. The relay is the worker's child with its own death
signal, so it never outlives the worker.

`--listen_fd=FD` (`worker_service`) gives the relay a listening TCP socket instead, bound by the caller in the
host's namespace: a socket keeps the namespace it was created in, so the relay accepts connections from the
host's network there and connects each to the worker's port in its own namespace, one hop. With the `--tls_*`
files the relay accepts only mutual-TLS connections from clients that the CA signed (`tls_relay`).
`--relay_alive_fd=FD`, the write end of a pipe, is kept open by the relay alone (the worker closes it before it
starts), so the caller reads end-of-file from the other end when the relay ends: without it the worker is
unreachable (`launch(watch_relay=True)`, `worker_service`).

`--network=isolate_or_expose` falls back to the plain binary when namespaces cannot be created (e.g. a
container whose seccomp profile forbids `unshare`, or a kernel with unprivileged user namespaces disabled);
`--network=expose` never tries. The launcher reports what it did as one line on `--status_fd` before the
binary starts: `isolated`, `exposed REASON`, or `refused REASON` (then it exits with status 1).

This module must stay free of TensorFlow: it runs before every local worker starts.
"""

import argparse
import ctypes
import errno
import fcntl
import os
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from typing import NamedTuple, Optional, Sequence

from tff_robust.runtime import tls_relay
from tff_robust.runtime import worker_tls

_PR_SET_DEATHSIG = 1
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ_FLAGS = struct.Struct('16sH22x')  # struct ifreq: interface name, then the flags in a 24-byte union
_RELAY_BUFFER_BYTES = 1 << 20
_RELAY_CONNECT_TIMEOUT_SECONDS = 60.0
_STATUS_TIMEOUT_SECONDS = 60.0

ISOLATE = 'isolate'
ISOLATE_OR_EXPOSE = 'isolate_or_expose'
EXPOSE = 'expose'


def _libc():
  return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
  """SIGKILL this process when its parent dies; exits now if the parent `parent_pid` is already gone."""
  if sys.platform.startswith('linux'):
    if _libc().prctl(_PR_SET_DEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), 'prctl(PR_SET_DEATHSIG) failed')
  # The parent may have died before prctl took effect: then nobody would ever stop this process.
  if os.getppid() != parent_pid:
    os._exit(0)  # pylint: disable=protected-access


def _unshare(flags: int) -> None:
  if _libc().unshare(flags) != 0:
    code = ctypes.get_errno()
    raise OSError(code, os.strerror(code))


def _write(path: str, text: str) -> None:
  with open(path, 'w') as f:
    f.write(text)


def enter_private_network() -> None:
  """Moves this (single-threaded) process into a new network namespace.

  Root (or a process with CAP_SYS_ADMIN) needs only the network namespace. Anyone else creates a user
  namespace with it, where this process holds the capabilities needed to configure its own network; its user
  and group ids are mapped to themselves where the kernel allows it, so files keep their owners, and the
  binary started afterwards runs with no capability at all. Raises OSError when the kernel refuses.
  """
  try:
    _unshare(_CLONE_NEWNET)
  except OSError as error:
    if error.errno != errno.EPERM:
      raise
    uid, gid = os.geteuid(), os.getegid()
    _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
    try:
      _write('/proc/self/setgroups', 'deny')  # an unprivileged gid_map requires it
      _write('/proc/self/uid_map', f'{uid} {uid} 1')
      _write('/proc/self/gid_map', f'{gid} {gid} 1')
    except OSError:
      # E.g. Linux >= 5.12 refuses to map uid 0 for a process that lacked CAP_SETFCAP (root with dropped
      # capabilities). The ids then stay unmapped: only how they read inside the namespace changes, the
      # kernel still checks file access with the real ones. The namespace exists either way.
      pass


def bring_loopback_up() -> None:
  """Sets this network namespace's loopback interface up (a new namespace starts with it down)."""
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
    request = _IFREQ_FLAGS.pack(b'lo', 0)
    _, flags = _IFREQ_FLAGS.unpack(fcntl.ioctl(control, _SIOCGIFFLAGS, request))
    fcntl.ioctl(control, _SIOCSIFFLAGS, _IFREQ_FLAGS.pack(b'lo', flags | _IFF_UP))


def _pump(source: socket.socket, destination: socket.socket) -> None:
  """Copies one direction of a stream until end of file, then half-closes the other side."""
  buffer = bytearray(_RELAY_BUFFER_BYTES)
  view = memoryview(buffer)
  try:
    while True:
      count = source.recv_into(buffer)
      if not count:
        break
      destination.sendall(view[:count])
    destination.shutdown(socket.SHUT_WR)
  except OSError:  # one end went away: end both directions (shutdown wakes the other pump's recv)
    for end in (source, destination):
      try:
        end.shutdown(socket.SHUT_RDWR)
      except OSError:
        pass


def _join(client: socket.socket, worker: socket.socket) -> None:
  """Relays between the two streams in both directions until both end, then closes them."""
  backward = threading.Thread(target=_pump, args=(worker, client), daemon=True)
  backward.start()
  _pump(client, worker)
  backward.join()
  client.close()
  worker.close()


def _connect_to_worker(port: int) -> socket.socket:
  """A TCP connection to the worker on this namespace's loopback, waiting while the worker starts."""
  deadline = time.monotonic() + _RELAY_CONNECT_TIMEOUT_SECONDS
  while True:
    try:
      connection = socket.create_connection(('127.0.0.1', port))
      break
    except ConnectionRefusedError:
      if time.monotonic() > deadline:
        raise
      time.sleep(0.01)
  connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # gRPC's own sockets do the same
  return connection


def _relay(listener: socket.socket, port: int) -> None:
  """Forever: accepts a stream on `listener` and joins it to a new connection to the worker's port."""
  while True:
    try:
      client, _ = listener.accept()
    except OSError:  # out of open files or memory for now (EMFILE, ENFILE, ENOBUFS): retry, as tls_relay does
      time.sleep(tls_relay.ACCEPT_RETRY_SECONDS)
      continue
    if client.family != socket.AF_UNIX:
      client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
      worker = _connect_to_worker(port)
    except OSError:
      client.close()
      continue
    threading.Thread(target=_join, args=(client, worker), daemon=True).start()


def _report(status_fd: int, line: str) -> None:
  os.write(status_fd, (line + '\n').encode())
  os.close(status_fd)


def _listen(unix_socket: str) -> socket.socket:
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(unix_socket)
  listener.listen(16)
  return listener


def _fork_relay(listener: socket.socket, port: int, tls_context: Optional[ssl.SSLContext],
                relay_alive_fd: Optional[int]) -> None:
  """Forks the relay from `listener` to the worker's loopback port (TLS-terminating with `tls_context`); returns in
  the (future worker) parent, which leaves `relay_alive_fd` to the relay."""
  worker_pid = os.getpid()
  if os.fork() == 0:
    try:
      die_with_parent(worker_pid)
      if tls_context is None:
        _relay(listener, port)
      else:
        tls_relay.serve_forever(listener, port, tls_context)
    finally:
      os._exit(1)  # pylint: disable=protected-access
  listener.close()
  if relay_alive_fd is not None:
    os.close(relay_alive_fd)


def _parse(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog='worker_launcher')
  parser.add_argument('--parent_pid', type=int, required=True)
  parser.add_argument('--network', choices=(ISOLATE, ISOLATE_OR_EXPOSE, EXPOSE), required=True)
  parser.add_argument('--status_fd', type=int, required=True)
  relay_listener = parser.add_mutually_exclusive_group(required=True)
  relay_listener.add_argument('--unix_socket')
  relay_listener.add_argument('--listen_fd', type=int)
  parser.add_argument('--tls_cert')
  parser.add_argument('--tls_key')
  parser.add_argument('--tls_client_ca')
  parser.add_argument('--relay_alive_fd', type=int)
  parser.add_argument('--port', type=int, required=True)
  parser.add_argument('binary_and_args', nargs='+')
  return parser.parse_args(argv[1:])


def _tls_context(args: argparse.Namespace) -> Optional[ssl.SSLContext]:
  files = (args.tls_cert, args.tls_key, args.tls_client_ca)
  return None if files == (None, None, None) else worker_tls.server_context(*files)


def main(argv: list[str]) -> None:
  """Enters a private network namespace (unless told to expose), reports the outcome on the status pipe, then execs the
  worker binary (the module docstring)."""
  args = _parse(argv)
  try:
    tls_context = _tls_context(args)  # read before a user namespace could change how the files' owners look
  except ValueError as error:
    _report(args.status_fd, f'refused {error}')
    raise SystemExit(1) from None
  status = 'exposed not asked to isolate'
  if args.network != EXPOSE:
    try:
      enter_private_network()
      status = 'isolated'
    except OSError as error:
      if args.network == ISOLATE:
        _report(args.status_fd, f'refused the kernel refused a private network namespace ({error})')
        raise SystemExit(1) from None
      status = f'exposed the kernel refused a private network namespace ({error})'
  if status == 'isolated':
    try:
      bring_loopback_up()
    except OSError as error:  # inside the namespace already: the worker could be reached by no one
      _report(args.status_fd, f'refused the private network namespace has no usable loopback ({error})')
      raise SystemExit(1) from None
  die_with_parent(args.parent_pid)  # after unshare: a namespace change must not reset the death signal
  if args.listen_fd is not None:
    listener = socket.socket(fileno=args.listen_fd)
  else:
    listener = _listen(args.unix_socket) if status == 'isolated' else None
  _report(args.status_fd, status)  # closes the status pipe before the fork: only the Python side holds it
  if listener is not None:
    _fork_relay(listener, args.port, tls_context, args.relay_alive_fd)
  elif args.relay_alive_fd is not None:
    os.close(args.relay_alive_fd)  # no relay (an exposed worker): the caller reads end-of-file at once
  os.execv(args.binary_and_args[0], args.binary_and_args)


class Launched(NamedTuple):
  """A launcher started by `launch`: its process (the worker binary once started), its status line and, with
  `watch_relay`, the read end of the pipe that reaches end-of-file when the relay ends (the caller closes it)."""
  process: subprocess.Popen
  status: str  # 'isolated', 'exposed REASON' or 'refused REASON'; '' if it exited without saying
  relay_alive: Optional[int] = None


def launch(
    binary_and_args: Sequence[str], *, network: str, port: int, unix_socket: Optional[str] = None,
    listener: Optional[socket.socket] = None, tls_files: Optional[Sequence[str]] = None, watch_relay: bool = False,
    **popen_arguments,
) -> Launched:
  """Starts `binary_and_args` (a worker listening on `port`) through this launcher, which dies with this process,
  and waits for its status line (see the module docstring).

  The relay listens on `unix_socket` (a new filesystem socket), or accepts on `listener` (a listening TCP socket of
  this process's network namespace, with the TLS files `tls_files` = (certificate, key, client CA) if given).
  `network`: ISOLATE, ISOLATE_OR_EXPOSE or EXPOSE (only with `unix_socket`). `watch_relay`: also return
  `Launched.relay_alive` (module docstring, `--relay_alive_fd`). `popen_arguments` go to `subprocess.Popen` (output,
  environment). Raises TimeoutError (the launcher killed) if no status comes in time, and ValueError, before
  starting anything, unless exactly one of `unix_socket` and `listener` is given, or for a `listener` with another
  `network` than ISOLATE (a worker that falls back to exposure must not get a relay on the caller's TCP socket too).
  """
  if (unix_socket is None) == (listener is None):
    raise ValueError('launch takes exactly one of unix_socket and listener')
  if listener is not None and network != ISOLATE:
    raise ValueError(f'network must be {ISOLATE!r} with a listener, got {network!r}')
  status_read, status_write = os.pipe()
  inherited = [status_write]
  relay_alive_read = relay_alive_write = None
  if watch_relay:
    relay_alive_read, relay_alive_write = os.pipe()
    inherited.append(relay_alive_write)
  relay_arguments = [f'--unix_socket={unix_socket}']
  if listener is not None:
    inherited.append(listener.fileno())
    relay_arguments = [f'--listen_fd={listener.fileno()}']
    relay_arguments += [f'--{name}={path}' for name, path in zip(('tls_cert', 'tls_key', 'tls_client_ca'),
                                                                 tls_files or ())]
  if watch_relay:
    relay_arguments.append(f'--relay_alive_fd={relay_alive_write}')
  try:
    process = subprocess.Popen(
        [sys.executable, '-m', 'tff_robust.runtime.worker_launcher', f'--parent_pid={os.getpid()}',
         f'--network={network}', f'--status_fd={status_write}', *relay_arguments, f'--port={port}', '--',
         *binary_and_args],
        stdin=subprocess.DEVNULL, close_fds=True, pass_fds=inherited, **popen_arguments,
    )
  except BaseException:
    for read_end in (status_read, relay_alive_read):
      if read_end is not None:
        os.close(read_end)
    raise
  finally:
    os.close(status_write)
    if relay_alive_write is not None:
      os.close(relay_alive_write)
  try:
    return Launched(process, _read_status(status_read), relay_alive_read)
  except TimeoutError:
    process.kill()
    process.wait()
    if relay_alive_read is not None:
      os.close(relay_alive_read)
    raise
  finally:
    os.close(status_read)


def _read_status(status_read: int) -> str:
  """The launcher's one status line, or '' if it closes the pipe without one."""
  deadline = time.monotonic() + _STATUS_TIMEOUT_SECONDS
  received = b''
  while not received.endswith(b'\n'):
    if time.monotonic() > deadline:
      raise TimeoutError(f'TFF worker launcher gave no status after {_STATUS_TIMEOUT_SECONDS}s')
    if select.select([status_read], [], [], 0.05)[0]:
      chunk = os.read(status_read, 4096)
      if not chunk:
        return ''
      received += chunk
  return received.decode().strip()


if __name__ == '__main__':
  main(sys.argv)
