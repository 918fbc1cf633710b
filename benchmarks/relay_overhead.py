r"""Cost of `worker_service`'s relay and mutual TLS against a direct worker, side by side in one process.

  python -m benchmarks.relay_overhead [--rounds=10] [--clients_per_round=100] [--dimension=1000000]

Three `worker_service`s on this host, each driven through `set_remote_execution_context`, timed interleaved on the
same work (`timing.interleaved_medians`, after one warm-up call each), so drift in machine load hits all alike:
- direct: `--network_isolation=off`, TFF's `worker_binary` itself on a TCP port (what the service did before
  issue 45; plain gRPC);
- relay: the service's default, the worker in a private network namespace behind the relay on 127.0.0.1;
- relay + TLS: the relay terminating mutual TLS (certificates from `scripts/make_test_certificates.sh`), the driver
  on gRPC's secure channel.
Workloads:
- round: one FedAvg round of `--clients_per_round` digits clients (the client datasets travel to the worker as
  serialised graphs, the 2,410-parameter model there and back);
- aggregation: a `--dimension`-parameter float32 model sent to the worker, 10 clients each adding its own noise
  drawn there, their weighted mean back: what crosses the relay in a round of a model that size (8 MB at 1e6);
- transfer: 10 client values of `--dimension` parameters sent from the driver, their mean back (44 MB at 1e6):
  the relay's worst case, every byte through it.
Printed: median seconds, each relayed set-up / direct, the relay's CPU seconds per call (read from /proc), and the
load average before and after.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import subprocess  # pylint: disable=g-import-not-at-top
import sys  # pylint: disable=g-import-not-at-top
import tempfile  # pylint: disable=g-import-not-at-top

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import portpicker  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed calls per workload and set-up (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 100, 'Digits clients in the timed round.',
                                          lower_bound=1)
_DIMENSION = flags.DEFINE_integer('dimension', 1_000_000, 'Parameters of the aggregated value.', lower_bound=1)
_AGGREGATION_CLIENTS = 10
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SETUPS = ('direct', 'relay', 'relay + TLS')


def _start_services(certificates: str) -> dict:
  """{set-up: (service process, address)} of three services on this host (see the module docstring)."""
  worker = os.path.join(certificates, 'worker')
  setup_flags = {
      'direct': ['--network_isolation=off'],
      'relay': [],
      'relay + TLS': [f'--tls_cert={worker}/server.pem', f'--tls_key={worker}/server.key',
                      f'--tls_client_ca={worker}/client_ca.pem'],
  }
  services = {}
  for setup, extra in setup_flags.items():
    port = portpicker.pick_unused_port()
    process = subprocess.Popen(
        [sys.executable, '-m', 'tff_robust.runtime.worker_service', f'--port={port}', '--gpus=none', *extra],
        cwd=_REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    services[setup] = (process, f'localhost:{port}')
  return services


def _contexts(services: dict, certificates: str) -> dict:
  """{set-up: the execution context on its service} (each waits until its service answers)."""
  contexts = {}
  for setup, (_, address) in services.items():
    credentials = os.path.join(certificates, 'driver') if setup == 'relay + TLS' else None
    execution_context.set_remote_execution_context([address], credentials_dir=credentials)
    contexts[setup] = tff.framework.get_context_stack().current
  return contexts


def _relay_pid(service: subprocess.Popen) -> int:
  """The relay of a relayed service: the worker's only child (the service's child is the worker)."""
  def only_child(pid):
    with open(f'/proc/{pid}/task/{pid}/children') as children:
      (child,) = children.read().split()
    return int(child)
  return only_child(only_child(service.pid))


def _round_call(task):
  ids = task.train_data.client_ids
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
  process = algorithms.build_learning_process('fedavg', task.model_fn, algorithms.AlgorithmConfig(),
                                              clients_per_round=_CLIENTS_PER_ROUND.value)
  state = process.initialize()
  return lambda: process.next(state, cohort)


def _aggregation_call(dimension: int):
  model_type = tff.TensorType(np.float32, [dimension])

  @tff.tensorflow.computation(model_type, np.int32)
  def client_update(model, seed):
    return model + tf.random.stateless_normal([dimension], seed=tf.stack([seed, 0]), stddev=0.01)

  @tff.federated_computation(tff.FederatedType(model_type, tff.SERVER), tff.FederatedType(np.int32, tff.CLIENTS))
  def aggregate(model, seeds):
    updates = tff.federated_map(client_update, (tff.federated_broadcast(model), seeds))
    return tff.federated_mean(updates, tff.federated_map(tff.tensorflow.computation(
        lambda seed: tf.cast(seed % 3 + 1, tf.float32), np.int32), seeds))

  model = np.random.default_rng(0).normal(size=dimension).astype(np.float32)
  seeds = list(range(_AGGREGATION_CLIENTS))
  return lambda: aggregate(model, seeds)


def _transfer_call(dimension: int):
  @tff.federated_computation(tff.FederatedType(tff.TensorType(np.float32, [dimension]), tff.CLIENTS))
  def mean(values):
    return tff.federated_mean(values)

  rng = np.random.default_rng(1)
  values = [rng.normal(size=dimension).astype(np.float32) for _ in range(_AGGREGATION_CLIENTS)]
  return lambda: mean(values)


def _in(context, call):
  def call_in_context():
    with tff.framework.get_context_stack().install(context):
      call()
  return call_in_context


def relay_overhead() -> dict:
  """{workload: {set-up: median s, 'relay CPU': {relayed set-up: CPU s per call}}}."""
  with tempfile.TemporaryDirectory() as certificates:
    subprocess.run(['bash', os.path.join(_REPO, 'scripts', 'make_test_certificates.sh'), certificates, 'localhost'],
                   check=True, capture_output=True)
    services = _start_services(certificates)
    try:
      contexts = _contexts(services, certificates)
      relays = {setup: _relay_pid(process) for setup, (process, _) in services.items() if setup != 'direct'}
      task = tasks.create_task('digits', client_epochs=1, client_batch_size=16, seed=0)
      workloads = {
          f'FedAvg round, {_CLIENTS_PER_ROUND.value} digits clients': _round_call(task),
          f'aggregation: {_DIMENSION.value:.0e}-parameter model in, mean of {_AGGREGATION_CLIENTS} clients out':
              _aggregation_call(_DIMENSION.value),
          f'transfer: {_AGGREGATION_CLIENTS} values of {_DIMENSION.value:.0e} parameters in, mean out':
              _transfer_call(_DIMENSION.value),
      }
      results = {}
      for workload, call in workloads.items():
        relay_start = {setup: process_stats.cpu_seconds(pid) for setup, pid in relays.items()}
        medians = timing.interleaved_medians({setup: _in(contexts[setup], call) for setup in _SETUPS}, _ROUNDS.value)
        calls = _ROUNDS.value + 1  # with the warm-up
        medians['relay CPU'] = {setup: (process_stats.cpu_seconds(pid) - relay_start[setup]) / calls
                                for setup, pid in relays.items()}
        results[workload] = medians
      return results
    finally:
      for process, _ in services.values():
        process.terminate()
        process.wait()


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  load_before = os.getloadavg()[0]
  results = relay_overhead()
  print(f'{_ROUNDS.value} interleaved calls per set-up after a warm-up; 1-minute load average {load_before:.2f} '
        f'before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores')
  for workload, result in results.items():
    ratios = ', '.join(f'{setup} / direct = {result[setup] / result["direct"]:.3f}' for setup in _SETUPS[1:])
    relay_cpu = ', '.join(f'{setup} {1000 * seconds:.1f} ms' for setup, seconds in result['relay CPU'].items())
    print(f'{workload}: direct {result["direct"]:.3f} s, relay {result["relay"]:.3f} s, relay + TLS '
          f'{result["relay + TLS"]:.3f} s; {ratios}; relay CPU per call: {relay_cpu}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
