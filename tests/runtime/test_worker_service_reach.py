"""Who can reach a `worker_service`, tried from another network namespace of this machine ("another host", joined
to this one by a veth pair: `network_namespaces`): with its defaults no one there; with `--listen` and mutual TLS only
a client holding a certificate of the service's client CA, every other connection refused and logged in one line;
such a driver there trains on two TLS workers as the local worker does (slow).

Each client is `tests.runtime.grpc_probe`, a gRPC call of TFF's executor service started inside that namespace.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import repository
from tests.runtime import network_namespaces
from tests.runtime import worker_services
from tests.simulation import algorithm_rounds
from tests.simulation import proc_files

_REACHED = ('OK', 'NOT_FOUND')  # TFF's executor service answered the probe's empty request (see grpc_probe)


@pytest.fixture(scope='module')
def peer():
  reason = network_namespaces.unavailable_reason() or worker_services.private_network_refusal()
  if reason:
    pytest.skip(reason)
  with network_namespaces.peer_namespace() as namespace:
    yield namespace


@pytest.fixture(scope='module')
def certificates(tmp_path_factory, peer):
  """{'ours': certificates for the host's address on the link, 'theirs': another cluster's}."""
  root = tmp_path_factory.mktemp('certificates')
  return {name: worker_services.make_certificates(root / name, peer.host_address) for name in ('ours', 'theirs')}


@pytest.fixture
def services(tmp_path):
  """Starts services (`start(*flags)`, returning each once it serves); stops them all after, and checks that each
  worker stopped with its service."""
  started = []

  def start(*flags):
    service = worker_services.Service(tmp_path / f'service_{len(started)}.log', *flags).wait_until_serving()
    started.append((service, service.worker_pid()))
    return service

  yield start
  for service, worker in started:
    service.stop()
    assert not os.path.exists(f'/proc/{worker}'), 'a worker outlived its service'


def _probe(command_prefix, address, *tls_files) -> dict:
  """How a gRPC call of the executor service at `address` ended: {'code': ..., 'details': ...}."""
  flags = [f'--{name}={path}' for name, path in zip(('ca', 'cert', 'key'), tls_files)]
  result = command_prefix(sys.executable, '-m', 'tests.runtime.grpc_probe', f'--address={address}', *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.splitlines()[-1])


def _from_peer(peer, address, *tls_files) -> dict:
  return _probe(lambda *command: peer.run(*command, cwd=repository.ROOT, timeout=120), address, *tls_files)


def _from_here(address) -> dict:
  return _probe(lambda *command: subprocess.run(
      command, cwd=repository.ROOT, capture_output=True, text=True, timeout=120), address)


def test_a_default_service_serves_this_host_only(peer, services):
  service = services()
  assert _from_here(f'127.0.0.1:{service.port}')['code'] in _REACHED  # it serves (so the checks below can fail)
  from_peer = _from_peer(peer, f'{peer.host_address}:{service.port}')
  assert from_peer['code'] == 'UNAVAILABLE', from_peer
  # This namespace listens on that port at loopback only; the worker's own port is in a namespace of its own.
  listening = [address for address in proc_files.listening_tcp_sockets('/proc/self/net').values()
               if address[1] == service.port]
  assert listening and all(proc_files.is_loopback(host) for host, _ in listening), listening
  assert os.readlink(f'/proc/{service.worker_pid()}/ns/net') != os.readlink('/proc/self/ns/net')


def test_the_peer_reaches_what_listens_on_the_link_unauthenticated_and_the_service_warns(peer, services):
  # What the test above would see of TFF's own way, a worker_binary on every interface: the probe can tell.
  exposed = services('--network_isolation=off')
  assert _from_peer(peer, f'{peer.host_address}:{exposed.port}')['code'] in _REACHED
  assert len(exposed.lines('WARNING: this TFF worker is unauthenticated')) == 1
  insecure = services(f'--listen={peer.host_address}', '--insecure_listen')
  assert _from_peer(peer, f'{peer.host_address}:{insecure.port}')['code'] in _REACHED
  (warning,) = insecure.lines('WARNING: this TFF worker is unauthenticated')
  assert f'reachable on {peer.host_address}:{insecure.port}' in warning


def test_with_listen_and_tls_only_a_client_certificate_of_the_client_ca_reaches_the_worker(peer, certificates,
                                                                                           services):
  ours, theirs = certificates['ours'], certificates['theirs']
  service = services(f'--listen={peer.host_address}', *worker_services.tls_flags(ours))
  address = f'{peer.host_address}:{service.port}'
  refused = {
      'plain gRPC': ((), ('WRONG_VERSION_NUMBER', 'HTTP_REQUEST')),
      'no client certificate': ((f'{ours}/ca.pem',), ('PEER_DID_NOT_RETURN_A_CERTIFICATE',)),
      'a certificate of another CA': ((f'{ours}/ca.pem', f'{theirs}/driver/client.pem', f'{theirs}/driver/client.key'),
                                      ('CERTIFICATE_VERIFY_FAILED',)),
  }
  for client, (tls_files, reasons) in refused.items():
    logged = len(service.lines('refused a connection'))
    outcome = _from_peer(peer, address, *tls_files)
    assert outcome['code'] == 'UNAVAILABLE', (client, outcome)
    lines = service.new_lines('refused a connection', logged)
    assert lines, f'{client}: no refusal logged'
    for line in lines:  # one line per refused connection, naming the client's address and the reason
      assert f'refused a connection from {peer.peer_address}:' in line and any(r in line for r in reasons), line
  accepted = _from_peer(peer, address, f'{ours}/ca.pem', f'{ours}/driver/client.pem', f'{ours}/driver/client.key')
  assert accepted['code'] in _REACHED, accepted
  (line,) = service.lines('accepted a connection')
  assert f'from {peer.peer_address}:' in line and 'tff_robust driver' in line


@pytest.mark.slow
def test_a_driver_in_the_peer_namespace_runs_rfa_and_secure_delta_fl_on_two_tls_workers_as_locally(
    peer, certificates, services, tmp_path):
  ours = certificates['ours']
  workers = [services(f'--listen={peer.host_address}', *worker_services.tls_flags(ours)) for _ in range(2)]
  local = tff.framework.get_context_stack().current  # the session's worker
  task, _, cohort = algorithm_rounds.task_and_cohort()
  processes = {name: algorithm_rounds.build_process(name, task) for name in ('rfa', 'delta_fl')}  # secure quantile
  initial = {}
  for name, process in processes.items():
    with tff.framework.get_context_stack().install(local):
      initial[name] = algorithm_rounds.flat_model_weights(process, process.initialize())
    np.savez(tmp_path / f'{name}_initial.npz', *initial[name])
  driver = peer.run(sys.executable, '-m', 'tests.runtime.remote_rounds',
                    f'--addresses={",".join(f"{peer.host_address}:{worker.port}" for worker in workers)}',
                    f'--credentials={ours}/driver', f'--directory={tmp_path}', *processes, cwd=repository.ROOT,
                    timeout=1200)
  assert driver.returncode == 0, driver.stderr[-3000:]
  for name, process in processes.items():
    expected, _ = algorithm_rounds.run_rounds(local, process, cohort, initial_weights=initial[name])
    with np.load(tmp_path / f'{name}.npz') as remote:
      remote_weights = [remote[key] for key in remote.files]
    algorithm_rounds.assert_close(remote_weights, algorithm_rounds.flat_model_weights(process, expected), name)
    assert not np.allclose(remote_weights[0], initial[name][0])  # it trained
  for worker in workers:  # both computed, reached from the peer through TLS only
    accepted = worker.lines('accepted a connection')
    assert accepted and all(f'from {peer.peer_address}:' in line for line in accepted), accepted
