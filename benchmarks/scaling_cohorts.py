"""Section 2 of `benchmarks.scaling` (`cohorts`): time per client as the cohort grows.

Clients per round `--cohort_sizes` (10, 100, 1000) on a 10-parameter linear model and small
synthetic client datasets generated here (`--examples_per_client`, one batch each), FedAvg and RFA, plus
two floors of TFF's per-client cost (a map of x + 1 over int32 client values, and a map summing each
client's dataset). All (computation, cohort size) pairs are interleaved. Reports time per round and per
client, the CPU seconds per client of this process and of the worker, a fit round = fixed + per-client
cost, and whether time per client stays within +-25% from the smallest to the largest cohort, in wall and
in CPU time. Then, for one more FedAvg round of the largest cohort each: a cProfile of this process (how
long its main thread waits for the worker) and `perf record --call-graph dwarf` of the worker (when perf
is available), whose samples are sorted by what their stacks are doing (`PERF_CATEGORIES`).
"""

import collections
import cProfile
import os
import pstats

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import process_stats
from benchmarks import scaling_common
from benchmarks import scaling_report
from tff_robust.simulation import algorithms
from tff_robust.tasks import synthetic_regression

_COHORT_SIZES = flags.DEFINE_list('cohort_sizes', ['10', '100', '1000'], 'Clients per round.')
_COHORT_ALGORITHMS = flags.DEFINE_multi_enum('cohort_algorithms', ['fedavg', 'rfa'], algorithms.ALGORITHM_NAMES,
                                             'Sampled-cohort algorithms of section 2.')
_COHORT_REPEATS = flags.DEFINE_integer('cohort_repeats', 2, 'Timed rounds per (computation, cohort size).',
                                       lower_bound=1)
_EXAMPLES_PER_CLIENT = flags.DEFINE_integer('examples_per_client', 16, 'Examples per synthetic client.',
                                            lower_bound=1)
_PERF = flags.DEFINE_boolean('perf', True, 'Profile the worker with `perf record` (skipped if unavailable).')

PERF_CATEGORIES = process_stats.PERF_CATEGORIES

def _linear_client_datasets(num_clients: int, examples: int, seed: int = 0) -> list:
  """Least-squares clients for `synthetic_regression.model_fn`: x ~ N(0, I), y = x w + noise, one batch each."""
  rng = np.random.default_rng(seed)
  w = rng.normal(size=(synthetic_regression.DIMENSION, 1))
  datasets = []
  for _ in range(num_clients):
    x = rng.normal(size=(examples, synthetic_regression.DIMENSION)).astype(np.float32)
    y = (x @ w + 0.1 * rng.normal(size=(examples, 1))).astype(np.float32)
    datasets.append(tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(examples))
  return datasets


def _floor_computations(element_type) -> dict:
  """Federated computations with almost no client work: TFF's per-client cost without training."""

  @tff.tensorflow.computation(np.int32)
  def add_one(x):
    return x + 1

  @tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
  def map_add_one(values):
    return tff.federated_sum(tff.federated_map(add_one, values))

  @tff.tensorflow.computation(tff.SequenceType(element_type))
  def dataset_sum(dataset):
    return dataset.reduce(0.0, lambda total, batch: total + tf.reduce_sum(batch['x']))

  @tff.federated_computation(tff.FederatedType(tff.SequenceType(element_type), tff.CLIENTS))
  def map_dataset_sum(datasets):
    return tff.federated_sum(tff.federated_map(dataset_sum, datasets))

  return {'floor: x + 1 per client': (map_add_one, 'int32'), 'floor: sum of each dataset': (map_dataset_sum, 'data')}


