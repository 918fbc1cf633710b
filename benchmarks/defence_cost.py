r"""Round time of the secure-aggregation-compatible defences relative to FedAvg and to RFA, in one process.

  python -m benchmarks.defence_cost [--task=emnist_cnn] [--rounds=10] [--clients_per_round=10]

FedAvg, RFA (3 secure-average calls), bucketing over RFA's geometric median (`bucketing_rfa`, buckets of
`--bucket_size`: one stacked secure sum of the bucket means, two key histograms, then RFA's 3 calls), centered
clipping (`--centered_clipping_iterations` secure averages) and norm-filtered centered clipping
(`filtered_centered_clipping`: 2 secure averages of 0/1 indicators for the median norm, then centered clipping's;
`AlgorithmConfig`'s default k and tau, which change no shape or call count), and the defence chains `CHAINS`
(`--defence` specs of the registry, run as fedavg with that aggregator: ARC's two secure averages of 0/1
indicators for its threshold, then the rule's) on the same task, model initialisation and cohort, rounds
interleaved (`timing.round_time_medians`) so that drift in machine load hits all
alike. Prints each defence's median round time divided by FedAvg's and by RFA's. Ratios, not absolute times, are
the result.
"""

import dataclasses
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
from tff_robust import tasks  # pylint: disable=g-import-not-at-top

DEFENCES = ('bucketing_rfa', 'centered_clipping', 'filtered_centered_clipping')
CHAINS = ('arc>gm', 'arc>centered_clipping', 'bucketing(s=2)>centered_clipping', 'arc>bucketing(s=2)>gm')
_NUM_BYZANTINE = 2  # f of ARC's k = floor(2 (f/n)(n - f)): 3 of 10 clipped

_TASK = flags.DEFINE_enum('task', 'emnist_cnn', tasks.TASK_NAMES, 'Task of the round-time comparison.')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds per algorithm (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_BUCKET_SIZE = flags.DEFINE_integer('bucket_size', 2, 'bucketing_rfa: clients per bucket.', lower_bound=1)
_ITERATIONS = flags.DEFINE_integer('centered_clipping_iterations', 3, 'centered_clipping: secure averages.',
                                   lower_bound=1)


def round_time_medians() -> dict:
  """Median seconds per round of FedAvg, RFA and every defence, measured interleaved."""
  task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=20, seed=0, use_synthetic_data=True)
  ids = task.train_data.client_ids
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
  config = algorithms.AlgorithmConfig(
      client_learning_rate=0.01, bucket_size=_BUCKET_SIZE.value, centered_clipping_iterations=_ITERATIONS.value
  )
  processes = {
      name: algorithms.build_learning_process(
          name, task.model_fn, config, clients_per_round=_CLIENTS_PER_ROUND.value)
      for name in ('fedavg', 'rfa') + DEFENCES
  }
  for spec in CHAINS:
    processes[spec] = algorithms.build_learning_process(
        'fedavg', task.model_fn, dataclasses.replace(config, defence=spec, num_byzantine=_NUM_BYZANTINE),
        clients_per_round=_CLIENTS_PER_ROUND.value,
    )
  return timing.round_time_medians(processes, cohort, _ROUNDS.value)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  medians = round_time_medians()
  print(f'Round time on {_TASK.value} (synthetic data), {_CLIENTS_PER_ROUND.value} clients, median of '
        f'{_ROUNDS.value}: FedAvg {medians["fedavg"]:.3f} s, RFA {medians["rfa"]:.3f} s')
  width = max(len(name) for name in DEFENCES + CHAINS)
  print(f'{"defence":<{width}} {"seconds":>8} {"/ FedAvg":>9} {"/ RFA":>7}')
  for name in ('rfa',) + DEFENCES + CHAINS:
    print(f'{name:<{width}} {medians[name]:8.3f} {medians[name] / medians["fedavg"]:9.2f} '
          f'{medians[name] / medians["rfa"]:7.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
