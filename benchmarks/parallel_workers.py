r"""Speed-up from sharding a round over two TFF workers: 2 workers on 2 cores / 1 worker on 1 core.

  python -m benchmarks.parallel_workers [--algorithms=fedavg] [--clients_per_round=200] [--client_epochs=5] \
      [--rounds=3] [--quick]

Three local workers run side by side in one process: one pinned to core 0 (every thread, as `taskset -a`
does), and two pinned to cores 0 and 1 that share each round's cohort (`execution_context.
set_remote_execution_context` with both addresses). Rounds alternate between the two set-ups on the same
cohort and initial model, so drift in machine load hits both alike. Per algorithm it prints the median round
time of each, their ratio (ideal 0.5 for client work that dominates the round), the workers' CPU seconds per
round, and how often the two sharded workers ran at once (`process_stats.BusyOverlap`: 0 when the shards run
one after another, 1 when in parallel all along). The cohort is CPU-heavy on purpose: digits clients training
several epochs, so client work dominates the model and data transfers. The machine's load average is printed
beside the numbers: other work on the two cores lowers the speed-up.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import statistics  # pylint: disable=g-import-not-at-top
import time  # pylint: disable=g-import-not-at-top

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import tasks  # pylint: disable=g-import-not-at-top

_ALGORITHMS = flags.DEFINE_list('algorithms', ['fedavg'], 'Algorithms to time.')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 200, 'Cohort size.', lower_bound=2)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs', 5, 'Local epochs per client (the client work).',
                                      lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed rounds per set-up and algorithm (after one warm-up).',
                               lower_bound=1)
_QUICK = flags.DEFINE_bool('quick', False, 'A small setting for a smoke run: 40 clients, 2 epochs, 1 round.')

_ONE, _TWO = '1 worker', '2 workers'


def _context_on(workers) -> object:
  """The execution context `set_remote_execution_context` installs for `workers`, to install per call."""
  execution_context.set_remote_execution_context([worker.address for worker in workers])
  return tff.framework.get_context_stack().current


def _timed_round(context, process, state, cohort, pids):
  """(new state, wall seconds, CPU seconds per pid, busy overlap of the pids) of one round in `context`."""
  cpu_before = [process_stats.cpu_seconds(pid) for pid in pids]
  with tff.framework.get_context_stack().install(context), process_stats.BusyOverlap(pids) as busy:
    start = time.perf_counter()
    state = process.next(state, cohort).state
    wall = time.perf_counter() - start
  cpu = [process_stats.cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before)]
  return state, wall, cpu, busy.overlap


def parallel_round_times(algorithm_names, clients_per_round: int, client_epochs: int, rounds: int) -> dict:
  """{algorithm: {set-up: {'wall': median s, 'cpu': [median CPU s per worker], 'overlap': median}}}."""
  if len(os.sched_getaffinity(0)) < 2:
    raise RuntimeError(f'this benchmark needs two cores; this process may use {sorted(os.sched_getaffinity(0))}')
  core_a, core_b = sorted(os.sched_getaffinity(0))[:2]
  workers = [execution_context.LocalWorker() for _ in range(3)]
  try:
    for worker, core in zip(workers, (core_a, core_a, core_b)):
      process_stats.pin_to_cores(worker.pid, {core})
    setups = {_ONE: workers[:1], _TWO: workers[1:]}
    contexts = {name: _context_on(members) for name, members in setups.items()}
    task = tasks.create_task('digits', client_epochs=client_epochs, client_batch_size=10, seed=0)
    ids = task.train_data.client_ids
    cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(clients_per_round)]
    config = algorithms.AlgorithmConfig(client_learning_rate=0.05)
    results = {}
    for algorithm in algorithm_names:
      process = algorithms.build_learning_process(algorithm, task.model_fn, config)
      states = dict.fromkeys(setups, process.initialize())
      samples = {name: [] for name in setups}
      for repeat in range(rounds + 1):  # the first round of each set-up warms it up
        for name, members in setups.items():
          pids = [worker.pid for worker in members]
          states[name], wall, cpu, overlap = _timed_round(contexts[name], process, states[name], cohort, pids)
          if repeat:
            samples[name].append((wall, cpu, overlap))
      results[algorithm] = {
          name: {'wall': statistics.median(s[0] for s in runs),
                 'cpu': [statistics.median(s[1][i] for s in runs) for i in range(len(setups[name]))],
                 'overlap': statistics.median(s[2] for s in runs)}
          for name, runs in samples.items()
      }
    return results
  finally:
    for worker in workers:
      worker.stop()


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  clients, epochs, rounds = ((40, 2, 1) if _QUICK.value else
                             (_CLIENTS_PER_ROUND.value, _CLIENT_EPOCHS.value, _ROUNDS.value))
  load_before = os.getloadavg()[0]
  results = parallel_round_times(_ALGORITHMS.value, clients, epochs, rounds)
  print(f'digits, {clients} clients x {epochs} epochs, median of {rounds} round(s); load average '
        f'{load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores')
  for algorithm, result in results.items():
    one, two = result[_ONE], result[_TWO]
    cpu_one = ', '.join(f'{cpu:.2f}' for cpu in one['cpu'])
    cpu_two = ', '.join(f'{cpu:.2f}' for cpu in two['cpu'])
    print(f'{algorithm}: 1 worker on 1 core {one["wall"]:.2f} s (worker CPU {cpu_one} s); 2 workers on 2 cores '
          f'{two["wall"]:.2f} s (worker CPU {cpu_two} s, both busy in {two["overlap"]:.0%} of busy samples); '
          f'2 / 1 = {two["wall"] / one["wall"]:.3f}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
