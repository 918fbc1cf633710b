"""The mutual-TLS front of a network-isolated TFF worker: TLS in, the worker's plain gRPC out.

TFF 0.87's `worker_binary` serves plain gRPC only. `worker_service --tls_cert=... --tls_key=... --tls_client_ca=...`
starts it in a private network namespace (`worker_launcher`) and runs this relay beside it: the relay accepts on a
socket of the host's network (bound before the namespace was entered), completes a TLS handshake in which the
client must present a certificate that the client CA signed (`worker_tls.server_context`: ALPN `h2`, TLS >= 1.2),
and only then opens a connection to the worker's port and copies the decrypted bytes both ways. A connection that
fails the handshake (no certificate, another authority's, an expired one, plain text, nothing sent within
`HANDSHAKE_TIMEOUT_SECONDS`) never reaches the worker and is logged in one line; an accepted one is logged with its
certificate's subject.

Floods. At most `MAX_PENDING_HANDSHAKES` connections are in their handshake at once; further ones wait, unaccepted,
in the listener's backlog until one ends (within the timeout). So connections that send nothing cost the relay a
bounded number of open files, and an accept that fails anyway (out of open files or memory: EMFILE, ENFILE,
ENOBUFS, ENOMEM) is logged and retried after `ACCEPT_RETRY_SECONDS`, never the end of the relay (until 2026-12-05
it was: a flood of silent connects as large as the open-file limit stopped it for good). Such a flood still
delays the clients that arrive during it, by up to the handshake timeout. Nor does a flood flood the log: refusals
and failed accepts are logged one by one up to `MAX_LOGGED_PER_WINDOW` of each a `LOG_WINDOW_SECONDS` window, and
the rest as one line of their count when the window ends (`_LimitedLog`); accepted connections are always logged.

One asyncio event loop serves every connection: OpenSSL's connection objects must not be read and written from
two threads at once, which the launcher's thread-per-direction relay for plain streams would do. The standard
library's `ssl` does all cryptography.

No TensorFlow here: the relay is forked by the worker launcher.
"""

import asyncio
import socket
import ssl
import sys
import time
from typing import NoReturn

HANDSHAKE_TIMEOUT_SECONDS = 10.0
MAX_PENDING_HANDSHAKES = 64
ACCEPT_RETRY_SECONDS = 0.1
MAX_LOGGED_PER_WINDOW = 10
LOG_WINDOW_SECONDS = 60.0
_WORKER_CONNECT_TIMEOUT_SECONDS = 60.0
_CHUNK_BYTES = 1 << 20


def log(line: str) -> None:
  """One line on stderr (the service's), with the local time: what the relay accepted or refused."""
  print(f'{time.strftime("%Y-%m-%d %H:%M:%S")} worker_service: {line}', file=sys.stderr, flush=True)


class _LimitedLog:
  """Logs up to `max_lines` lines of one kind a `window`-second window; the rest as one line of their count, said
  by `flush` once the window has ended (the relay calls it every window)."""

  def __init__(self, kind: str, max_lines: int = MAX_LOGGED_PER_WINDOW, window: float = LOG_WINDOW_SECONDS,
               clock=time.monotonic, write=log):
    self._kind, self._max_lines, self._window, self._clock, self._write = kind, max_lines, window, clock, write
    self._start, self._logged, self._suppressed = clock(), 0, 0

  def __call__(self, line: str) -> None:
    self.flush()
    if self._logged < self._max_lines:
      self._logged += 1
      self._write(line)
    else:
      self._suppressed += 1

  def flush(self) -> None:
    """Starts a new window if this one has ended, first saying how many lines it did not log."""
    if self._clock() - self._start < self._window:
      return
    if self._suppressed:
      elapsed = self._clock() - self._start
      self._write(f'... and {self._suppressed} more {self._kind} in the last {elapsed:.0f} s, not logged one by one')
    self._start, self._logged, self._suppressed = self._clock(), 0, 0


def _endpoint(address) -> str:
  host, port = address[:2]
  return f'[{host}]:{port}' if ':' in host else f'{host}:{port}'


def _subject(certificate: dict) -> str:
  """'commonName=..., organizationName=...' of a certificate as `ssl` decodes it."""
  return ', '.join(f'{key}={value}' for entry in certificate.get('subject', ()) for key, value in entry) or '(none)'


