r"""Cost of a Shakespeare training round: the runner, plain TFF FedAvg and the Keras floor, side by side (issue 36).

  python -m benchmarks.shakespeare_round_cost            # 1 warm-up + 5 timed rounds per cohort (~15 min)
  python -m benchmarks.shakespeare_round_cost --quick    # 1 warm-up + 2 timed rounds per cohort (~6 min)

For each cohort (default: the RFA LSTM task `shakespeare_lstm_rfa` at 10 and 50 roles a round, the Delta-FL GRU
task `shakespeare_gru_dfl` at 100) every round samples its roles as the runner does and times, one after another
on the same windows:

* *runner*: FedAvg as `python -m experiments.train` runs it with the RFA flagfile's settings (batch 10, 1 local
  epoch, client learning rate 0.64, server 1.0, `--max_client_examples`): the round's client data built by the
  runner's own data path (`client_pipelines.cohort_client_data` over `corruption.make_client_data_fn` and
  `client_pipelines.max_examples`), then `process.next` of `algorithms.build_learning_process('fedavg', ...)`.
  As in the runner's loop, round t + 1's data is built on a background thread while round t's `next` runs
  (`round_data_prefetch`). Its *data* part (waiting for the round's data and starting the next round's build, plus
  what that build outlasts `next` by, so that no build overlaps another method) and *next* part are also shown apart; CPU counts
  the background build, wherever it falls.
* *plain TFF*: `tff.learning.algorithms.build_weighted_fed_avg` with the same model and optimizers on in-memory
  datasets (`from_tensor_slices(windows).batch(10)`) of exactly the windows the runner's clients trained on that
  round, with TFF's default loop (`dataset.reduce`) and with `LoopImplementation.DATASET_ITERATOR`.
* *Keras floor*: the same windows trained one client after another in plain Keras (one `fit` over the clients'
  batches of 10 in turn, one epoch), the compute a round cannot go below without running clients together.

Wall: median seconds per round over the timed rounds (interleaved, so drift in load hits every method alike).
CPU: median CPU seconds per round of this process plus the TFF worker (robust to other jobs on the machine, which
inflate wall times). Ratios are the result; absolute times depend on the machine. Prints a Markdown section;
`--output` also writes it to a file.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import collections  # pylint: disable=g-import-not-at-top
import statistics  # pylint: disable=g-import-not-at-top
import time  # pylint: disable=g-import-not-at-top

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import process_stats  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_report  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import client_pipelines  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import corruption  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import round_data_prefetch  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import paper_models  # pylint: disable=g-import-not-at-top

KERAS_MODELS = {
    'shakespeare_lstm_rfa': paper_models.shakespeare_lstm_rfa,
    'shakespeare_gru_dfl': paper_models.shakespeare_gru_dfl,
}
BATCH_SIZE = 10
CLIENT_LEARNING_RATE = 0.64  # the RFA flagfile's
SERVER_LEARNING_RATE = 1.0
RUNNER = 'runner'
PLAIN_REDUCE = 'plain TFF, default loop'
PLAIN_ITERATOR = 'plain TFF, iterator loop'
KERAS = 'Keras floor'
METHODS = (RUNNER, PLAIN_REDUCE, PLAIN_ITERATOR, KERAS)

_COHORTS = flags.DEFINE_list(
    'cohorts', ['shakespeare_lstm_rfa:10', 'shakespeare_lstm_rfa:50', 'shakespeare_gru_dfl:100'],
    'task:roles per round, for each measured cohort.')
_ROUNDS = flags.DEFINE_integer('rounds', 5, 'Timed rounds per cohort, after one warm-up round.', lower_bound=1)
_QUICK = flags.DEFINE_boolean('quick', False, '2 timed rounds per cohort (unless --rounds is given).')
_MAX_CLIENT_EXAMPLES = flags.DEFINE_integer('max_client_examples', 64, "The runner's cap on a role's windows.",
                                            lower_bound=1)
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of the cohort sampling and the cap (as the runner\'s --seed).')
_NOTE = flags.DEFINE_string('note', '', 'Appended to the machine line (e.g. other jobs running).')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the Markdown section to this file.')
_PERF_ROUNDS = flags.DEFINE_integer(
    'perf_rounds', 0, 'After timing each cohort, profile the worker with `perf record` during this many more '
    'runner rounds of it and print where its CPU goes (0: no profile).', lower_bound=0)


def parse_cohort(text: str) -> tuple[str, int]:
  """('task', roles) from 'task:roles'; raises ValueError naming the flag for anything else."""
  name, _, roles = text.partition(':')
  if name not in KERAS_MODELS or not roles.isdigit() or int(roles) < 1:
    raise ValueError(f'--cohorts entries must be TASK:ROLES with TASK in {sorted(KERAS_MODELS)} and ROLES >= 1, '
                     f'got {text!r}')
  return name, int(roles)


def windows_of(dataset: tf.data.Dataset) -> collections.OrderedDict:
  """The examples of a batched client dataset in the order one iteration yields them, as NumPy arrays."""
  batches = list(dataset.as_numpy_iterator())
  return collections.OrderedDict((key, np.concatenate([batch[key] for batch in batches])) for key in ('x', 'y'))


def in_memory(windows: collections.OrderedDict) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensor_slices(windows).batch(BATCH_SIZE)


class KerasFloor:
  """Trains a cohort's batches, client after client, with one compiled Keras model in one `fit`: the same
  batches as the clients' (no batch mixes two clients); the weights are not reset between clients, which
  changes no cost."""

  def __init__(self, build_model):
    self.build_model = build_model
    self.model = build_model()
    self.model.compile(optimizer=tf.keras.optimizers.SGD(CLIENT_LEARNING_RATE),
                       loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    warm_up = collections.OrderedDict(x=np.zeros([BATCH_SIZE + 4, paper_models.SEQUENCE_LENGTH], np.int32),
                                      y=np.zeros([BATCH_SIZE + 4], np.int32))
    self.train(self.batches([warm_up]))  # a full batch and a remainder: both shapes traced before timing

  def restore_eager_classes(self) -> None:
    """Undoes TFF's tracing: a Keras model built inside a graph swaps the base class of Keras's `Functional` to
    its TF1 variant for every instance (keras `version_utils.swap_class`), so `fit` would take the TF1 path;
    building one model eagerly swaps it back."""
    self.build_model()

  @staticmethod
  def batches(cohort_windows: list) -> tf.data.Dataset:
    """(x, y) batches of each client's windows, client after client."""
    datasets = [tf.data.Dataset.from_tensor_slices((w['x'], w['y'])).batch(BATCH_SIZE) for w in cohort_windows]
    joined = datasets[0]
    for dataset in datasets[1:]:
      joined = joined.concatenate(dataset)
    return joined

  def train(self, batches: tf.data.Dataset) -> None:
    self.model.fit(batches, epochs=1, verbose=0)


