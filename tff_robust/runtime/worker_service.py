r"""Serves TFF's C++ executor service (`worker_binary`) on a port, in the foreground, for remote runs.

    python -m tff_robust.runtime.worker_service --port=8000 [--listen=ADDRESS] \
        [--tls_cert=server.pem --tls_key=server.key --tls_client_ca=client_ca.pem | --insecure_listen] \
        [--gpus=auto|none|0,1] [--max_concurrent_computation_calls=N] [--worker_binary=PATH]

then, on the machine that drives training:

    python -m experiments.train --tff_worker_address=HOST:8000 [--tff_worker_credentials=DIR] ...

Why it is built this way. TFF 0.87's `worker_binary` listens on every network interface and serves unauthenticated,
unencrypted gRPC: whoever reaches its port runs any TensorFlow graph, file reads and writes included, as this user.
So the service starts the binary in a private network namespace that has only a loopback interface (the local
worker's `worker_launcher`, which makes it die with this process), and a relay forked beside it accepts on
`--listen` (127.0.0.1 unless told otherwise, i.e. this host only) in the host's network:

- By default (127.0.0.1, no TLS) only this host's processes can connect, every local user's included; from another
  host, through an SSH tunnel (`ssh -N -L 127.0.0.1:8000:127.0.0.1:8000 compute-host` on the driver,
  then `--tff_worker_address=127.0.0.1:8000`), with no firewall rule.
- With `--tls_cert`, `--tls_key` and `--tls_client_ca` the relay speaks mutual TLS (`tls_relay`): it presents the
  certificate and accepts only clients whose certificate the client CA signed; the driver checks the worker's
  certificate against its own CA (`--tff_worker_credentials`). Every refused connection is logged in one line.
- `--listen` on an address other hosts can reach without TLS needs `--insecure_listen`, and the service warns.
- Where the kernel refuses a network namespace (some containers), the service refuses to start, naming
  `--network_isolation=off`, which serves the binary itself on every interface as TFF does (with the warning);
  with `--tls_*` it names the ways to keep TLS instead (that mode takes none).

The guide "Where clients run" (docs/guides/where_clients_run.md) shows the set-up and what each way protects against.

Workers: `--worker_binary`, else $TFF_ROBUST_WORKER_BINARY, else the one shipped in the TFF wheel, which is built
without CUDA, so that with it client computations run on this host's CPU cores (`gpu_placement`; `--gpus=auto`
says so in one line, `--gpus=0` is refused). A worker built from TFF's source with CUDA is how a GPU serves.
SIGTERM, SIGINT or SIGHUP stops the worker and then the service (the worker also dies if the service is killed).
If the relay ends while the worker runs (a bug or a kill: no connection could reach the worker any more), the
service stops the worker and exits with status 1, saying so, rather than refuse every connection silently.

A bad flag is refused with one line on stderr naming it, exit status 2 (as `experiments.train` does): a missing,
unreadable or non-PEM certificate, a key that does not match its certificate, an exposed `--listen` without TLS or
`--insecure_listen`. Nothing here imports TensorFlow unless `--gpus` must count the GPUs of a worker that can.
"""

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import NoReturn, Optional

from absl import app
from absl import flags
from absl import logging

from tff_robust.command_line import finite_flags
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries
from tff_robust.runtime import worker_launcher
from tff_robust.runtime import worker_tls

_PORT = flags.DEFINE_integer('port', 8000, 'Port to serve on, in [1, 65535].', lower_bound=1, upper_bound=65535)
_LISTEN = flags.DEFINE_string(
    'listen', '127.0.0.1',
    'Address to accept connections on: 127.0.0.1 (this host only; other hosts through an SSH tunnel), an '
    'interface\'s address, or 0.0.0.0 (every interface). Other hosts need TLS (--tls_*) or --insecure_listen.',
)
_TLS_CERT = flags.DEFINE_string('tls_cert', None, 'PEM certificate the worker presents (mutual TLS, with --tls_key '
                                'and --tls_client_ca; scripts/make_test_certificates.sh makes a test set).')
_TLS_KEY = flags.DEFINE_string('tls_key', None, 'PEM private key of --tls_cert (unencrypted).')
_TLS_CLIENT_CA = flags.DEFINE_string(
    'tls_client_ca', None, 'PEM certificate(s) of the authority that signs the drivers\' client certificates: '
    'any other connection is refused (and logged).')
_INSECURE_LISTEN = flags.DEFINE_bool(
    'insecure_listen', False,
    'Allow a --listen address other hosts can reach without TLS: anyone who connects can run code as this user.',
)
_NETWORK_ISOLATION = flags.DEFINE_enum(
    'network_isolation', 'required', ['required', 'off'],
    'required: the worker runs in a private network namespace behind the --listen relay, or the service refuses to '
    'start; off: TFF\'s worker_binary itself listens on every interface, unauthenticated (no --listen, no TLS).',
)
_GPUS = flags.DEFINE_string(
    'gpus', gpu_placement.AUTO,
    "GPUs the worker may use: 'auto', 'none' or '0,1' (TFF's PyPI worker has no CUDA: CPU only).",
)
_MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', None,
    'Parallel calls of one computation (e.g. client training) at most; unset: one per CPU core this service may '
    'use, as the runner\'s local worker; non-positive: no limit (TFF\'s default).',
)
_WORKER_BINARY = flags.DEFINE_string(
    'worker_binary', None,
    f'The executor binary to serve, e.g. TFF\'s worker built with CUDA; unset: '
    f'${worker_binaries.ENVIRONMENT_VARIABLE}, else the TFF wheel\'s worker_binary (no CUDA).',
)

