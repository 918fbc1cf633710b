r"""Cost of every algorithm relative to FedAvg, scaling with the cohort and with the model; writes results.md.

  python -m benchmarks.scaling                      # the three sections, ~15-20 min on 2 cores
  python -m benchmarks.scaling --quick --output=/tmp/scaling.md
  python -m benchmarks.scaling --sections=cohorts   # replaces only that section of --output

Each section replaces its own part of `--output` (default benchmarks/results.md) and states the machine,
versions, repeats and date. Times are medians of repeats interleaved across everything compared in the
section (`timing.interleaved_medians`, one untimed warm-up call each), so drift in machine load hits all
alike and the ratios are fair; absolute times depend on the machine.

1. `algorithms`: one round of every algorithm of the runner on `--task` (digits), the same cohort of
   `--clients_per_round` clients and the same initial model, as ratios to FedAvg. Sampled-cohort processes
   take `next(state, cohort)`; the stateful ones (Fed+, personalized RFA, local-only) are driven with their
   cohort's client states kept in memory (no `ClientStateStore`; its cost is in benchmarks/fedplus_cost.py);
   the indexed ones (MtFEEL with dde_steps=0, signSGD) treat the cohort as all their N devices. CPU seconds of
   the worker and of this process per round are recorded beside the wall time. Peak memory: the rounds run
   in the TFF `worker_binary` subprocess, and a warm worker keeps freed memory resident, so each algorithm
   then gets a fresh worker and 1 + `--memory_rounds` rounds: the increase of the worker's VmHWM over its idle
   resident set (loading the computation included), and that of this process over the last
   `--memory_rounds` rounds (VmHWM reset through /proc/self/clear_refs after the first round, which compiles).
2. `cohorts`: clients per round `--cohort_sizes` (10, 100, 1000) on a 10-parameter linear model and small
   synthetic client datasets generated here (`--examples_per_client`, one batch each), FedAvg and RFA, plus
   two floors of TFF's per-client cost (a map of x + 1 over int32 client values, and a map summing each
   client's dataset). All (computation, cohort size) pairs are interleaved. Reports time per round and per
   client, the CPU seconds per client of this process and of the worker, a fit round = fixed + per-client
   cost, and whether time per client stays within +-25% from the smallest to the largest cohort, in wall and
   in CPU time. Then, for one more FedAvg round of the largest cohort each: a cProfile of this process (how
   long its main thread waits for the worker) and `perf record --call-graph dwarf` of the worker (when perf
   is available), whose samples are sorted by what their stacks are doing (`PERF_CATEGORIES`).
3. `model_size`: aggregation alone of `--aggregation_clients` client updates of `--model_sizes` float32
   parameters: the weighted mean (tff.aggregators.MeanFactory), the geometric median
   (GeometricMedianFactory, 3 passes) and the gather-based coordinate median, trimmed mean (10%), multi-Krum
   and Bulyan (f = 1). Client values are drawn inside the computation from seeds (feeding them from
   Python would time gRPC), a generation-only computation is timed beside them and subtracted (wall and CPU
   time), and the result is reduced to a scalar on the server so that the same 4-byte value comes back for
   every aggregator. Peak memory: each computation once more in a fresh worker, the increase of its VmHWM
   over its idle resident set, also as a multiple of the cohort's data (clients x parameters x 4 bytes).
   A computation that fails (e.g. out of memory) is reported as failed with its error; the others go on.
"""

import collections
import cProfile
import dataclasses
import os
import pstats
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
import tqdm  # pylint: disable=g-import-not-at-top

from benchmarks import aggregation_costs  # pylint: disable=g-import-not-at-top
from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_report  # pylint: disable=g-import-not-at-top
from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.processes import indexed_clients  # pylint: disable=g-import-not-at-top
from tff_robust.processes import stateful_clients  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.simulation.tasks import synthetic_regression  # pylint: disable=g-import-not-at-top

SECTIONS = ('algorithms', 'cohorts', 'model_size')
AGGREGATORS = aggregation_costs.AGGREGATORS
_MIB = 2**20
_CPU_RESOLUTION = 0.05  # seconds: 5 clock ticks of /proc/<pid>/stat; smaller CPU baselines give no ratio
_DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results.md')

