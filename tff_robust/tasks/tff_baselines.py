"""Tasks from `tff.simulation.baselines`: EMNIST character recognition and Shakespeare next character.

Real data comes from TFF's loaders (network or a local cache); `use_synthetic_data=True` uses TFF's own
synthetic stand-in of the same shapes, which works offline. The training clients are split by device: a
seeded 20% become unseen test devices, evaluated one by one (at most 200 devices per group) along with
the training devices; the pooled centralized test set of TFF stays the `evaluate` metric.

Local training keeps TFF's preprocessing (shuffle, repeat, batch, reshape or tokenize) and its shuffle buffers
(418 EMNIST images, 50 Shakespeare snippets), but the shuffle is seeded by the task's seed (`seeded_shuffle`):
TFF's own takes the next op seed of TensorFlow's per-process sequence, so a resumed process shuffled otherwise
than an uninterrupted one. As with the other tasks' `base.Batching`, a client then trains on the same order in
every round (TFF's drew a new one each round) unless a per-round transform (the runner's `--max_client_examples`,
`--minibatch_fraction`) reshuffles it. `shakespeare_rnn` resumes exactly. `emnist_cnn` reshapes its
batches in order and draws its initial weights from the seed (TFF's `debug_seed`, of a seed spread by NumPy's
`SeedSequence`: TFF seeds layer i with debug_seed + i), but it is not reproducible: TFF traces its Dropout layers
into graphs without a TensorFlow seed, so every run draws other masks.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

_MAX_EVALUATED_DEVICES = 200
_EMNIST_CLASSES = 62  # only_digits=False
_EMNIST_SHUFFLE_BUFFER = 418  # TFF's emnist_preprocessing.MAX_CLIENT_DATASET_SIZE: every client's images
_SHAKESPEARE_SHUFFLE_BUFFER = 50  # TFF's char_prediction_preprocessing.DEFAULT_SHUFFLE_BUFFER_SIZE (snippets)


def seeded_shuffle(preprocess, *, buffer_size: int, seed: int):
  """`preprocess` (TFF's, built with shuffle buffer 1: no shuffle of its own) after a shuffle of `buffer_size`
  examples seeded by `seed`, reshuffled each epoch (TFF's repeat comes after it): the order is TensorFlow's
  function of `seed` and the global seed, as the other tasks' `base.Batching`."""
  def shuffled_then_preprocessed(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return preprocess(dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True))
  return shuffled_then_preprocessed


def initializer_seed(seed: int) -> int:
  """TFF's `debug_seed` for the task seed `seed`: a 32-bit draw of `np.random.SeedSequence(seed)`, so that the
  seeds TFF gives the layers (debug_seed + 1, + 2, ...) of adjacent task seeds do not coincide."""
  return int(np.random.SeedSequence(seed).generate_state(1)[0])


def _from_baseline(
    name, build_baseline, accuracy_metric, corrupt_train, *, shuffle_buffer, client_epochs, client_batch_size, seed,
    use_synthetic_data, flip_labels=None,
):
  spec = tff.simulation.baselines.ClientSpec(
      num_epochs=client_epochs, batch_size=client_batch_size, shuffle_buffer_size=1
  )
  try:
    baseline = build_baseline(spec, use_synthetic_data=use_synthetic_data)
  except Exception as error:  # TFF raises whatever its downloader raises (URLError, OSError, ...).
    raise base.DataUnavailableError(
        f'Could not load the real data of task {name!r} ({type(error).__name__}: {error}). Without network '
        'access or a local TFF dataset cache, pass --use_synthetic_data.'
    ) from error
  datasets = baseline.datasets
  metric_names = {accuracy_metric: 'accuracy'}
  evaluator = evaluation.CentralizedEvaluator(
      baseline.model_fn, datasets.get_centralized_test_data(), metric_names
  )
  train_data, test_devices = split_by_device(datasets.train_data)
  groups = {'train': evaluation.DeviceGroup(_sample_devices(train_data), datasets.eval_preprocess_fn, True)}
  if test_devices is not None:
    groups['eval'] = evaluation.DeviceGroup(_sample_devices(test_devices), datasets.eval_preprocess_fn, False)
  return base.Task(
      name, baseline.model_fn, train_data,
      preprocess_train=seeded_shuffle(datasets.train_preprocess_fn, buffer_size=shuffle_buffer, seed=seed),
      corrupt_train=corrupt_train, evaluate=evaluator,
      device_evaluator=evaluation.DeviceEvaluator(baseline.model_fn, groups, metric_names), flip_labels=flip_labels,
  )


def split_by_device(client_data, *, test_fraction: float = 0.2, seed: int = 0):
  """(training devices, unseen test devices): a seeded `test_fraction` of the client ids (at least one)
  become test devices, as Superquantile FL splits by device. With a single client there is no test device."""
  if not 0 < test_fraction < 1:
    raise ValueError(f'test_fraction must be in (0, 1), got {test_fraction}')
  ids = sorted(client_data.client_ids)
  if len(ids) < 2:
    return client_data, None
  shuffled = [ids[i] for i in np.random.default_rng(seed).permutation(len(ids))]
  num_test = max(1, int(round(test_fraction * len(ids))))
  subset = lambda chosen: tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      sorted(chosen), client_data.serializable_dataset_fn
  )
  return subset(shuffled[num_test:]), subset(shuffled[:num_test])


def _sample_devices(client_data):
  """At most _MAX_EVALUATED_DEVICES devices (seeded): per-device evaluation runs device by device."""
  ids = sorted(client_data.client_ids)
  if len(ids) <= _MAX_EVALUATED_DEVICES:
    return client_data
  chosen = np.random.default_rng(0).choice(len(ids), _MAX_EVALUATED_DEVICES, replace=False)
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      sorted(ids[i] for i in chosen), client_data.serializable_dataset_fn
  )


def create_emnist_cnn_task(*, client_epochs, client_batch_size, seed, use_synthetic_data) -> base.Task:
  """EMNIST-62 with TFF's baseline CNN (`model_id='cnn_dropout'`), its initial weights and shuffles seeded by
  `seed`."""
  return _from_baseline(
      'emnist_cnn',
      lambda spec, **kw: tff.simulation.baselines.emnist.create_character_recognition_task(
          spec, model_id='cnn_dropout', only_digits=False, debug_seed=initializer_seed(seed), **kw
      ),
      'sparse_categorical_accuracy',
      data_corruption.negate_images('pixels'),
      shuffle_buffer=_EMNIST_SHUFFLE_BUFFER, client_epochs=client_epochs, client_batch_size=client_batch_size,
      seed=seed, use_synthetic_data=use_synthetic_data,
      flip_labels=data_corruption.flip_labels('label', _EMNIST_CLASSES),
  )


def create_shakespeare_rnn_task(*, client_epochs, client_batch_size, seed, use_synthetic_data) -> base.Task:
  """Shakespeare next-character prediction with TFF's baseline recurrent model, its shuffles seeded by `seed`.

  `accuracy` is the model's own (TFF 0.87's `MaskedCategoricalAccuracy`): padding targets are left out, while
  out-of-vocabulary, beginning- and end-of-snippet targets count (TFF 0.87 has no metric without them)."""
  return _from_baseline(
      'shakespeare_rnn',
      tff.simulation.baselines.shakespeare.create_character_prediction_task,
      'accuracy',
      data_corruption.reverse_text('snippets'),
      shuffle_buffer=_SHAKESPEARE_SHUFFLE_BUFFER, client_epochs=client_epochs, client_batch_size=client_batch_size,
      seed=seed, use_synthetic_data=use_synthetic_data,
  )