def _plain_fed_avg(model_fn, loop_implementation):
  return tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=CLIENT_LEARNING_RATE),
      server_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=SERVER_LEARNING_RATE),
      loop_implementation=loop_implementation,
  )


class _Clock:
  """Wall and CPU seconds (this process and the worker) of the calls timed with it, per method."""

  def __init__(self, worker_pid: int):
    self.worker_pid = worker_pid
    self.wall = collections.defaultdict(list)
    self.cpu = collections.defaultdict(list)

  def _cpu(self) -> float:
    return process_stats.cpu_seconds('self') + process_stats.cpu_seconds(self.worker_pid)

  def time(self, name: str, call, *, add: bool = False):
    """Times `call()` as a new measurement of `name`, or (`add`) as more of its last one."""
    wall, cpu = time.perf_counter(), self._cpu()
    result = call()
    wall, cpu = time.perf_counter() - wall, self._cpu() - cpu
    if add:
      self.wall[name][-1] += wall
      self.cpu[name][-1] += cpu
    else:
      self.wall[name].append(wall)
      self.cpu[name].append(cpu)
    return result


def measure_cohort(task_name: str, roles: int, rounds: int, keras_floor: KerasFloor, worker_pid: int) -> tuple:
  """({method: (median wall s, median CPU s)} over `rounds` timed rounds after one warm-up, plus the runner's
  'runner: data' and 'runner: next' parts; the worker's `perf` profile of `--perf_rounds` more runner rounds,
  or None)."""
  task = tasks.create_task(task_name, client_epochs=1, client_batch_size=BATCH_SIZE, seed=_SEED.value)
  config = algorithms.AlgorithmConfig(client_learning_rate=CLIENT_LEARNING_RATE,
                                      server_learning_rate=SERVER_LEARNING_RATE)
  runner = algorithms.build_learning_process('fedavg', task.model_fn, config, clients_per_round=roles)
  plain = {PLAIN_REDUCE: _plain_fed_avg(task.model_fn, tff.learning.LoopImplementation.DATASET_REDUCE),
           PLAIN_ITERATOR: _plain_fed_avg(task.model_fn, tff.learning.LoopImplementation.DATASET_ITERATOR)}
  states = {name: process.initialize() for name, process in [(RUNNER, runner), *plain.items()]}
  client_data_fn = corruption.make_client_data_fn(task, 'none', frozenset(), in_memory=True)
  transform = client_pipelines.max_examples(_MAX_CLIENT_EXAMPLES.value, epochs=1, batch_size=BATCH_SIZE)
  client_ids = list(task.train_data.client_ids)
  rng = np.random.default_rng(_SEED.value)

  def draw_cohort() -> list:
    return list(rng.choice(client_ids, size=roles, replace=False))

  prefetcher = round_data_prefetch.RoundDataPrefetcher(
      lambda round_num, cohort: client_pipelines.cohort_client_data(
          task.train_data, client_data_fn, cohort, transform, _SEED.value, round_num))
  cohort = draw_cohort()

  def runner_data(round_num: int) -> list:
    """Round `round_num`'s data, and the next round's cohort drawn and its build started, as the runner's loop:
    built while this round trains."""
    nonlocal cohort
    data = prefetcher.get(round_num, cohort)
    cohort = draw_cohort()
    prefetcher.start(round_num + 1, cohort)
    return data

  clock = _Clock(worker_pid)
  for round_num in range(1, rounds + 2):
    data = clock.time('runner: data', lambda: runner_data(round_num))
    states[RUNNER] = clock.time('runner: next', lambda: runner.next(states[RUNNER], data)).state
    clock.time('runner: data', prefetcher.wait, add=True)  # what the build outlasts `next` by: still the runner's
    cohort_windows = [windows_of(dataset) for dataset in data]  # what the runner's clients trained on
    for name, process in plain.items():
      datasets = [in_memory(windows) for windows in cohort_windows]
      states[name] = clock.time(name, lambda: process.next(states[name], datasets)).state
    keras_floor.restore_eager_classes()
    batches = keras_floor.batches(cohort_windows)
    clock.time(KERAS, lambda: keras_floor.train(batches))
  medians = {}
  for name in ('runner: data', 'runner: next', *METHODS[1:]):
    medians[name] = (statistics.median(clock.wall[name][1:]), statistics.median(clock.cpu[name][1:]))
  whole = [d + n for d, n in zip(clock.wall['runner: data'][1:], clock.wall['runner: next'][1:])]
  whole_cpu = [d + n for d, n in zip(clock.cpu['runner: data'][1:], clock.cpu['runner: next'][1:])]
  medians[RUNNER] = (statistics.median(whole), statistics.median(whole_cpu))
  profile = None
  if _PERF_ROUNDS.value and process_stats.perf_available():
    def runner_rounds():
      for round_num in range(rounds + 2, rounds + 2 + _PERF_ROUNDS.value):
        states[RUNNER] = runner.next(states[RUNNER], runner_data(round_num)).state
    profile = process_stats.perf_profile(worker_pid, runner_rounds, process_stats.PERF_CATEGORIES)
  prefetcher.close()
  return medians, profile