_SECTIONS = flags.DEFINE_multi_enum('sections', list(SECTIONS), SECTIONS, 'Sections to run (repeatable).')
_QUICK = flags.DEFINE_boolean('quick', False, 'Few repeats, cohorts up to 100 and models up to 10^5 (a smoke '
                              'run of a few minutes); flags given explicitly still win.')
_OUTPUT = flags.DEFINE_string('output', _DEFAULT_OUTPUT, 'Markdown file whose sections are replaced.')
_NOTE = flags.DEFINE_string('note', '', 'Appended to every section\'s machine line (e.g. other jobs running).')
# Section 1.
_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task of the per-algorithm comparison.')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort of the per-algorithm comparison.',
                                          lower_bound=1)
_ALGORITHMS = flags.DEFINE_multi_enum('algorithms', list(algorithms.ALGORITHM_NAMES), algorithms.ALGORITHM_NAMES,
                                      'Algorithms of section 1 (FedAvg is always included).')
_DELTA_FL_SECURE = flags.DEFINE_boolean('delta_fl_secure', True, 'Also time Delta-FL with the secure quantile.')
_ROUNDS = flags.DEFINE_integer('rounds', 7, 'Timed rounds per algorithm (after one warm-up).', lower_bound=1)
_MEMORY_ROUNDS = flags.DEFINE_integer('memory_rounds', 3, 'Rounds per algorithm in its fresh worker.',
                                      lower_bound=1)
# Section 2.
_COHORT_SIZES = flags.DEFINE_list('cohort_sizes', ['10', '100', '1000'], 'Clients per round.')
_COHORT_ALGORITHMS = flags.DEFINE_multi_enum('cohort_algorithms', ['fedavg', 'rfa'], algorithms.ALGORITHM_NAMES,
                                             'Sampled-cohort algorithms of section 2.')
_COHORT_REPEATS = flags.DEFINE_integer('cohort_repeats', 2, 'Timed rounds per (computation, cohort size).',
                                       lower_bound=1)
_EXAMPLES_PER_CLIENT = flags.DEFINE_integer('examples_per_client', 16, 'Examples per synthetic client.',
                                            lower_bound=1)
_PERF = flags.DEFINE_boolean('perf', True, 'Profile the worker with `perf record` (skipped if unavailable).')
# Section 3.
_MODEL_SIZES = flags.DEFINE_list('model_sizes', ['10000', '100000', '1000000', '10000000'],
                                 'Parameters per client update.')
_AGGREGATORS = flags.DEFINE_multi_enum('aggregators', list(AGGREGATORS), AGGREGATORS, 'Aggregators of section 3.')
_AGGREGATION_CLIENTS = flags.DEFINE_integer('aggregation_clients', 10, 'Clients of section 3.', lower_bound=7)
_AGGREGATION_REPEATS = flags.DEFINE_integer('aggregation_repeats', 5, 'Timed calls per aggregator and size '
                                            'below 10^7.', lower_bound=1)
_LARGEST_MODEL_REPEATS = flags.DEFINE_integer('largest_model_repeats', 2, 'Timed calls per aggregator at sizes '
                                              '>= 10^7 (~1 min per repeat on 2 cores).', lower_bound=1)

_QUICK_VALUES = dict(rounds=2, memory_rounds=1, cohort_sizes=['10', '100'], cohort_repeats=1,
                     model_sizes=['10000', '100000'], aggregation_repeats=2, largest_model_repeats=1)

# What the worker's CPU samples are doing: the first pattern matching a frame of a sample's stack wins.
PERF_CATEGORIES = (
    ('tf.data: rebuilding each client dataset from its serialised graph, rewriting and finalising it',
     r'DatasetFromGraph|FinalizeDataset|RewriteDataset|DatasetToGraph'),
    ('TF: instantiating function graphs (Grappler, oneDNN rewrite, partitioning, executors, kernels) and '
     'releasing them', r'Instantiate|OptimizeFunctionGraph|GetOrCreateExecutors|CreateGraphs|NewLocalExecutor|'
     r'NewExecutor|CreateKernel|CreateOpKernel|MetaOptimizer|OptimizationPassRegistry|PartitionFunctionGraph|'
     r'GraphConstructor|ImportGraphDef|ConvertGraphDefToGraph|ReleaseHandle|~FunctionHandleCache|~ExecutorImpl'),
    ('thread wake-ups and context switches (kernel scheduler)', r'finish_task_switch|__schedule|futex_'),
    ('TF: executing the graphs (kernels incl. the training math, executor scheduling, dataset iteration)',
     r'OpKernel|ExecutorState|IteratorGetNext|ReduceDataset|Eigen::'),
    ('TFF executor stack (value bookkeeping, federated intrinsics)', r'tensorflow_federated'),
    ('gRPC and protobuf', r'grpc::|grpc_|google::protobuf'),
    ('malloc/free and page faults not attributed to a caller above',
     r'malloc|free|_int_|consolidate|unlink_chunk|mmap|munmap|page_fault|mprotect|brk'),
)


