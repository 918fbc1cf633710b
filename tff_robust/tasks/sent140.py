"""Sent140 tasks: the 877 accounts with >= 50 tweets (`sent140_data`) and the linear or LSTM model
(`sent140_models`), split as each paper does (rfa notes Sec. 3.2-3.3, superquantile_fl notes Sec. 3.1-3.3):

  * 'sent140_linear', 'sent140_lstm': RFA's split by sample within each device (App. D.1.3): every device
    trains on a random 80% of its tweets; `personal_test_data` is its other 20% and `evaluate` runs on all
    of them pooled. (RFA trains the linear model on Sent140; the LSTM is offered on the same split.)
  * 'sent140_linear_by_device', 'sent140_lstm_by_device': Delta-FL's split by device (App. C.1.2): 438
    training devices train on all their tweets and 439 unseen test devices are evaluated one by one
    (`device_evaluator`, every device of both groups); `evaluate` runs on the test devices' tweets pooled.

Tokens: the linear model averages the embeddings of up to 140 tokens (every token of a 140-character
tweet); the LSTM reads the first 25 tokens (LEAF's and Fed+'s length). The embedding is GloVe, frozen, when
a 50-dimensional GloVe text file is given (`glove_path`, or the TFF_ROBUST_GLOVE_PATH environment variable):
the vocabulary is then every token of the kept tweets that GloVe has. Otherwise (the one deviation from
the papers, see `sent140_models`) the embedding is trainable over the 10,000 most frequent tokens of the
training tweets. A corrupted device's labels are flipped, y -> 1 - y (RFA Sec. 5.1).
"""

import os
from typing import Optional

import numpy as np

from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation
from tff_robust.tasks import sent140_data
from tff_robust.tasks import sent140_models

# Task name -> (model kind, split).
TASK_SETTINGS = {
    'sent140_linear': ('linear', 'within_device'),
    'sent140_lstm': ('lstm', 'within_device'),
    'sent140_linear_by_device': ('linear', 'by_device'),
    'sent140_lstm_by_device': ('lstm', 'by_device'),
}
SEQUENCE_LENGTHS = {'linear': 140, 'lstm': 25}
VOCABULARY_SIZE = 10_000
TRAIN_FRACTION = 0.8
GLOVE_PATH_ENV = 'TFF_ROBUST_GLOVE_PATH'
_EVALUATION_BATCH = 256


def _vocabulary(train: dict, every: dict, glove_path: Optional[str], vocabulary_size: int):
  """(vocabulary, pretrained matrix or None): GloVe's tokens among all kept tweets, or the most frequent
  training tokens."""
  if glove_path is None:
    counts = sent140_data.token_counts(text for texts, _ in train.values() for text in texts)
    return sent140_data.most_frequent(counts, vocabulary_size), None
  counts = sent140_data.token_counts(text for texts, _ in every.values() for text in texts)
  vectors = sent140_data.read_glove(glove_path, set(counts), sent140_models.EMBEDDING_DIMENSION)
  vocabulary = sent140_data.most_frequent({t: c for t, c in counts.items() if t in vectors})
  return vocabulary, sent140_data.embedding_matrix(vocabulary, vectors, sent140_models.EMBEDDING_DIMENSION)


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, data_dir: Optional[str] = None,
    glove_path: Optional[str] = None, download: bool = True,
    min_tweets: int = sent140_data.MIN_TWEETS_PER_DEVICE, vocabulary_size: int = VOCABULARY_SIZE,
    split_seed: int = 0, l2_regularization: float = 0.0,
) -> base.Task:
  """The task `name` of TASK_SETTINGS from TFDS's 'sentiment140' in `data_dir`.

  Args:
    name: a key of TASK_SETTINGS.
    client_epochs, client_batch_size, seed: the local-training pipeline.
    data_dir: TFDS data directory (None: TFDS_DATA_DIR or ~/tensorflow_datasets).
    glove_path: 50-dimensional GloVe text file; None: the TFF_ROBUST_GLOVE_PATH environment variable, and
      if that is unset too, a trainable embedding.
    download: whether TFDS may download the data when `data_dir` lacks it.
    min_tweets: smallest number of tweets of a kept account (the papers' 50).
    vocabulary_size: words of the trainable embedding's vocabulary (ignored with GloVe).
    split_seed: seed of the train/test split (fixed across runs, as the papers hold it fixed).
    l2_regularization: lambda >= 0 of (lambda/2)||w||^2 on the linear model's w (Delta-FL; linear tasks only).

  Raises:
    ValueError: if `name` is unknown or no account is kept.
    RuntimeError: if TFDS cannot load the data.
  """
  if name not in TASK_SETTINGS:
    raise ValueError(f'name must be one of {tuple(TASK_SETTINGS)}, got {name!r}')
  kind, split = TASK_SETTINGS[name]
  devices = sent140_data.load_devices(data_dir, min_tweets=min_tweets, download=download)
  if len(devices) < 2:
    raise ValueError(f'Sent140 needs >= 2 accounts with >= {min_tweets} tweets, found {len(devices)}')
  if split == 'within_device':
    train, test = sent140_data.split_within_devices(devices, train_fraction=TRAIN_FRACTION, seed=split_seed)
  else:
    train, test = sent140_data.split_by_device(devices, seed=split_seed)
  glove_path = glove_path or os.environ.get(GLOVE_PATH_ENV) or None
  vocabulary, pretrained = _vocabulary(train, devices, glove_path, vocabulary_size)
  length = SEQUENCE_LENGTHS[kind]
  encode = lambda part: {
      user: (sent140_data.encode(texts, vocabulary, length), labels) for user, (texts, labels) in part.items()
  }
  train, test = encode(train), encode(test)
  model_fn = sent140_models.make_model_fn(
      kind, num_tokens=len(vocabulary) + sent140_data.NUM_RESERVED_IDS, sequence_length=length,
      pretrained=pretrained, l2_regularization=l2_regularization,
  )
  x_test = np.concatenate([x for x, _ in test.values()])
  y_test = np.concatenate([y for _, y in test.values()])
  train_data, test_data = base.client_data_from_arrays(train), base.client_data_from_arrays(test)
  batch = lambda dataset: dataset.batch(_EVALUATION_BATCH)
  device_evaluator = None if split == 'within_device' else evaluation.DeviceEvaluator(model_fn, {
      'train': evaluation.DeviceGroup(train_data, batch, weighted=True),
      'eval': evaluation.DeviceGroup(test_data, batch, weighted=False),
  }, {})
  return base.Task(
      name, model_fn, train_data,
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.flip_labels('y', 2),
      evaluate=evaluation.CentralizedEvaluator(
          model_fn, base.test_dataset_from_arrays(x_test, y_test, _EVALUATION_BATCH), {}
      ),
      device_evaluator=device_evaluator,
      personal_test_data=test_data if split == 'within_device' else None,
      flip_labels=data_corruption.flip_labels('y', 2),
  )
