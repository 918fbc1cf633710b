r"""The runner's final evaluation of a paper task against Keras inference on the same windows, side by side.

  python -m benchmarks.final_evaluation_cost [--max_evaluated_devices=N] [--repeats=R]

Task `shakespeare_lstm_rfa` on the plays (offline): every role's test windows (438,672 for all 1,144 roles;
`--max_evaluated_devices` keeps a seeded sample of roles, as the runner's option does). Timed, interleaved
(`timing.interleaved_medians`, one untimed warm-up each), all with the same weights:
* the runner's evaluation of a global model: one pass over every role's test windows giving the per-role metrics
  and, from their summed states, the pooled `eval/*` (`PersonalEvaluator.one_model`, `Task.pooled_evaluation_group`);
* the two passes it replaced (until 2026-11-26): the pooled pass (`task.evaluate`), then the per-role pass;
* Keras `Model.evaluate` of the same model on the pooled windows in batches of 256: the floor.
Prints the medians and each / Keras. Issue 36's aim: the runner's evaluation <= 2x Keras.
"""

import os
from typing import Callable

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from benchmarks import timing  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import evaluation  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import paper_models  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import paper_splits  # pylint: disable=g-import-not-at-top

_MAX_EVALUATED_DEVICES = flags.DEFINE_integer(
    'max_evaluated_devices', None, 'Evaluate a seeded sample of this many roles (default: every role).', lower_bound=1
)
_REPEATS = flags.DEFINE_integer('repeats', 3, 'Timed calls of each (after one warm-up).', lower_bound=1)


def keras_floor(model_weights: tff.learning.models.ModelWeights, test_data) -> Callable[[], list]:
  """Keras `evaluate` of the task's Keras model with `model_weights` on every window of `test_data` pooled."""
  model = paper_models.shakespeare_lstm_rfa()
  model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=['accuracy'])
  model_weights.assign_weights_to(model)
  windows = test_data.create_tf_dataset_from_all_clients(seed=0).batch(paper_splits.EVAL_BATCH_SIZE).map(
      lambda batch: (batch['x'], batch['y'])
  )
  return lambda: model.evaluate(windows, verbose=0)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  options = {} if _MAX_EVALUATED_DEVICES.value is None else {'max_evaluated_devices': _MAX_EVALUATED_DEVICES.value}
  task = tasks.create_task('shakespeare_lstm_rfa', client_epochs=1, client_batch_size=10, seed=0,
                           shakespeare_source='plays', **options)
  weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  personal = evaluation.PersonalEvaluator(task.model_fn, task.personal_test_data, {},
                                          batch_size=paper_splits.EVAL_BATCH_SIZE)
  last = {}  # the runner's last result, for the header line (no extra pass)
  calls = {
      'runner (one pass)': lambda: last.update(personal.one_model(weights)),
      'two passes (before)': lambda: (task.evaluate(weights), personal.one_model(weights)),
      'Keras evaluate': keras_floor(weights, task.personal_test_data),
  }
  medians = timing.interleaved_medians(calls, _REPEATS.value)
  one_pass = last['personal']
  print(f'shakespeare_lstm_rfa (plays), {len(one_pass.device_ids)} roles, {int(one_pass.num_examples.sum())} test '
        f'windows, batches of {paper_splits.EVAL_BATCH_SIZE}, median of {_REPEATS.value} interleaved calls:')
  for name, seconds in medians.items():
    print(f'  {name:20s} {seconds:8.2f} s   / Keras = {seconds / medians["Keras evaluate"]:.2f}')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