def _value(flag):
  """The flag's value, or its --quick value when --quick is set and the flag was not given."""
  if _QUICK.value and not flags.FLAGS[flag.name].present and flag.name in _QUICK_VALUES:
    return _QUICK_VALUES[flag.name]
  return flag.value


def _fresh_worker() -> execution_context.LocalWorker:
  execution_context.stop_local_execution_context()
  return execution_context.set_local_execution_context()


def _median_after_warmup(values: list) -> float:
  return statistics.median(values[1:] if len(values) > 1 else values)


def _machine_line(repeats: str, load_start: float) -> str:
  load = (load_start, os.getloadavg()[0])
  busy = ('The load average exceeded the core count: other jobs shared the machine, so wall times are '
          'inflated and noisier; interleaving keeps the ratios fair, and CPU times are less affected.'
          if max(load) > os.cpu_count() else '')
  note = ' '.join(part for part in (busy, _NOTE.value, '(--quick run)' if _QUICK.value else '') if part)
  return scaling_report.machine_line(
      cpu_count=os.cpu_count(), memory_gib=os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30,
      tff_version=tff.__version__, tf_version=tf.__version__, repeats=repeats, load=load, note=note,
  )


class RoundRunner:
  """One round per call of a runner process of any kind on a fixed cohort, carrying its state across calls.

  `StatefulClientProcess`es also carry the cohort's client states (in memory); `IndexedClientsProcess`es take
  the cohort as all their devices.
  """

  def __init__(self, process, cohort: list, initial_weights):
    self.process = process
    self.cohort = cohort
    self.state = process.set_model_weights(process.initialize(), initial_weights)
    self.client_states = None
    if isinstance(process, stateful_clients.StatefulClientProcess):
      self.client_states = [process.initial_client_state(self.state)] * len(cohort)

  @property
  def kind(self) -> str:
    if self.client_states is not None:
      return 'stateful'
    return 'indexed' if isinstance(self.process, indexed_clients.IndexedClientsProcess) else 'sampled'

  def __call__(self):
    if self.client_states is None:
      self.state = self.process.next(self.state, self.cohort).state
    else:
      output = self.process.next(self.state, self.cohort, self.client_states)
      self.state, self.client_states = output.state, output.client_states


def _timed(calls: dict, repeats: int, worker_pid: int, description: str) -> dict:
  """{name: CallRecord} of `calls` run by `timing.interleaved_medians` (entry 0 of each list: the warm-up)."""
  with tqdm.tqdm(total=len(calls) * (repeats + 1), desc=description, unit='call') as bar:
    recorders = {name: process_stats.CallRecorder(call, worker_pid, lambda: bar.update(1))
                 for name, call in calls.items()}
    timing.interleaved_medians(recorders, repeats)
  return {name: recorder.record for name, recorder in recorders.items()}


# Section 1 ---------------------------------------------------------------------------------------------------


def _algorithm_variants() -> dict:
  """{row name: (algorithm name, config)}; FedAvg first."""
  config = algorithms.AlgorithmConfig(dde_steps=0)
  variants = {'fedavg': ('fedavg', config)}
  for name in _ALGORITHMS.value:
    if name == 'delta_fl':
      variants['delta_fl (exact quantile)'] = ('delta_fl', config)
      if _DELTA_FL_SECURE.value:
        variants['delta_fl (secure quantile)'] = ('delta_fl', dataclasses.replace(config, quantile_method='secure'))
    elif name != 'fedavg':
      variants[name] = (name, config)
  return variants


