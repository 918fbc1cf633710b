r"""Cost of Delta-FL relative to FedAvg, measured side by side in one process.

  python -m benchmarks.delta_fl_cost

Round time of FedAvg and of Delta-FL (conformity level 0.5) with the exact and the secure quantile, on
the same task, cohort and initial model, rounds interleaved; reports the medians, the ratios to FedAvg and
the secure-average calls per round of each. Delta-FL adds one forward pass over each device's data (the
loss of the broadcast model) and, with the secure quantile, `quantile_passes` secure averages (the histogram
search: 258 indicators per device); devices that fail the filter skip local training, so a round can also be cheaper.
Ratios, not absolute times, are the result: absolute times depend on the machine.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import metrics_utils  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task of the round-time comparison.')
_ROUNDS = flags.DEFINE_integer('rounds', 15, 'Timed rounds per process (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_CONFORMITY_LEVEL = flags.DEFINE_float('conformity_level', 0.5, 'Delta-FL theta.', lower_bound=1e-9,
                                       upper_bound=1.0)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs_per_round', 1, 'Local epochs.', lower_bound=1)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  task = tasks.create_task(_TASK.value, client_epochs=_CLIENT_EPOCHS.value, client_batch_size=16, seed=0,
                           use_synthetic_data=True)
  ids = task.train_data.client_ids
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
  configs = {
      'fedavg': ('fedavg', algorithms.AlgorithmConfig()),
      'delta_fl_exact': ('delta_fl', algorithms.AlgorithmConfig(conformity_level=_CONFORMITY_LEVEL.value)),
      'delta_fl_secure': ('delta_fl', algorithms.AlgorithmConfig(
          conformity_level=_CONFORMITY_LEVEL.value, quantile_method='secure')),
  }
  processes = {name: algorithms.build_learning_process(algorithm, task.model_fn, config)
               for name, (algorithm, config) in configs.items()}
  medians = timing.round_time_medians(processes, cohort, _ROUNDS.value)
  print(f'Round time on {_TASK.value}, {_CLIENTS_PER_ROUND.value} clients, {_CLIENT_EPOCHS.value} local '
        f'epoch(s), theta = {_CONFORMITY_LEVEL.value:g}, median of {_ROUNDS.value} interleaved rounds:')
  for name, process in processes.items():
    metrics = metrics_utils.flatten_metrics(process.next(process.initialize(), cohort).metrics)
    calls = 1 + int(metrics.get('client_work/filter/secure_average_calls', 0))
    kept = metrics.get('client_work/filter/num_kept', len(cohort))
    print(f'  {name:16s} {medians[name]:.3f} s   / FedAvg = {medians[name] / medians["fedavg"]:.2f}   '
          f'secure-average calls per round: {calls}   clients trained: {kept}/{len(cohort)}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
