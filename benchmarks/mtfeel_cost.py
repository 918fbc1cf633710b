r"""Cost of MtFEEL and its baselines on digits_cohorts: uplink bits per round and round time relative to FedAvg.

  python -m benchmarks.mtfeel_cost
  python -m benchmarks.mtfeel_cost --rounds=1

(a) Uplink bits per device per round (docs/guides/mtfeel.md), measured in one round on the error-free
channel: MtFEEL sends N d sign bits and N float32 losses (its `aggregator/uplink_bits`), signSGD d sign bits
(its `aggregator/channel/bits`); FedSGD sends 32 d bits, d being the model's parameter count. Ratios to FedSGD.
(b) Round time of MtFEEL, signSGD and FedSGD relative to FedAvg on the same task and initial model, all N
devices in every round (FedAvg too), one pass over each device's 20 examples (FedAvg: one local epoch in one
batch), rounds interleaved. MtFEEL is built with dde_steps = 0: its discrepancy estimation is a one-off phase
before training, not part of a round. Ratios, not absolute times, are the result.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import metrics_utils  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import digits_cohorts  # pylint: disable=g-import-not-at-top

_ROUNDS = flags.DEFINE_integer('rounds', 5, 'Timed rounds per process (after one warm-up).', lower_bound=1)
_ALGORITHMS = ('fedavg', 'mtfeel', 'signsgd', 'fedsgd')  # FedAvg first: its initial model is every process's
_FLOAT_BITS = 32


def _bits_per_device(process, cohort, key) -> float:
  """Metric `key` (bits summed over the devices) of one round of `process` from its initial state, per device."""
  metrics = metrics_utils.flatten_metrics(process.next(process.initialize(), cohort).metrics)
  return metrics[key] / len(cohort)


def main(argv):
  del argv
  logging.set_verbosity(logging.ERROR)
  execution_context.set_local_execution_context()
  task = digits_cohorts.create_task(client_epochs=1, client_batch_size=digits_cohorts.TRAIN_PER_DEVICE, seed=0)
  cohort = [task.client_dataset(cid) for cid in task.train_data.client_ids]
  num_devices = len(cohort)
  config = algorithms.AlgorithmConfig(dde_steps=0)
  processes = {name: algorithms.build_learning_process(name, task.model_fn, config, clients_per_round=num_devices)
               for name in _ALGORITHMS}
  fedavg = processes['fedavg']
  d = sum(np.size(w) for w in fedavg.get_model_weights(fedavg.initialize()).trainable)
  uplink = {
      'mtfeel': (_bits_per_device(processes['mtfeel'], cohort, 'aggregator/uplink_bits'),
                 f'N d sign + 32 N loss bits = {num_devices * d + _FLOAT_BITS * num_devices:,}'),
      'signsgd': (_bits_per_device(processes['signsgd'], cohort, 'aggregator/channel/bits'), f'd sign bits = {d:,}'),
      'fedsgd': (_FLOAT_BITS * d, f'32 d = {_FLOAT_BITS * d:,}'),
  }
  print(f'Uplink per device per round on digits_cohorts (N = {num_devices} devices, d = {d} parameters):')
  for name, (bits, formula) in uplink.items():
    print(f'  {name:8s} {bits:9,.0f} bits  {"(" + formula + ")":40s} / FedSGD = {bits / uplink["fedsgd"][0]:.3f}')
  medians = timing.round_time_medians(processes, cohort, _ROUNDS.value)
  print(f'Round time, all {num_devices} devices every round, one pass over each device\'s data, median of '
        f'{_ROUNDS.value} interleaved rounds (MtFEEL with dde_steps=0, no discrepancy estimation):')
  for name, seconds in medians.items():
    print(f'  {name:8s} {seconds:.3f} s   / FedAvg = {seconds / medians["fedavg"]:.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