def algorithms_section() -> str:
  load_start = os.getloadavg()[0]
  rounds, memory_rounds, m = _value(_ROUNDS), _value(_MEMORY_ROUNDS), _CLIENTS_PER_ROUND.value
  worker = _fresh_worker()
  task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=16, seed=0, use_synthetic_data=True)
  ids = list(task.train_data.client_ids)
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(m)]
  processes = {
      name: algorithms.build_learning_process(algorithm, task.model_fn, config, clients_per_round=m)
      for name, (algorithm, config) in tqdm.tqdm(_algorithm_variants().items(), desc='building', unit='process')
  }
  initial_weights = processes['fedavg'].get_model_weights(processes['fedavg'].initialize())
  runners = {name: RoundRunner(process, cohort, initial_weights) for name, process in processes.items()}
  times = _timed(runners, rounds, worker.pid, 'interleaved rounds')

  peaks = {}
  for name, runner in tqdm.tqdm(runners.items(), desc='memory (fresh worker each)', unit='algorithm'):
    worker = _fresh_worker()
    process_stats.reset_peak(worker.pid)  # a fresh worker's VmHWM is already its peak since start
    worker_start = process_stats.resident_bytes(worker.pid)
    runner()  # the first round in this worker: the computation is compiled (Python) and loaded (worker)
    python_resettable = process_stats.reset_peak('self')
    python_start = process_stats.resident_bytes('self')
    for _ in range(memory_rounds):
      runner()
    peaks[name] = (
        process_stats.MemoryPeak(worker_start, process_stats.peak_resident_bytes(worker.pid)),
        process_stats.MemoryPeak(python_start, process_stats.peak_resident_bytes('self'))
        if python_resettable else None,
    )

  wall = {name: _median_after_warmup(t.wall) for name, t in times.items()}
  cpu = {name: _median_after_warmup([p + w for p, w in zip(t.python_cpu, t.worker_cpu)])
         for name, t in times.items()}
  worker_increase = {name: peak[0].increase for name, peak in peaks.items()}
  python_increase = {name: None if peak[1] is None else peak[1].increase for name, peak in peaks.items()}
  rows = []
  for name, runner in runners.items():
    rows.append([
        f'`{name}`', runner.kind, f'{wall[name]:.3f}', scaling_report.ratio(wall[name], wall['fedavg']),
        f'{cpu[name]:.3f}', scaling_report.ratio(cpu[name], cpu['fedavg']),
        scaling_report.megabytes(worker_increase[name]),
        scaling_report.ratio(worker_increase[name], worker_increase['fedavg'], min_baseline=_MIB),
        scaling_report.megabytes(python_increase[name]),
        scaling_report.ratio(python_increase[name], python_increase['fedavg'], min_baseline=_MIB),
    ])
  parameters = sum(np.size(w) for w in initial_weights.trainable)
  body = [
      '## 1. Every algorithm of the runner relative to FedAvg',
      f'Task `{_TASK.value}` ({parameters:,}-parameter model), the same cohort of {m} clients (1 local epoch, '
      f'batch 16) and the same initial model for every algorithm; default `AlgorithmConfig` (MtFEEL with '
      f'dde_steps = 0). Round: median wall seconds of one `next` over {rounds} rounds interleaved across all '
      'algorithms; CPU: median CPU seconds per round of the worker plus this process (less sensitive than wall '
      'time to other jobs on the machine). Kinds: *sampled* `next(state, cohort)`; *stateful* '
      '`next(state, cohort, client states)`, states kept in memory (the on-disk store is timed in '
      '`benchmarks/fedplus_cost.py`); *indexed*: the cohort is all N devices of MtFEEL/signSGD '
      '(`benchmarks/mtfeel_cost.py` times them on `digits_cohorts`).',
      f'Peak memory: each algorithm then runs 1 + {memory_rounds} rounds in a fresh TFF worker; *worker* is '
      'the increase of the worker\'s VmHWM over its idle resident set, so it includes loading the computation '
      '(which dominates for a model this small: it measures the size of the computation more than of the '
      f'data); *Python* is the increase of this process\'s VmHWM over the last {memory_rounds} round(s) '
      '(reset via /proc/self/clear_refs after the first round, which compiles the computation for the new '
      'worker\'s context) above its resident set when they start; ratios only where FedAvg\'s is over 1 MiB. '
      'The worker keeps freed memory resident, so peaks are only comparable between fresh workers.',
      scaling_report.table(
          ['algorithm', 'kind', 'round (s)', '/ FedAvg', 'CPU (s)', '/ FedAvg', 'worker peak +MB', '/ FedAvg',
           'Python peak +MB', '/ FedAvg'], rows, 'll' + 'r' * 8),
      _machine_line(f'{rounds} interleaved rounds after one warm-up; 1 + {memory_rounds} memory rounds',
                    load_start),
  ]
  return '\n\n'.join(body)


