"""What the sections of `benchmarks.scaling` share: --quick and --note, the task and cohort of the per-algorithm
sections, fresh workers, interleaved timing of
calls, one round of any kind of process, and the machine line under each section."""

import os
import statistics

from absl import flags
import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from benchmarks import process_stats
from benchmarks import scaling_report
from benchmarks import timing
from tff_robust.processes import indexed_clients
from tff_robust.processes import stateful_clients
from tff_robust.runtime import execution_context
from tff_robust import tasks

MIB = 2**20

_QUICK = flags.DEFINE_boolean('quick', False, 'Few repeats, cohorts up to 100 and models up to 10^5 (a smoke '
                              'run of a few minutes); flags given explicitly still win.')
TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task of the per-algorithm sections (1 and 5).')
CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort of the per-algorithm sections (1 and 5).',
                                         lower_bound=1)
_NOTE = flags.DEFINE_string('note', '', 'Appended to every section\'s machine line (e.g. other jobs running).')


def value(flag, quick):
  """The flag's value, or `quick` when --quick is set and the flag was not given."""
  if _QUICK.value and not flags.FLAGS[flag.name].present:
    return quick
  return flag.value


def task_and_cohort(clients: int) -> tuple:
  """(--task on synthetic data, a cohort of `clients` of its client datasets, cycling through its clients)."""
  task = tasks.create_task(TASK.value, client_epochs=1, client_batch_size=16, seed=0, use_synthetic_data=True)
  ids = list(task.train_data.client_ids)
  return task, [task.client_dataset(ids[i % len(ids)]) for i in range(clients)]


def fresh_worker() -> execution_context.LocalWorker:
  """Stops the current TFF worker and starts a new one (a warm worker keeps freed memory resident)."""
  execution_context.stop_local_execution_context()
  return execution_context.set_local_execution_context()


def median_after_warmup(values: list) -> float:
  return statistics.median(values[1:] if len(values) > 1 else values)


def machine_line(repeats: str, load_start: float) -> str:
  """The machine, versions, repeats and load average of a section, with --note and a warning when busy."""
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


def timed(calls: dict, repeats: int, worker_pid: int, description: str) -> dict:
  """{name: CallRecord} of `calls` run by `timing.interleaved_medians` (entry 0 of each list: the warm-up)."""
  with tqdm.tqdm(total=len(calls) * (repeats + 1), desc=description, unit='call') as bar:
    recorders = {name: process_stats.CallRecorder(call, worker_pid, lambda: bar.update(1))
                 for name, call in calls.items()}
    timing.interleaved_medians(recorders, repeats)
  return {name: recorder.record for name, recorder in recorders.items()}
