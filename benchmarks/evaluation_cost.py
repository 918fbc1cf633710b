r"""Cost of per-device evaluation relative to one FedAvg round over as many clients, side by side in one process.

  python -m benchmarks.evaluation_cost

Task `shakespeare_gru_dfl` on the Shakespeare plays (offline; GRU(128), 77,109 parameters): the first
`--num_devices` of its training roles (572 in all), each role cut to its first `--examples_per_device`
windows (the cost cap: the same small per-device data for evaluation and training). Timed, interleaved
(`timing.interleaved_medians`, one untimed warm-up each):
* one-pass evaluation: `evaluation.DeviceEvaluator` of one group of all the devices (batches of 256, as the
  paper tasks evaluate), including its per-call model build and trace, as the training loop calls it;
* one call per device (the reference, unless --noper_device_reference): `evaluation.PersonalEvaluator` with
  the same weights for every device, which runs the same metrics device by device as `DeviceEvaluator`
  did before it evaluated a group in one pass;
* one FedAvg round (`process.next`) over the same devices as its cohort, 1 local epoch, batch 16 (the
  Delta-FL Shakespeare config's).
Reports the medians and evaluation / round. Ratios, not absolute times, are the result.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import evaluation  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import paper_splits  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import shakespeare_papers  # pylint: disable=g-import-not-at-top

_NUM_DEVICES = flags.DEFINE_integer('num_devices', 572, 'Devices evaluated and clients of the round.',
                                    lower_bound=1)
_EXAMPLES_PER_DEVICE = flags.DEFINE_integer('examples_per_device', 64, 'First windows kept of each role.',
                                            lower_bound=1)
_REPEATS = flags.DEFINE_integer('repeats', 3, 'Timed calls of each (after one warm-up).', lower_bound=1)
_PER_DEVICE_REFERENCE = flags.DEFINE_boolean('per_device_reference', True,
                                             'Also time the one-call-per-device evaluation.')
_CLIENT_BATCH_SIZE = 16


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  task = shakespeare_papers.create_dfl_task(client_epochs=1, client_batch_size=_CLIENT_BATCH_SIZE, seed=0)
  roles = task.train_data.client_ids
  if _NUM_DEVICES.value > len(roles):
    raise ValueError(f'num_devices must be in [1, {len(roles)}], got {_NUM_DEVICES.value}')
  dataset_of = task.train_data.serializable_dataset_fn
  devices = tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      roles[:_NUM_DEVICES.value], lambda role: dataset_of(role).take(_EXAMPLES_PER_DEVICE.value)
  )
  weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  batched = lambda dataset: dataset.batch(paper_splits.EVAL_BATCH_SIZE)
  one_pass = evaluation.DeviceEvaluator(task.model_fn, {'devices': evaluation.DeviceGroup(devices, batched, True)}, {})
  calls = {'one-pass evaluation': lambda: one_pass(weights)}
  if _PER_DEVICE_REFERENCE.value:
    per_device = evaluation.PersonalEvaluator(task.model_fn, devices, {}, batch_size=paper_splits.EVAL_BATCH_SIZE)
    calls['one call per device'] = lambda: per_device(lambda device: weights)
  process = algorithms.build_learning_process('fedavg', task.model_fn, algorithms.AlgorithmConfig())
  state = process.set_model_weights(process.initialize(), weights)
  cohort = [task.preprocess_train(devices.create_tf_dataset_for_client(device)) for device in devices.client_ids]

  def fedavg_round():
    process.next(state, cohort)  # the same state every time: each timed round does the same work

  calls['FedAvg round'] = fedavg_round
  medians = timing.interleaved_medians(calls, _REPEATS.value)
  examples = sum(int(metrics) for metrics in one_pass(weights)['devices'].num_examples)
  print(f'shakespeare_gru_dfl (plays), {_NUM_DEVICES.value} devices, first {_EXAMPLES_PER_DEVICE.value} windows '
        f'each ({examples} examples), median of {_REPEATS.value} interleaved calls:')
  for name, seconds in medians.items():
    print(f'  {name:22s} {seconds:8.3f} s   / FedAvg round = {seconds / medians["FedAvg round"]:.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