# Section 2 ---------------------------------------------------------------------------------------------------


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


def cohorts_section() -> str:
  load_start = os.getloadavg()[0]
  sizes = sorted(int(s) for s in _value(_COHORT_SIZES))
  repeats = _value(_COHORT_REPEATS)
  worker = _fresh_worker()
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
      calls[(name, m)] = RoundRunner(process, datasets[:m], initial_weights)
    for name, (computation, argument) in floors.items():
      values = datasets[:m] if argument == 'data' else list(range(m))
      calls[(name, m)] = lambda c=computation, v=values: c(v)
  times = _timed(calls, repeats, worker.pid, 'interleaved cohorts')

  worker_peak = process_stats.peak_resident_bytes(worker.pid)
  wall = {key: _median_after_warmup(t.wall) for key, t in times.items()}
  python = {key: _median_after_warmup(t.python_cpu) for key, t in times.items()}
  worker_cpu = {key: _median_after_warmup(t.worker_cpu) for key, t in times.items()}
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
  waiting = _main_thread_waiting(RoundRunner(first, datasets[:largest], initial_weights))
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
      _machine_line(f'{repeats} interleaved repeats after one warm-up', load_start),
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


def _main_thread_waiting(runner: RoundRunner) -> float:
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
  runner = RoundRunner(process, datasets[:m], initial_weights)
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


# Section 3 ---------------------------------------------------------------------------------------------------


def _peak_in_fresh_worker(call) -> int:
  """Increase of a fresh worker's VmHWM over its idle resident set while it runs `call` once (bytes).

  A fresh worker, because a warm one keeps freed memory resident and later calls reuse it.
  """
  worker = _fresh_worker()
  process_stats.reset_peak(worker.pid)  # a no-op in effect: its VmHWM is already its peak since start
  idle = process_stats.resident_bytes(worker.pid)
  call()
  return max(process_stats.peak_resident_bytes(worker.pid) - idle, 0)


class _Guarded:
  """A call that, once it has raised, records the error and does nothing more (a baseline that cannot run at
  some size is reported, and the others still run)."""

  def __init__(self, call):
    self._call = call
    self.error = None

  def __call__(self):
    if self.error is None:
      try:
        self._call()
      except Exception as error:  # pylint: disable=broad-except
        self.error = f'{type(error).__name__}: {(str(error).splitlines() or [""])[0][:300]}'