def profile_table(profile: process_stats.PerfProfile, rounds: int) -> str:
  """The worker's CPU per runner round, split by what its sampled stacks were doing."""
  rows = [[label, f'{fraction:.0%}', f'{fraction * profile.cpu_seconds / rounds:.3f}']
          for label, fraction in profile.fractions.items()]
  return scaling_report.table(['worker stacks', 'share', 'CPU s / round'], rows)


def cohort_table(medians: dict) -> str:
  """One row per method: wall and CPU, each against the Keras floor and plain TFF with the same loop."""
  rows = []
  for name in (RUNNER, 'runner: data', 'runner: next', *METHODS[1:]):
    wall, cpu = medians[name]
    rows.append([name, f'{wall:.3f}', scaling_report.ratio(wall, medians[KERAS][0]),
                 scaling_report.ratio(wall, medians[PLAIN_ITERATOR][0]), f'{cpu:.3f}',
                 scaling_report.ratio(cpu, medians[KERAS][1]), scaling_report.ratio(cpu, medians[PLAIN_ITERATOR][1])])
  return scaling_report.table(
      ['method', 'wall s / round', '/ Keras', '/ plain TFF (iterator)', 'CPU s / round', '/ Keras',
       '/ plain TFF (iterator)'], rows)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  cohorts = [parse_cohort(text) for text in _COHORTS.value]
  rounds = 2 if _QUICK.value and not flags.FLAGS['rounds'].present else _ROUNDS.value
  tf.keras.utils.set_random_seed(_SEED.value)
  # Keras models are built and traced before any TFF computation: TFF's tracing invalidates Keras models
  # built eagerly afterwards (NOTES.md).
  floors = {name: KerasFloor(KERAS_MODELS[name]) for name in sorted({name for name, _ in cohorts})}
  worker = execution_context.set_local_execution_context()
  load_start = os.getloadavg()[0]
  parts = []
  try:
    for name, roles in cohorts:
      medians, profile = measure_cohort(name, roles, rounds, floors[name], worker.pid)
      parts.append(f'`{name}`, {roles} roles a round, at most {_MAX_CLIENT_EXAMPLES.value} windows each:\n\n'
                   + cohort_table(medians))
      if profile is not None:
        parts[-1] += (f'\n\nWhere the worker\'s CPU goes in {_PERF_ROUNDS.value} more runner rounds (`perf record`, '
                      f'{profile.samples} samples at {profile.frequency} Hz):\n\n'
                      + profile_table(profile, _PERF_ROUNDS.value))
      print(parts[-1] + '\n', flush=True)
  finally:
    execution_context.stop_local_execution_context()
  note = ' '.join(part for part in (_NOTE.value, '(--quick run)' if _QUICK.value else '') if part)
  machine = scaling_report.machine_line(
      cpu_count=os.cpu_count(), memory_gib=os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30,
      tff_version=tff.__version__, tf_version=tf.__version__,
      repeats=f'1 warm-up + {rounds} timed rounds per cohort, interleaved', load=(load_start, os.getloadavg()[0]),
      note=note,
  )
  text = '\n\n'.join(parts + [machine]) + '\n'
  print(machine)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      f.write(text)


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