def section() -> str:
  """Runs section 2 (see the module docstring) and returns its markdown."""
  load_start = os.getloadavg()[0]
  sizes = sorted(int(s) for s in scaling_common.value(_COHORT_SIZES, quick=['10', '100']))
  repeats = scaling_common.value(_COHORT_REPEATS, quick=1)
  worker = scaling_common.fresh_worker()
  worker_idle = process_stats.resident_bytes(worker.pid)
  datasets = _linear_client_datasets(sizes[-1], _EXAMPLES_PER_CLIENT.value)
  config = algorithms.AlgorithmConfig()
  processes = {name: algorithms.build_learning_process(name, synthetic_regression.model_fn, config,
                                                       clients_per_round=sizes[0])
               for name in _COHORT_ALGORITHMS.value}
  first = next(iter(processes.values()))
  initial_weights = first.get_model_weights(first.initialize())
  element_type = tff.types.tensorflow_to_type(datasets[0].element_spec)
  floors = _floor_computations(element_type)
  calls = {}
  for m in sizes:
    for name, process in processes.items():
      calls[(name, m)] = scaling_common.RoundRunner(process, datasets[:m], initial_weights)
    for name, (computation, argument) in floors.items():
      values = datasets[:m] if argument == 'data' else list(range(m))
      calls[(name, m)] = lambda c=computation, v=values: c(v)
  times = scaling_common.timed(calls, repeats, worker.pid, 'interleaved cohorts')

  worker_peak = process_stats.peak_resident_bytes(worker.pid)
  wall = {key: scaling_common.median_after_warmup(t.wall) for key, t in times.items()}
  python = {key: scaling_common.median_after_warmup(t.python_cpu) for key, t in times.items()}
  worker_cpu = {key: scaling_common.median_after_warmup(t.worker_cpu) for key, t in times.items()}
  cpu = {key: python[key] + worker_cpu[key] for key in times}
  names = list(processes) + list(floors)
  smallest, largest = sizes[0], sizes[-1]
  rows, fits = [], []
  for name in names:
    for m in sizes:
      rows.append([f'`{name}`', m, f'{wall[(name, m)]:.3f}', f'{wall[(name, m)] / m * 1e3:.2f}',
                   scaling_report.ratio(wall[(name, m)] / m, wall[(name, smallest)] / smallest),
                   f'{cpu[(name, m)] / m * 1e3:.2f}',
                   scaling_report.ratio(cpu[(name, m)] / m, cpu[(name, smallest)] / smallest),
                   f'{python[(name, m)] / m * 1e3:.2f}', f'{worker_cpu[(name, m)] / m * 1e3:.2f}'])
    slope, intercept = np.polyfit(sizes, [wall[(name, m)] for m in sizes], 1)
    changes = [values[(name, largest)] / largest / (values[(name, smallest)] / smallest) - 1
               for values in (wall, cpu)]
    fits.append([f'`{name}`', f'{intercept:.3f}', f'{slope * 1e3:.2f}']
                + [f'{c:+.0%} ({"yes" if abs(c) <= 0.25 else "no"})' for c in changes])

  profile = _cohort_profile(processes, datasets, initial_weights, largest, worker.pid)
  waiting = _main_thread_waiting(scaling_common.RoundRunner(first, datasets[:largest], initial_weights))
  first_name = next(iter(processes))
  first_fixed = np.polyfit(sizes, [wall[(first_name, m)] for m in sizes], 1)[1]
  first_falls = wall[(first_name, largest)] / largest < wall[(first_name, smallest)] / smallest
  verdicts, flat = [], {}
  for kind, values in (('wall', wall), ('CPU', cpu)):
    flat[kind] = [name for name in processes
                  if abs(values[(name, largest)] / largest / (values[(name, smallest)] / smallest) - 1) <= 0.25]
    verdicts.append(f'{", ".join(f"`{n}`" for n in flat[kind]) or "none"} in {kind} time')
  disagree = [name for name in processes if (name in flat['wall']) != (name in flat['CPU'])]
  training_wall = sum(wall[(n, largest)] for n in processes)
  python_share = sum(python[(n, largest)] for n in processes) / training_wall
  worker_share = sum(worker_cpu[(n, largest)] for n in processes) / training_wall
  body = [
      f'## 2. Clients per round: {", ".join(map(str, sizes))}',
      f'A {synthetic_regression.DIMENSION}-parameter linear least-squares model '
      '(`synthetic_regression.model_fn`) on synthetic clients generated by the benchmark '
      f'({_EXAMPLES_PER_CLIENT.value} examples each, one batch, one local epoch); the cohort of m clients is '
      f'the first m of {largest}. Every (computation, m) pair is timed in each of {repeats} interleaved '
      'repeats. The two *floor* rows are federated computations with almost no client work: a map of x + 1 '
      'over int32 client values, and a map that sums each client\'s dataset (the same datasets as the '
      'training rounds). CPU: CPU seconds per client of this Python process (all threads, `getrusage`) plus '
      'the TFF worker (`/proc/<pid>/stat`, 10 ms ticks), split in the last two columns; unlike wall time it '
      'does not count waiting for a core that another job holds.',
      scaling_report.table(['computation', 'clients', 'round (s)', 'ms / client', 'vs smallest',
                            'CPU ms / client', 'vs smallest', 'Python CPU ms / client', 'worker CPU ms / client'],
                           rows),
      f'Acceptance (time per client at m = {largest} within +-25% of m = {smallest}), in wall time and in CPU '
      f'time, and a least-squares fit round time = fixed + m x per-client over m in {sizes}:',
      scaling_report.table(['computation', 'fixed (s)', 'per client (ms)',
                            f'wall ms/client {smallest} -> {largest}', f'CPU ms/client {smallest} -> {largest}'],
                           fits),
      f'Time per client within +-25% from {smallest} to {largest} clients: {"; ".join(verdicts)}. The worker, '
      f'fresh at the start of this section, peaked at {scaling_report.megabytes(worker_peak)} MB resident '
      f'(VmHWM; {scaling_report.megabytes(worker_idle)} MB idle).'
      + (f' Time per client of `{first_name}` falls from {smallest} clients on because the round\'s fixed cost '
         f'(server update, broadcast, the call itself; fit: {first_fixed:.3f} s) is shared by more '
         'clients.' if first_fixed > 0 and first_falls else ''),
      ' '.join(
          f'Wall and CPU time disagree for `{name}`: it got {cpu[(name, smallest)] / wall[(name, smallest)]:.2f} '
          f'CPU seconds per wall second at m = {smallest} ({wall[(name, smallest)]:.1f} s rounds) and '
          f'{cpu[(name, largest)] / wall[(name, largest)]:.2f} at m = {largest} ({wall[(name, largest)]:.0f} s '
          'rounds): the two got a different share of the machine, whose other jobs come and go on a time '
          'scale that interleaving rounds this different in length cannot even out. The CPU columns are the '
          'fairer comparison here.' for name in disagree),
      scaling_common.machine_line(f'{repeats} interleaved repeats after one warm-up', load_start),
      '### Where the time per client goes',
      f'At m = {largest}, the CPU time of this Python process came to {python_share:.0%} of the training '
      f'rounds\' wall time and that of the worker (several threads) to {worker_share:.0%}. The Python side '
      '(packing the cohort, serialising each tf.data dataset to a graph, sending the values over gRPC) is not '
      f'the bottleneck: a cProfile of one more `{first_name}` round of {largest} clients finds the main thread '
      'waiting on a lock (the answer from the event-loop thread that talks to the worker) for '
      f'{waiting:.0%} of the round.' + (' So the worker was profiled instead.' if profile else ''),
      profile,
  ]
  return '\n\n'.join(part for part in body if part)


