"""A local run's TFF worker is reachable from no other host; where it cannot be isolated, it says so once."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from tests import repository
from tests.experiments import train_runs
from tests.simulation import proc_files
from tff_robust.runtime import execution_context
from tff_robust.runtime import worker_launcher

_WARNING_NAME = 'ExposedWorkerWarning'  # a literal, so that this test also runs (and fails) on code without it


def _wait_for_worker_while_training(run, output_dir, timeout=300.0):
  """The pid of `run`'s worker_binary, once `run` has released its first round (so it is training)."""
  deadline = time.monotonic() + timeout
  metrics = output_dir / 'metrics.csv'
  while True:
    assert run.poll() is None, 'the run ended before its worker was inspected'
    assert time.monotonic() < deadline, f'no trained round in {metrics} after {timeout}s'
    workers = [pid for pid in proc_files.descendants(run.pid) if proc_files.command_name(pid) == 'worker_binary']
    if workers and metrics.exists() and len(metrics.read_text().splitlines()) > 1:
      assert len(workers) == 1, f'expected one worker_binary under the run, found {workers}'
      return workers[0]
    time.sleep(0.2)


@pytest.mark.slow
def test_a_training_run_exposes_no_port_of_its_worker_to_other_hosts(tmp_path):
  stderr_path = tmp_path / 'stderr.txt'
  # The run is killed, so its worker's private directory (socket, log) stays: keep it out of the real /tmp.
  run_tmpdir = tempfile.mkdtemp(prefix='isolation_test_')
  with open(stderr_path, 'w') as stderr:
    run = subprocess.Popen(
        [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', '--experiment_name=run', '--task=digits',
         '--algorithm=rfa', '--clients_per_round=5', '--total_rounds=10000', '--rounds_per_eval=10000'],
        cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        env=dict(os.environ, TMPDIR=run_tmpdir),
    )
  try:
    worker = _wait_for_worker_while_training(run, tmp_path / 'run')
    # The worker's own view of its namespace shows that it does listen (the check below is not vacuous) ...
    worker_sockets = proc_files.socket_inodes(worker)
    listening = {inode: address for inode, address in
                 proc_files.listening_tcp_sockets(f'/proc/{worker}/net').items() if inode in worker_sockets}
    assert listening, f'worker_binary {worker} has no listening TCP socket'
    # ... and the host's view (this test's namespace) shows which of those sockets other hosts could reach.
    host_view = proc_files.listening_tcp_sockets('/proc/self/net')
    exposed = sorted(f'[{host_view[inode][0]}]:{host_view[inode][1]}' for inode in listening
                     if inode in host_view and not proc_files.is_loopback(host_view[inode][0]))
  finally:
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=60)
    shutil.rmtree(run_tmpdir)
  warnings = [line for line in stderr_path.read_text().splitlines() if _WARNING_NAME in line]
  if exposed and warnings:
    assert len(warnings) == 1, warnings
    pytest.skip(f'network isolation unavailable here; the run warned: {warnings[0]}')
  assert not exposed, f'worker_binary {worker} listens on {exposed}, reachable from other hosts'


def test_the_session_worker_has_a_network_of_loopback_only_and_a_private_socket(tff_worker):
  if not tff_worker.network_isolated:
    pytest.skip(f'network isolation unavailable here: {tff_worker.exposure_reason}')
  assert os.readlink(f'/proc/{tff_worker.pid}/ns/net') != os.readlink('/proc/self/ns/net')
  with open(f'/proc/{tff_worker.pid}/net/dev') as interfaces:
    names = [line.split(':')[0].strip() for line in list(interfaces)[2:]]
  assert names == ['lo']
  assert tff_worker.address.startswith('unix:')
  socket_dir = os.path.dirname(tff_worker.address.removeprefix('unix:'))
  assert os.stat(socket_dir).st_mode & 0o777 == 0o700  # no other user of this host can connect either


def test_an_unknown_isolation_mode_is_refused_by_name():
  with pytest.raises(ValueError, match=r"network_isolation .*'auto', 'off', 'required'.*'on'"):
    execution_context.LocalWorker(network_isolation='on')


@pytest.mark.parametrize('network', [worker_launcher.ISOLATE_OR_EXPOSE, worker_launcher.EXPOSE])
def test_a_tcp_listener_is_given_to_an_isolated_worker_only(network):
  """A worker that may fall back to exposure must not also get a relay on the caller's TCP socket."""
  with socket.socket() as listener:
    with pytest.raises(ValueError, match=f"network must be 'isolate' with a listener, got '{network}'"):
      worker_launcher.launch(['/bin/true'], network=network, port=1, listener=listener)
  with pytest.raises(ValueError, match='exactly one of unix_socket and listener'):
    worker_launcher.launch(['/bin/true'], network=worker_launcher.ISOLATE, port=1)


_WITHOUT_NAMESPACES = textwrap.dedent('''
    import json, warnings
    import numpy as np
    import tensorflow_federated as tff
    from tff_robust.runtime import execution_context

    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      worker = execution_context.set_local_execution_context()
      second = execution_context.LocalWorker()
      second.stop()

    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def mean(values):
      return tff.federated_mean(values)

    try:
      execution_context.LocalWorker(network_isolation='required')
      refusal = None
    except execution_context.NetworkIsolationError as error:
      refusal = str(error)
    print(json.dumps(dict(
        isolated=worker.network_isolated, port=worker.port, mean=float(mean([1.0, 2.0, 6.0])), refusal=refusal,
        warnings=[str(w.message) for w in caught if issubclass(w.category, execution_context.ExposedWorkerWarning)],
    )))
''')


def test_where_namespaces_are_refused_the_worker_warns_once_and_required_refuses():
  # A user namespace with no id mapping holds no capability and may create no namespace: as on a kernel or
  # in a container that forbids them.
  if shutil.which('unshare') is None or subprocess.run(['unshare', '--user', 'true']).returncode != 0:
    pytest.skip('cannot start a process without the right to create namespaces (`unshare --user` fails)')
  result = subprocess.run(
      ['unshare', '--user', sys.executable, '-c', _WITHOUT_NAMESPACES], cwd=repository.ROOT,
      capture_output=True, text=True, timeout=300,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.splitlines()[-1])
  assert not report['isolated']
  assert report['mean'] == 3.0
  assert len(report['warnings']) == 1, report['warnings']  # two exposed workers, one warning
  assert f'port {report["port"]} on every network interface' in report['warnings'][0]
  assert 'namespace' in report['warnings'][0]  # and why
  assert 'cannot run network-isolated' in report['refusal'] and 'namespace' in report['refusal']
