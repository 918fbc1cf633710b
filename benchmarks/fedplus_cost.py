r"""Cost of the personalisation algorithms relative to FedAvg, and of their client-state store, side by side.

  python -m benchmarks.fedplus_cost

Round time of FedAvg, Fed+ (avg, geomed, comed) and personalized RFA on the same task, cohort and initial
model, rounds interleaved; a stateful round includes reading and writing the cohort's states in its
`ClientStateStore` (on disk), whose cost is also timed alone. Then the store's cost per client for a
state of `--store_parameters` float32 parameters (1M: a 4 MB file per client, so 10^4 clients take 40 GB of
disk and only the cohort's states are ever in memory). Ratios, not absolute times, are the result.
"""

import os
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.processes import stateful_clients  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import client_state_store  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task of the round-time comparison.')
_ROUNDS = flags.DEFINE_integer('rounds', 15, 'Timed rounds per process (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_STORE_PARAMETERS = flags.DEFINE_integer(
    'store_parameters', 1_000_000, 'Parameters of the state in the store-only timing.', lower_bound=1
)
_ALGORITHMS = ('fedavg', 'fedplus_avg', 'fedplus_geomed', 'fedplus_comed', 'personalized_rfa')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=16, seed=0, use_synthetic_data=True)
  ids = list(task.train_data.client_ids)[:_CLIENTS_PER_ROUND.value]
  cohort = [task.client_dataset(cid) for cid in ids]
  config = algorithms.AlgorithmConfig()
  processes = {name: algorithms.build_learning_process(name, task.model_fn, config) for name in _ALGORITHMS}
  initial_weights = processes['fedavg'].get_model_weights(processes['fedavg'].initialize())
  work_dir = tempfile.mkdtemp(prefix='fedplus_cost_')
  states, stores = {}, {}
  for name, process in processes.items():
    states[name] = process.set_model_weights(process.initialize(), initial_weights)
    if isinstance(process, stateful_clients.StatefulClientProcess):
      stores[name] = client_state_store.ClientStateStore(
          os.path.join(work_dir, name), process.initial_client_state(states[name]))

  def round_of(name):
    process = processes[name]

    def call():
      if name in stores:
        output = process.next(states[name], cohort, stores[name].get(ids))
        stores[name].put(ids, output.client_states)
      else:
        output = process.next(states[name], cohort)
      states[name] = output.state
    return call

  def store_round():
    store = stores['fedplus_avg']
    store.put(ids, store.get(ids))

  calls = {name: round_of(name) for name in processes}
  calls['store get+put only'] = store_round
  medians = timing.interleaved_medians(calls, _ROUNDS.value)
  print(f'Round time on {_TASK.value}, {len(ids)} clients, median of {_ROUNDS.value} interleaved rounds:')
  for name, seconds in medians.items():
    print(f'  {name:20s} {seconds:.3f} s   / FedAvg = {seconds / medians["fedavg"]:.2f}')
  print(f'  client-store overhead: {medians["store get+put only"] / medians["fedplus_avg"]:.1%} of a '
        f'fedplus_avg round')

  big_state = [np.zeros(_STORE_PARAMETERS.value, np.float32)]
  big_store = client_state_store.ClientStateStore(os.path.join(work_dir, 'big'), big_state)
  big_states = [[np.full(_STORE_PARAMETERS.value, i, np.float32)] for i in range(len(ids))]
  big_store.put(ids, big_states)
  store_seconds = timing.interleaved_medians({'big': lambda: big_store.put(ids, big_store.get(ids))},
                                             _ROUNDS.value)['big']
  print(f'Store with {_STORE_PARAMETERS.value:,} float32 parameters per client: get+put of {len(ids)} clients '
        f'{store_seconds:.3f} s ({store_seconds / len(ids) * 1e3:.1f} ms per client), '
        f'{os.path.getsize(os.path.join(big_store.directory, os.listdir(big_store.directory)[0])) / 1e6:.1f} '
        'MB on disk per client')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