async def _open_worker(port: int):
  """Streams to the worker on this network namespace's loopback, waiting while the worker starts."""
  deadline = time.monotonic() + _WORKER_CONNECT_TIMEOUT_SECONDS
  while True:
    try:
      return await asyncio.open_connection('127.0.0.1', port, limit=_CHUNK_BYTES)
    except ConnectionRefusedError:
      if time.monotonic() > deadline:
        raise
      await asyncio.sleep(0.01)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
  """Copies one direction until end of file or an error, then closes the other end (which ends the other copy)."""
  try:
    while chunk := await reader.read(_CHUNK_BYTES):
      writer.write(chunk)
      await writer.drain()
  except OSError:
    pass
  finally:
    writer.close()


async def _handshake(connection: socket.socket, context: ssl.SSLContext):
  """Streams over the TLS session of the accepted `connection`, once its handshake succeeded (OSError if not)."""
  loop = asyncio.get_running_loop()
  reader = asyncio.StreamReader(limit=_CHUNK_BYTES)
  protocol = asyncio.StreamReaderProtocol(reader)
  transport, _ = await loop.connect_accepted_socket(
      lambda: protocol, connection, ssl=context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_SECONDS)
  return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def _relay(connection: socket.socket, peer: str, port: int, context: ssl.SSLContext,
                 handshake_slots: asyncio.Semaphore, log_refusal: _LimitedLog) -> None:
  """Relays one accepted connection to the worker if its TLS handshake succeeds; logs what it did (a refusal
  through `log_refusal`). Releases its slot of `handshake_slots` (taken before the accept) when the handshake ends."""
  try:
    client_reader, client_writer = await _handshake(connection, context)
  except OSError as error:  # ssl.SSLError, a timeout (ConnectionAbortedError saying so), the client hanging up
    reason = (f'TLS handshake failed: {error}' if str(error) else
              'the client closed the connection during the TLS handshake (does it trust this worker\'s certificate?)')
    log_refusal(f'refused a connection from {peer}: {reason}')
    return
  finally:
    handshake_slots.release()
  log(f'accepted a connection from {peer} (client certificate {_subject(client_writer.get_extra_info("peercert"))})')
  try:
    worker_reader, worker_writer = await _open_worker(port)
  except OSError as error:
    log(f'closed the connection from {peer}: the worker is not reachable ({error})')
    client_writer.transport.abort()
    return
  await asyncio.gather(_copy(client_reader, worker_writer), _copy(worker_reader, client_writer))


async def _flush_every_window(*limited_logs: _LimitedLog) -> NoReturn:
  while True:
    await asyncio.sleep(LOG_WINDOW_SECONDS)
    for limited in limited_logs:
      limited.flush()


async def _serve(listener: socket.socket, port: int, context: ssl.SSLContext) -> None:
  loop = asyncio.get_running_loop()
  listener.setblocking(False)
  relays = set()  # the event loop keeps only weak references to tasks
  handshake_slots = asyncio.Semaphore(MAX_PENDING_HANDSHAKES)
  log_refusal, log_accept_failure = _LimitedLog('refused connections'), _LimitedLog('failed accepts')
  relays.add(asyncio.create_task(_flush_every_window(log_refusal, log_accept_failure)))  # a strong reference
  while True:
    await handshake_slots.acquire()
    try:
      connection, address = await loop.sock_accept(listener)
    except OSError as error:  # out of open files or memory for now (see the module docstring)
      handshake_slots.release()
      log_accept_failure(f'could not accept a connection ({error}); retrying in {ACCEPT_RETRY_SECONDS} s')
      await asyncio.sleep(ACCEPT_RETRY_SECONDS)
      continue
    relay = asyncio.create_task(
        _relay(connection, _endpoint(address), port, context, handshake_slots, log_refusal))
    relays.add(relay)
    relay.add_done_callback(relays.discard)


def serve_forever(listener: socket.socket, port: int, context: ssl.SSLContext) -> NoReturn:
  """Accepts TLS connections on `listener` (see the module docstring) and relays each to the worker's `port`."""
  asyncio.run(_serve(listener, port, context))
  raise AssertionError('the relay stopped serving')
