"""Tasks from `tff.simulation.baselines`: EMNIST character recognition and Shakespeare next character.

Real data comes from TFF's loaders (network or a local cache); `use_synthetic_data=True` uses TFF's own
synthetic stand-in of the same shapes, which works offline.
"""

import tensorflow_federated as tff

from tff_robust.simulation import data_corruption
from tff_robust.simulation.tasks import base


def _from_baseline(
    name, build_baseline, accuracy_metric, corrupt_train, *, client_epochs, client_batch_size, use_synthetic_data
):
  spec = tff.simulation.baselines.ClientSpec(num_epochs=client_epochs, batch_size=client_batch_size)
  try:
    baseline = build_baseline(spec, use_synthetic_data=use_synthetic_data)
  except Exception as error:  # TFF raises whatever its downloader raises (URLError, OSError, ...).
    raise RuntimeError(
        f'Could not load the real data of task {name!r} ({type(error).__name__}: {error}). Without network '
        'access or a local TFF dataset cache, pass --use_synthetic_data.'
    ) from error
  datasets = baseline.datasets
  evaluator = base.CentralizedEvaluator(
      baseline.model_fn, datasets.get_centralized_test_data(), {accuracy_metric: 'accuracy'}
  )
  return base.Task(
      name, baseline.model_fn, datasets.train_data,
      preprocess_train=datasets.train_preprocess_fn, corrupt_train=corrupt_train, evaluate=evaluator,
  )


def create_emnist_cnn_task(*, client_epochs, client_batch_size, use_synthetic_data) -> base.Task:
  """EMNIST-62 with TFF's baseline CNN (`model_id='cnn_dropout'`)."""
  return _from_baseline(
      'emnist_cnn',
      lambda spec, **kw: tff.simulation.baselines.emnist.create_character_recognition_task(
          spec, model_id='cnn_dropout', only_digits=False, **kw
      ),
      'sparse_categorical_accuracy',
      data_corruption.negate_images('pixels'),
      client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data,
  )


def create_shakespeare_rnn_task(*, client_epochs, client_batch_size, use_synthetic_data) -> base.Task:
  """Shakespeare next-character prediction with TFF's baseline recurrent model."""
  return _from_baseline(
      'shakespeare_rnn',
      tff.simulation.baselines.shakespeare.create_character_prediction_task,
      'accuracy_without_out_of_vocab_or_end_of_sentence',
      data_corruption.reverse_text('snippets'),
      client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data,
  )