def _main_thread_waiting(runner: scaling_common.RoundRunner) -> float:
  """Share of one round that cProfile finds the main thread in a lock's `acquire` (waiting for the worker)."""
  profiler = cProfile.Profile()
  profiler.enable()
  runner()
  profiler.disable()
  stats = pstats.Stats(profiler).stats
  waiting = sum(own for (_, _, function), (_, _, own, _, _) in stats.items() if 'acquire' in function)
  total = sum(own for (_, _, own, _, _) in stats.values())
  return waiting / total if total else 0.0


def _cohort_profile(processes, datasets, initial_weights, m, worker_pid) -> str:
  """Markdown of a `perf` profile of the worker during one round of the first process on m clients."""
  if not _PERF.value:
    return ''
  if not process_stats.perf_available():
    return '`perf` is not installed here: no profile of the worker.'
  name, process = next(iter(processes.items()))
  runner = scaling_common.RoundRunner(process, datasets[:m], initial_weights)
  runner()  # warm-up outside the profile
  try:
    profile = process_stats.perf_profile(worker_pid, runner, PERF_CATEGORIES)
  except (RuntimeError, OSError) as error:
    return f'`perf record` failed, no profile of the worker: {error}'
  rows = [[label, f'{fraction:.0%}', f'{fraction * profile.cpu_seconds / m * 1e3:.2f}']
          for label, fraction in profile.fractions.items()]
  shares = list(profile.fractions.values())
  return '\n\n'.join([
      f'`perf record --call-graph dwarf -F {profile.frequency}` of the worker during one more `{name}` round '
      f'of {m} clients ({profile.samples} samples, {profile.cpu_seconds:.1f} CPU s); each sample counted in '
      'the first row whose functions appear on its stack:',
      scaling_report.table(['what the worker was doing', 'share of samples', 'CPU ms / client'], rows),
      'What it shows: TFF 0.87\'s C++ runtime runs each client\'s work as its own TensorFlow call in the '
      'worker. The client\'s dataset arrives as a serialised graph that tf.data rebuilds, rewrites and '
      f'finalises ({shares[0]:.0%} of the samples), and the client\'s `tf.function`s (local training, the '
      'dataset `reduce` inside it) are instantiated for that call (Grappler, the oneDNN layout pass, '
      f'partitioning, a new executor and kernels) and released after it ({shares[1]:.0%}); executing the '
      f'graphs, the training math included, is {shares[3]:.0%}. This is paid once per client whatever the cohort '
      'size, so it adds a constant to the time per client, a floor that a 10-parameter model cannot go below '
      '(compare the two floor rows). Only TFF/TensorFlow could lower it (instantiating the client function '
      'once per round instead of once per client, or taking client data as tensors instead of datasets).',
  ])