_EXPOSURE_WARNING = (
    'WARNING: this TFF worker is unauthenticated and reachable on {where}: anyone who can connect can run code as '
    'this user; firewall the port, serve it with --tls_* or reach it through an SSH tunnel.'
)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _tls_files() -> Optional[tuple[str, str, str]]:
  """(cert, key, client CA) checked by `worker_tls.server_context`, or None without TLS; ValueError naming a flag."""
  files = (_TLS_CERT.value, _TLS_KEY.value, _TLS_CLIENT_CA.value)
  if files == (None, None, None):
    return None
  if None in files:
    missing = ', '.join(flag for flag, path in zip(worker_tls.SERVER_FLAGS, files) if path is None)
    raise ValueError(f'{", ".join(worker_tls.SERVER_FLAGS)} go together (mutual TLS): {missing} missing')
  worker_tls.server_context(*files)
  return files


def _listen_address() -> tuple[str, bool]:
  """(the IP address --listen names, whether it is a loopback address); ValueError naming the flag."""
  try:
    address = socket.getaddrinfo(_LISTEN.value, _PORT.value, type=socket.SOCK_STREAM)[0][4][0]
  except (socket.gaierror, UnicodeError) as error:
    raise ValueError(f'--listen={_LISTEN.value}: not an address of this host ({error})') from None
  return address, ipaddress.ip_address(address).is_loopback


def _check_exposure(is_loopback: bool, tls: bool) -> None:
  """Refuses (ValueError naming the flag) what would expose the unauthenticated worker without being asked to."""
  if _NETWORK_ISOLATION.value == 'off':
    given = [f'--{name}' for name in ('listen', 'tls_cert', 'tls_key', 'tls_client_ca', 'insecure_listen')
             if flags.FLAGS[name].present]
    if given:
      raise ValueError(f'--network_isolation=off serves TFF\'s worker_binary itself on every interface without TLS: '
                       f'it takes no {", ".join(given)}')
  elif not is_loopback and not tls and not _INSECURE_LISTEN.value:
    raise ValueError(
        f'--listen={_LISTEN.value} lets other hosts reach the worker, whose gRPC is unauthenticated: give '
        f'--tls_cert, --tls_key and --tls_client_ca (mutual TLS), or --insecure_listen to accept that anyone who '
        f'connects can run code as this user')


def _endpoint(address: str) -> str:
  return f'[{address}]:{_PORT.value}' if ':' in address else f'{address}:{_PORT.value}'


def _bind(address: str) -> socket.socket:
  family = socket.AF_INET6 if ':' in address else socket.AF_INET
  try:
    return socket.create_server((address, _PORT.value), family=family, backlog=128)
  except OSError as error:
    finite_flags.refuse(f'--listen={_LISTEN.value} --port={_PORT.value}: cannot listen on {_endpoint(address)} '
                        f'({error.strerror or error})')


def _who_can_connect(address: str, is_loopback: bool, tls: bool) -> str:
  if tls:
    return (f'mutual TLS: only clients with a certificate signed by --tls_client_ca={_TLS_CLIENT_CA.value}; each '
            'connection is logged here')
  if is_loopback:
    return ('unauthenticated, this host only: any user of this host can connect and run code as this user; other '
            f'hosts through an SSH tunnel (ssh -N -L 127.0.0.1:{_PORT.value}:127.0.0.1:{_PORT.value} THIS_HOST) '
            'or with --tls_*')
  where = f'every network interface (port {_PORT.value})' if ipaddress.ip_address(address).is_unspecified else \
      _endpoint(address)
  return _EXPOSURE_WARNING.format(where=where)


def _serve_exposed(binary: str, concurrency: int) -> NoReturn:
  """TFF's way (`--network_isolation=off`): this process becomes the binary, listening on every interface."""
  print(f'TFF worker serving on port {_PORT.value} of every interface (pid {os.getpid()}): {binary}',
        file=sys.stderr, flush=True)
  print(_EXPOSURE_WARNING.format(where=f'every network interface (port {_PORT.value})'), file=sys.stderr, flush=True)
  os.execv(binary, [binary, f'--port={_PORT.value}', f'--max_concurrent_computation_calls={concurrency}'])


