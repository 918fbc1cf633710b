r"""Cost of the local worker's network isolation: round time through the isolated worker / an exposed one.

  python -m benchmarks.isolation_cost [--task=emnist_cnn] [--algorithms=fedavg,rfa] [--rounds=10]

Two workers run side by side in one process: one in a private network namespace, reached through the
launcher's Unix-socket relay (`network_isolation='required'`, the default where the kernel allows it), and
one listening directly on a TCP port (`'off'`, what TFF does). Each algorithm's rounds alternate between the
two on the same cohort and initial model, so drift in machine load hits both alike; the result is the median
isolated / exposed round time per algorithm. Every round sends the server state (the model) to the worker
and back, so the default 1.2M-parameter EMNIST CNN is the transfer-heavy case, and RFA (several secure
averages per round) the call-heavy one. On a busy machine wall times are noisy (a few percent either way), so
it also reports the relay's CPU time per round, a number load hardly moves.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import warnings  # pylint: disable=g-import-not-at-top

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_TASK = flags.DEFINE_enum('task', 'emnist_cnn', tasks.TASK_NAMES, 'Task (synthetic data where it has some).')
_ALGORITHMS = flags.DEFINE_list('algorithms', ['fedavg', 'rfa'], 'Algorithms to time.')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds per algorithm and worker (after one warm-up).',
                               lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)


def _context_on(worker: execution_context.LocalWorker):
  """The execution context `set_remote_execution_context` installs for `worker`, to install per call."""
  execution_context.set_remote_execution_context([worker.address])
  return tff.framework.get_context_stack().current


def _on(context, call):
  def call_in_context():
    with tff.framework.get_context_stack().install(context):
      call()
  return call_in_context


def _relay_pid(worker: execution_context.LocalWorker) -> int:
  """The isolated worker's relay: its only child process (`worker_launcher`)."""
  with open(f'/proc/{worker.pid}/task/{worker.pid}/children') as children:
    (relay,) = children.read().split()
  return int(relay)


def isolation_round_time_ratios() -> dict:
  """{algorithm: {'isolated': s, 'exposed': s, 'ratio': isolated / exposed, 'relay_cpu': s}} per algorithm:
  median round times, and the relay's CPU seconds per round."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', execution_context.ExposedWorkerWarning)
    workers = {'isolated': execution_context.LocalWorker(network_isolation='required'),
               'exposed': execution_context.LocalWorker(network_isolation='off')}
  try:
    contexts = {name: _context_on(worker) for name, worker in workers.items()}
    relay = _relay_pid(workers['isolated'])
    task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=20, seed=0, use_synthetic_data=True)
    ids = task.train_data.client_ids
    cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
    config = algorithms.AlgorithmConfig(client_learning_rate=0.01)
    results = {}
    for algorithm in _ALGORITHMS.value:
      process = algorithms.build_learning_process(algorithm, task.model_fn, config)
      initial = process.initialize()
      states = dict.fromkeys(workers, initial)

      def run_round(name, process=process, states=states):
        states[name] = process.next(states[name], cohort).state

      relay_start = process_stats.cpu_seconds(relay)
      medians = timing.interleaved_medians(
          {name: _on(contexts[name], lambda name=name: run_round(name)) for name in workers}, _ROUNDS.value
      )
      relay_cpu = (process_stats.cpu_seconds(relay) - relay_start) / (_ROUNDS.value + 1)  # with the warm-up
      results[algorithm] = dict(medians, ratio=medians['isolated'] / medians['exposed'], relay_cpu=relay_cpu)
    return results
  finally:
    for worker in workers.values():
      worker.stop()


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  for algorithm, result in isolation_round_time_ratios().items():
    print(f'{algorithm} on {_TASK.value} (synthetic data), {_CLIENTS_PER_ROUND.value} clients, median of '
          f'{_ROUNDS.value} rounds: isolated worker {result["isolated"]:.3f} s, exposed worker '
          f'{result["exposed"]:.3f} s, isolated / exposed = {result["ratio"]:.3f}; the relay\'s CPU time '
          f'{1000 * result["relay_cpu"]:.1f} ms per round ({result["relay_cpu"] / result["isolated"]:.2%} of it)')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
