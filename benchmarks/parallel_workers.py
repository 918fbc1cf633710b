r"""Which way of using a machine's CPU cores makes a round faster: more TFF workers, pinned, or a concurrency limit.

  python -m benchmarks.parallel_workers [--algorithms=fedavg] [--clients_per_round=200] [--client_epochs=5] \
      [--client_batch_size=10] [--concurrency_limits=1,2] [--rounds=3] [--quick]
  python -m benchmarks.parallel_workers --algorithms=rfa --clients_per_round=10 --client_epochs=1 \
      --client_batch_size=16 --client_learning_rate=0.1     # the round of `python -m experiments.train`'s defaults

TFF 0.87's PyPI worker has no CUDA, so a machine's value is its CPU cores (`gpu_placement`). The recipes, each on
local workers started side by side in one process:
- "no limit": one worker on any core running every client computation of a round at once (TFF's default), with
  the local context `experiments.train` uses (the baseline);
- "max_concurrent_computation_calls=N": the same, the worker running at most N client computations at once
  (`experiments.train`'s default since issue 34: N = the cores it may use);
- "1 worker on 1 core": one worker pinned to core 0 (every thread, as `taskset -a` does), no limit;
- "2 workers on 2 cores": two workers (no limit) pinned to cores 0 and 1 that share each round's cohort through the
  composing context (`execution_context.set_remote_execution_context` with both addresses; from the runner:
  two `taskset`-pinned `worker_service`s and `--tff_worker_address=A,B`).
Rounds alternate between the recipes (each starting the sequence in turn) on the same cohort and initial model,
so drift in machine load hits all alike. Per algorithm it prints each recipe's median round time and its ratio to
no limit (below 1: faster), the workers' CPU seconds per round, and for two workers how often both ran
at once (`process_stats.BusyOverlap`: 0 when the shards run one after another, 1 when in parallel all along) and
the ratio 2 workers / 1 pinned worker (ideal 0.5 when client work dominates the round). The machine's load average
is printed beside the numbers: other work on the cores lowers every gain.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import functools  # pylint: disable=g-import-not-at-top
import statistics  # pylint: disable=g-import-not-at-top
import time  # pylint: disable=g-import-not-at-top

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_ALGORITHMS = flags.DEFINE_list('algorithms', ['fedavg'], 'Algorithms to time.')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 200, 'Cohort size.', lower_bound=2)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs', 5, 'Local epochs per client (the client work).',
                                      lower_bound=1)
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 10, 'Local batch size.', lower_bound=1)
_CLIENT_LEARNING_RATE = flags.DEFINE_float('client_learning_rate', 0.05, 'Client SGD learning rate, in (0, 10].',
                                           lower_bound=1e-9, upper_bound=10.0)
_CONCURRENCY_LIMITS = flags.DEFINE_list(
    'concurrency_limits', ['1', '2'], 'max_concurrent_computation_calls of the limited one-worker recipes.'
)
flags.register_validator(
    'concurrency_limits', lambda limits: all(limit.isdigit() and int(limit) >= 1 for limit in limits),
    message='--concurrency_limits must be a comma-separated list of integers >= 1',
)
_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed rounds per recipe and algorithm (after one warm-up).',
                               lower_bound=1)
_QUICK = flags.DEFINE_bool('quick', False, 'A small setting for a smoke run: 40 clients, 2 epochs, 1 round.')

NO_LIMIT = "1 worker, no limit (TFF's default)"
ONE_PINNED = '1 worker on 1 core'
TWO_PINNED = '2 workers on 2 cores'


def limited(limit: int) -> str:
  return f'1 worker, max_concurrent_computation_calls={limit}'


def _composing_context_on(workers) -> object:
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


def _start_recipes(concurrency_limits):
  """({recipe: its workers}, {recipe: its context}); every worker listed once in the first."""
  if len(os.sched_getaffinity(0)) < 2:
    raise RuntimeError(f'this benchmark needs two cores; this process may use {sorted(os.sched_getaffinity(0))}')
  core_a, core_b = sorted(os.sched_getaffinity(0))[:2]
  setups, contexts = {}, {}
  try:
    unlimited = functools.partial(execution_context.LocalWorker, max_concurrent_computation_calls=-1)  # TFF's
    setups[NO_LIMIT] = [unlimited()]
    contexts[NO_LIMIT] = execution_context.local_worker_context(setups[NO_LIMIT][0])
    for limit in concurrency_limits:
      setups[limited(limit)] = [execution_context.LocalWorker(max_concurrent_computation_calls=limit)]
      contexts[limited(limit)] = execution_context.local_worker_context(setups[limited(limit)][0])
    setups[ONE_PINNED] = [unlimited()]
    setups[TWO_PINNED] = [unlimited(), unlimited()]
    for worker, core in zip([*setups[ONE_PINNED], *setups[TWO_PINNED]], (core_a, core_a, core_b)):
      process_stats.pin_to_cores(worker.pid, {core})
    for name in (ONE_PINNED, TWO_PINNED):
      contexts[name] = _composing_context_on(setups[name])
  except BaseException:
    _stop(setups)
    raise
  return setups, contexts


def _stop(setups) -> None:
  for workers in setups.values():
    for worker in workers:
      worker.stop()


def recipe_round_times(algorithm_names, clients_per_round: int, client_epochs: int, rounds: int, *,
                       client_batch_size: int = 10, client_learning_rate: float = 0.05,
                       concurrency_limits=(1, 2)) -> dict:
  """{algorithm: {recipe: {'wall': median s, 'cpu': [median CPU s per worker], 'overlap': median}}}."""
  setups, contexts = _start_recipes(concurrency_limits)
  try:
    task = tasks.create_task('digits', client_epochs=client_epochs, client_batch_size=client_batch_size, seed=0)
    ids = task.train_data.client_ids
    cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(clients_per_round)]
    config = algorithms.AlgorithmConfig(client_learning_rate=client_learning_rate)
    results = {}
    for algorithm in algorithm_names:
      process = algorithms.build_learning_process(algorithm, task.model_fn, config,
                                                  clients_per_round=clients_per_round)
      states = dict.fromkeys(setups, process.initialize())
      samples = {name: [] for name in setups}
      names = list(setups)
      for repeat in range(rounds + 1):  # the first round of each recipe warms it up
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:  # each recipe first in turn
          pids = [worker.pid for worker in setups[name]]
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
    _stop(setups)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  clients, epochs, rounds = ((40, 2, 1) if _QUICK.value else
                             (_CLIENTS_PER_ROUND.value, _CLIENT_EPOCHS.value, _ROUNDS.value))
  load_before = os.getloadavg()[0]
  results = recipe_round_times(
      _ALGORITHMS.value, clients, epochs, rounds, client_batch_size=_CLIENT_BATCH_SIZE.value,
      client_learning_rate=_CLIENT_LEARNING_RATE.value,
      concurrency_limits=[int(limit) for limit in _CONCURRENCY_LIMITS.value],
  )
  print(f'digits, {clients} clients x {epochs} epochs (batch {_CLIENT_BATCH_SIZE.value}), median of {rounds} '
        f'round(s); load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores')
  for algorithm, result in results.items():
    baseline = result[NO_LIMIT]['wall']
    for name, timing in result.items():
      cpu = ' + '.join(f'{seconds:.2f}' for seconds in timing['cpu'])
      both = f', both busy in {timing["overlap"]:.0%} of busy samples' if len(timing['cpu']) > 1 else ''
      print(f'{algorithm}: {name}: {timing["wall"]:.3f} s, / no limit {timing["wall"] / baseline:.3f} '
            f'(worker CPU {cpu} s{both})')
    print(f'{algorithm}: {TWO_PINNED} / {ONE_PINNED} = {result[TWO_PINNED]["wall"] / result[ONE_PINNED]["wall"]:.3f}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
