r"""Cost of RFA relative to FedAvg, measured side by side in one process.

  python -m benchmarks.rfa_cost

1. Round time: FedAvg and RFA (3 secure-average calls) on the same task, model initialisation and cohort,
   rounds interleaved so that drift in machine load hits both alike; reports median RFA / FedAvg.
2. Aggregation alone: GeometricMedianFactory vs tff.aggregators.MeanFactory on the same client values
   (default 100 clients of a 1M-parameter float32 update, generated inside the computation from seeds);
   reports median GM / mean net of the generation time.
Ratios, not absolute times, are the result: absolute times depend on the machine.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import aggregation_costs  # pylint: disable=g-import-not-at-top
from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

_TASK = flags.DEFINE_enum('task', 'emnist_cnn', tasks.TASK_NAMES, 'Task of the round-time comparison.')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds per algorithm (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_AGGREGATION_CLIENTS = flags.DEFINE_integer('aggregation_clients', 100, 'Clients of the aggregation-only test.',
                                            lower_bound=1)
_AGGREGATION_DIMENSION = flags.DEFINE_integer('aggregation_dimension', 1_000_000,
                                              'Parameters per client update.', lower_bound=1)
_AGGREGATION_REPEATS = flags.DEFINE_integer('aggregation_repeats', 7, 'Timed calls per aggregator.',
                                            lower_bound=1)


def round_time_ratio() -> dict:
  task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=20, seed=0, use_synthetic_data=True)
  ids = task.train_data.client_ids
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
  config = algorithms.AlgorithmConfig(client_learning_rate=0.01)
  processes = {name: algorithms.build_learning_process(name, task.model_fn, config) for name in ('fedavg', 'rfa')}
  medians = timing.round_time_medians(processes, cohort, _ROUNDS.value)
  return dict(medians, ratio=medians['rfa'] / medians['fedavg'])


def aggregation_ratio() -> dict:
  """Times the mean and the geometric median on client values generated inside the computation
  (`aggregation_costs`), net of the generation time."""
  computations = aggregation_costs.aggregation_computations(
      _AGGREGATION_DIMENSION.value, ('mean', 'geometric_median')
  )
  seeds = list(range(_AGGREGATION_CLIENTS.value))
  medians = timing.interleaved_medians(
      {name: (lambda c=c: c(seeds)) for name, c in computations.items()}, _AGGREGATION_REPEATS.value
  )
  net = {name: medians[name] - medians['generation_only'] for name in ('mean', 'geometric_median')}
  return dict(medians, ratio=net['geometric_median'] / net['mean'],
              net_mean=net['mean'], net_geometric_median=net['geometric_median'])


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  rounds = round_time_ratio()
  print(f'Round time on {_TASK.value} (synthetic data), {_CLIENTS_PER_ROUND.value} clients, median of '
        f'{_ROUNDS.value}: FedAvg {rounds["fedavg"]:.3f} s, RFA {rounds["rfa"]:.3f} s, '
        f'RFA / FedAvg = {rounds["ratio"]:.2f}')
  aggregation = aggregation_ratio()
  print(f'Aggregation alone, {_AGGREGATION_CLIENTS.value} clients x {_AGGREGATION_DIMENSION.value:,} '
        f'parameters, median of {_AGGREGATION_REPEATS.value}, client-side generation '
        f'({aggregation["generation_only"]:.3f} s) subtracted: mean {aggregation["net_mean"]:.3f} s, '
        f'geometric median (3 passes) {aggregation["net_geometric_median"]:.3f} s, '
        f'GM / mean = {aggregation["ratio"]:.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
