r"""Round time of every simulated update attack relative to FedAvg without one, side by side in one process.

  python -m benchmarks.attack_cost [--task=emnist_cnn] [--rounds=10] [--clients_per_round=10]

FedAvg (TFF's weighted mean, no attack) and FedAvg under each attack of `--attacks` (default: every registered
attack at its defaults; `line_search` evaluates the mean as its stacked rule, so its cost here is its 25 rule
evaluations of the cheapest rule) with `--corrupted` of the cohort's clients corrupted, on the same task, model
initialisation and cohort, rounds interleaved (`timing.interleaved_medians`) so that drift in machine load hits all
alike. Prints each attack's median round time divided by FedAvg's. Ratios, not absolute times, are the result.
"""

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.core.attacks import catalog  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import update_corruption_process  # pylint: disable=g-import-not-at-top

_TASK = flags.DEFINE_enum('task', 'emnist_cnn', tasks.TASK_NAMES, 'Task of the round-time comparison.')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds per process (after one warm-up).', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=3)
_CORRUPTED = flags.DEFINE_integer('corrupted', 3, 'Corrupted clients of the cohort.', lower_bound=1)
_ATTACKS = flags.DEFINE_string('attacks', ','.join(catalog.ATTACK_NAMES), 'Comma-separated attack specs.')


def round_time_medians(attacks) -> dict:
  """Median seconds per round of FedAvg and of FedAvg under each attack, measured interleaved."""
  task = tasks.create_task(_TASK.value, client_epochs=1, client_batch_size=20, seed=0, use_synthetic_data=True)
  ids = task.train_data.client_ids
  cohort = [task.client_dataset(ids[i % len(ids)]) for i in range(_CLIENTS_PER_ROUND.value)]
  flagged = [(data, update_corruption_process.corruption_flag_dataset(i < _CORRUPTED.value))
             for i, data in enumerate(cohort)]
  config = algorithms.AlgorithmConfig(client_learning_rate=0.01)
  build = lambda attack: algorithms.build_learning_process(
      'fedavg', task.model_fn, config, clients_per_round=_CLIENTS_PER_ROUND.value, update_attack=attack)
  processes = {'fedavg': (build(None), cohort), **{attack: (build(attack), flagged) for attack in attacks}}
  fedavg = processes['fedavg'][0]
  initial_weights = fedavg.get_model_weights(fedavg.initialize())
  states = {name: process.set_model_weights(process.initialize(), initial_weights)
            for name, (process, _) in processes.items()}

  def run_round(name):
    def call():
      process, data = processes[name]
      states[name] = process.next(states[name], data).state
    return call

  return timing.interleaved_medians({name: run_round(name) for name in processes}, _ROUNDS.value)


def main(argv):
  del argv
  attacks = [str(catalog.parse(spec)) for spec in catalog.split_specs(_ATTACKS.value)]
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  medians = round_time_medians(attacks)
  print(f'Round time on {_TASK.value} (synthetic data), {_CLIENTS_PER_ROUND.value} clients ({_CORRUPTED.value} '
        f'corrupted), median of {_ROUNDS.value}: FedAvg {medians["fedavg"]:.3f} s')
  width = max(len(name) for name in attacks + ['attack'])
  print(f'{"attack":<{width}} {"seconds":>8} {"/ FedAvg":>9}')
  for name in attacks:
    print(f'{name:<{width}} {medians[name]:8.3f} {medians[name] / medians["fedavg"]:9.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