def model_size_section() -> str:
  load_start = os.getloadavg()[0]
  sizes = sorted(int(float(s)) for s in _value(_MODEL_SIZES))
  clients = _AGGREGATION_CLIENTS.value
  names = ['mean'] + [name for name in AGGREGATORS if name in _AGGREGATORS.value and name != 'mean']
  seeds = list(range(clients))
  wall, cpu, memory, failures, repeats_used = {}, {}, {}, {}, {}
  for dimension in sizes:
    repeats = _value(_AGGREGATION_REPEATS) if dimension < 10**7 else _value(_LARGEST_MODEL_REPEATS)
    repeats_used[dimension] = repeats
    computations = aggregation_costs.aggregation_computations(dimension, names)
    calls = {name: _Guarded(lambda c=computation: c(seeds)) for name, computation in computations.items()}
    worker = _fresh_worker()
    records = _timed(calls, repeats, worker.pid, f'aggregation, d = {dimension:.0e}')
    for name, call in calls.items():
      if call.error is not None:
        failures[(name, dimension)] = call.error
        continue
      record = records[name]
      wall[(name, dimension)] = _median_after_warmup(record.wall)
      cpu[(name, dimension)] = _median_after_warmup([p + w for p, w in zip(record.python_cpu, record.worker_cpu)])
    for name, call in tqdm.tqdm(calls.items(), desc=f'memory, d = {dimension:.0e} (fresh worker each)',
                                unit='call'):
      if call.error is None:
        memory[(name, dimension)] = _peak_in_fresh_worker(call)
        if call.error is not None:  # raised only now, e.g. out of memory beside the other jobs
          failures[(name, dimension)] = call.error

  def net(values, name, d):
    if (name, d) not in values or ('generation_only', d) not in values:
      return None
    return values[(name, d)] - values[('generation_only', d)]

  def cell(name, d):
    if (name, d) in failures:
      return 'failed'
    wall_net = net(wall, name, d)
    if wall_net is None:
      return 'n/a'
    return (f'{scaling_report.ratio(wall_net, net(wall, "mean", d))} / '
            f'{scaling_report.ratio(net(cpu, name, d), net(cpu, "mean", d), min_baseline=_CPU_RESOLUTION)} '
            f'({wall_net:.3f} s)')

  data_bytes = {d: clients * d * 4 for d in sizes}
  time_rows, memory_rows = [], []
  for d in sizes:
    mean_wall, mean_cpu = net(wall, 'mean', d), net(cpu, 'mean', d)
    time_rows.append(
        [f'{d:.0e}', repeats_used[d],
         'failed' if ('generation_only', d) in failures else f'{wall[("generation_only", d)]:.3f}',
         'n/a' if mean_wall is None else f'{mean_wall:.3f} / {mean_cpu:.3f}']
        + [cell(name, d) for name in names[1:]])
    memory_rows.append([f'{d:.0e}', scaling_report.megabytes(data_bytes[d])] + [
        'failed' if (name, d) in failures else 'n/a' if memory.get((name, d)) is None else
        f'{scaling_report.megabytes(memory[(name, d)])} ({memory[(name, d)] / data_bytes[d]:.1f}x)'
        for name in ['generation_only'] + names])
  failed = [f'- `{name}` at d = {d:.0e} failed: {reason}' for (name, d), reason in failures.items()]
  not_positive = [f'`{name}` at {d:.0e}' for name in names for d in sizes
                  if net(wall, name, d) is not None and net(wall, name, d) <= 0]
  body = [
      f'## 3. Aggregation alone vs model size ({clients} clients, float32)',
      'Each computation draws the clients\' updates inside the computation (uniform in [-1, 1) from per-client '
      'seeds, weights 1..10), aggregates them and returns the sum of the aggregate (one float). *generation* '
      'is the median seconds of a computation that only draws the updates; its median wall seconds and CPU '
      'seconds (worker + Python) are subtracted from each aggregator\'s to give the net aggregation cost. '
      'Cells: net wall time / mean\'s net wall time, then the same ratio in CPU time (which other jobs on the '
      'machine disturb less; n/a where the mean\'s net CPU is under 0.05 s, 5 clock ticks), then the net wall '
      'seconds. Geometric median: `GeometricMedianFactory`, 3 passes '
      '(3 secure-average calls); trimmed mean 10%; multi-Krum and Bulyan with f = 1.',
      scaling_report.table(['parameters', 'repeats', 'generation (s)', 'mean net (s, wall / CPU)']
                           + [f'{n} / mean' for n in names[1:]], time_rows),
      'Peak memory: each computation is run once more in a fresh worker (a warm one keeps freed memory '
      'resident, and later calls reuse it); the increase of its VmHWM over its idle resident set, in MB and as '
      'a multiple of the cohort\'s data (clients x parameters x 4 bytes). It includes loading the computation '
      '(which dominates at the smallest sizes) and, for the aggregators, the generated client values '
      '(*generation_only* alone):',
      scaling_report.table(['parameters', 'cohort data (MB)'] + [f'{n} +MB' for n in ['generation_only'] + names],
                           memory_rows),
      '\n'.join(failed),
      (f'Net wall time at or below zero ({", ".join(not_positive)}): the aggregation costs less than the '
       'noise of the generation-only baseline there, so that ratio is not meaningful.') if not_positive else '',
      _machine_line('interleaved repeats per size as in the table, after one warm-up', load_start),
  ]
  return '\n\n'.join(part for part in body if part)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  start = time.perf_counter()
  builders = {'algorithms': algorithms_section, 'cohorts': cohorts_section, 'model_size': model_size_section}
  for name in SECTIONS:
    if name in _SECTIONS.value:
      body = builders[name]()
      scaling_report.write(_OUTPUT.value, {name: body}, SECTIONS)  # each section saved as soon as it is done
      print(body, '\n', flush=True)
  execution_context.stop_local_execution_context()
  print(f'Wrote {_OUTPUT.value} in {time.perf_counter() - start:.0f} s')


if __name__ == '__main__':
  app.run(main)
