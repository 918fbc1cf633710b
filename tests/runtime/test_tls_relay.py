"""`tls_relay` alone, in a process of its own as the worker launcher runs it, in front of an echo server instead of a
worker: a flood of connections that send nothing does not stop it."""

import os
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest

from tests import repository
from tests.runtime import worker_services
from tff_robust.runtime import tls_relay

_OPEN_FILES = 64  # the relay's limit: fewer than the flood's connections
_FLOOD = 80

# The relay of `worker_launcher`, with a low open-file limit, on a free loopback port it prints.
_RELAY_SCRIPT = '''
import resource, socket, sys
from tff_robust.runtime import tls_relay, worker_tls
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[5]), int(sys.argv[5])))
listener = socket.create_server(('127.0.0.1', 0))
print(listener.getsockname()[1], flush=True)
tls_relay.serve_forever(listener, int(sys.argv[1]), worker_tls.server_context(*sys.argv[2:5]))
'''


@pytest.fixture
def echo_port():
  """A loopback server that echoes each connection's bytes (the worker's stand-in); its port."""
  server = socket.create_server(('127.0.0.1', 0))

  def echo(connection):
    with connection:
      while data := connection.recv(1024):
        connection.sendall(data)

  def serve():
    while True:
      try:
        connection, _ = server.accept()
      except OSError:  # closed at the end of the test
        return
      threading.Thread(target=echo, args=(connection,), daemon=True).start()

  threading.Thread(target=serve, daemon=True).start()
  yield server.getsockname()[1]
  server.close()


def _echo_through_tls(port: int, driver: str) -> bytes:
  context = ssl.create_default_context(cafile=os.path.join(driver, 'ca.pem'))
  context.load_cert_chain(os.path.join(driver, 'client.pem'), os.path.join(driver, 'client.key'))
  with socket.create_connection(('127.0.0.1', port), timeout=30) as raw:
    with context.wrap_socket(raw, server_hostname='localhost') as tls:
      tls.sendall(b'ping')
      return tls.recv(4)


def test_a_flood_of_silent_connections_beyond_the_open_file_limit_does_not_stop_the_relay(tmp_path, echo_port):
  certificates = worker_services.make_certificates(tmp_path / 'certificates', 'localhost')
  worker = os.path.join(certificates, 'worker')
  relay = subprocess.Popen(
      [sys.executable, '-c', _RELAY_SCRIPT, str(echo_port), f'{worker}/server.pem', f'{worker}/server.key',
       f'{worker}/client_ca.pem', str(_OPEN_FILES)],
      cwd=repository.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
  )
  try:
    port = int(relay.stdout.readline())
    driver = os.path.join(certificates, 'driver')
    assert _echo_through_tls(port, driver) == b'ping'
    flood = [socket.create_connection(('127.0.0.1', port)) for _ in range(_FLOOD)]
    time.sleep(1.0)  # the relay accepts what it can of the flood
    assert relay.poll() is None, relay.stderr.read()[-3000:]
    for connection in flood:
      connection.close()
    assert _echo_through_tls(port, driver) == b'ping'
    assert relay.poll() is None
  finally:
    relay.kill()
    _, stderr = relay.communicate(timeout=30)
  assert 'Traceback' not in stderr, stderr[-3000:]


def test_a_flood_of_refusals_is_logged_one_by_one_up_to_the_limit_then_counted():
  lines, now = [], [0.0]
  limited = tls_relay._LimitedLog('refused connections', max_lines=3, window=60.0, clock=lambda: now[0],
                                  write=lines.append)
  for i in range(7):
    limited(f'refused {i}')
  assert lines == ['refused 0', 'refused 1', 'refused 2']
  now[0] = 59.0
  limited.flush()  # the window has not ended
  assert len(lines) == 3
  now[0] = 61.0
  limited.flush()
  assert lines[3:] == ['... and 4 more refused connections in the last 61 s, not logged one by one']
  limited('refused 7')  # a new window logs again
  assert lines[4:] == ['refused 7']
  now[0] = 200.0
  limited.flush()  # nothing was suppressed: nothing to say
  assert len(lines) == 5