def _no_namespace_refusal(reason: str, tls: bool) -> str:
  """The one-line refusal where the kernel gives the worker no private network namespace: with TLS it names no
  flag that would serve anyway (`--network_isolation=off` refuses TLS), without it the flag that accepts exposure."""
  refusal = f'the worker cannot run in a private network namespace here ({reason})'
  if tls:
    return (f'{refusal}: TLS needs one (its relay must be the only way in); run as root or where unprivileged user '
            'namespaces are allowed, or keep the service on loopback without TLS and reach it through an SSH tunnel')
  return (f'{refusal}; --network_isolation=off serves TFF\'s worker_binary without one, on every interface, '
          'unauthenticated')


def _serve_isolated(binary: str, concurrency: int, address: str, is_loopback: bool, tls_files) -> NoReturn:
  """Starts the worker in a private network namespace behind the relay on `address`; waits for it to end."""
  listener = _bind(address)
  launched = worker_launcher.launch(
      [binary, f'--port={_PORT.value}', f'--max_concurrent_computation_calls={concurrency}'],
      network=worker_launcher.ISOLATE, port=_PORT.value, listener=listener, tls_files=tls_files, watch_relay=True,
  )
  listener.close()  # the relay holds it: once the relay is gone, connections are refused, not left waiting
  outcome, _, reason = launched.status.partition(' ')
  if outcome != 'isolated':
    launched.process.wait()
    finite_flags.refuse(_no_namespace_refusal(reason or 'the launcher ended', tls_files is not None))
  worker = launched.process
  print(f'TFF worker serving on {_endpoint(address)} (pid {worker.pid}, in a private network namespace): {binary}',
        file=sys.stderr, flush=True)
  print(_who_can_connect(address, is_loopback, tls_files is not None), file=sys.stderr, flush=True)
  stopped_by = []

  def stop(signal_number, frame):
    del frame
    stopped_by.append(signal_number)
    worker.terminate()

  for signal_number in _STOP_SIGNALS:
    signal.signal(signal_number, stop)
  relay_ended = _stop_worker_when_the_relay_ends(launched.relay_alive, worker, stopped_by)
  status = worker.wait()
  if stopped_by:
    sys.exit(128 + stopped_by[0])
  if relay_ended.is_set():
    print(f'stopped the TFF worker (pid {worker.pid}): its relay on {_endpoint(address)} ended, so no connection '
          'could reach it any more', file=sys.stderr, flush=True)
    sys.exit(1)
  how = f'was killed by signal {-status}' if status < 0 else f'exited with status {status}'
  print(f'the TFF worker (pid {worker.pid}) {how}', file=sys.stderr, flush=True)
  sys.exit(128 - status if status < 0 else status)


def _stop_worker_when_the_relay_ends(relay_alive: int, worker: subprocess.Popen, stopped_by: list) -> threading.Event:
  """Starts a thread that waits for end-of-file on `relay_alive` (`worker_launcher.launch(watch_relay=True)`) and
  then, if the worker still runs and no stop signal came, sets the returned event and terminates the worker: the
  relay is the only way in, so a service whose relay ended would refuse every connection and never say why."""
  relay_ended = threading.Event()

  def watch():
    while os.read(relay_alive, 4096):
      pass
    os.close(relay_alive)
    if not stopped_by and _running(worker.pid):
      relay_ended.set()
      worker.terminate()

  threading.Thread(target=watch, name='relay-watch', daemon=True).start()
  return relay_ended


def _running(pid: int) -> bool:
  """Whether `pid` is a process that has not exited (Linux: neither gone nor a zombie). `Popen.poll` cannot tell
  from another thread while the main thread waits on the process."""
  try:
    with open(f'/proc/{pid}/stat') as stat:
      state = stat.read().rsplit(')', 1)[1].split()[0]
  except (FileNotFoundError, ProcessLookupError, IndexError):
    return False
  return state not in ('Z', 'X')


def main(argv: list[str]) -> None:
  """The `worker_service` binary: parses its flags (one-line refusals, exit status 2), chooses the worker binary and
  GPUs, then serves TFF's executor service on `--port` until stopped."""
  app.define_help_flags()  # --help, --helpfull: print the help and exit
  positional = finite_flags.parse_flags(argv)  # a bad value (NaN, inf included) ends here in one line, status 2
  if len(positional) > 1:
    finite_flags.refuse(f'unexpected positional arguments: {" ".join(positional[1:])}')
  logging.use_absl_handler()
  try:
    binary = worker_binaries.resolve(_WORKER_BINARY.value, name='--worker_binary')
    visible_gpus = gpu_placement.visible_gpus_setting(_GPUS.value, binary)
    tls_files = _tls_files()
    address, is_loopback = _listen_address()
    _check_exposure(is_loopback, tls_files is not None)
  except ValueError as error:
    finite_flags.refuse(error)
  if visible_gpus is not None:
    os.environ['CUDA_VISIBLE_DEVICES'] = visible_gpus
  concurrency = gpu_placement.client_concurrency(_MAX_CONCURRENT_COMPUTATION_CALLS.value)
  if _NETWORK_ISOLATION.value == 'off':
    _serve_exposed(binary, concurrency)
  _serve_isolated(binary, concurrency, address, is_loopback, tls_files)


if __name__ == '__main__':
  main(sys.argv)
