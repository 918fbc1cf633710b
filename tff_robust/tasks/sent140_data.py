"""Sent140 from `tensorflow_datasets` ('sentiment140'), grouped by Twitter account into devices.

As in RFA App. D.1.3 and Superquantile FL App. C.1.2 (rfa notes Sec. 3.3, superquantile_fl notes Sec. 3.3):
both CSV files of Sentiment140 (TFDS's 'train' and 'test' splits, the 1,600,498 tweets of LEAF) are grouped
by the 'user' field; accounts with fewer than 50 tweets are discarded, leaving 877 devices. The label is
binary, 1 for polarity 4 (positive) and 0 for polarity 0; the few neutral tweets (polarity 2, only in the
'test' file) have no binary label and are dropped after the count. Within a device, tweets are put in a
canonical order (text, then label) so that the seeded splits do not depend on TFDS's file order.

Text becomes token ids (the papers name only GloVe, no tokenizer): lower-cased (GloVe's words are), then
LEAF's tokens, runs of word characters and apostrophes or one of . , ! ? ; ; id 0 pads, id 1 is any word
outside the vocabulary, ids 2.. are the vocabulary's words. A tweet without a token is one
out-of-vocabulary token, so every tweet has |x| >= 1.
"""

import collections
import re
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf

from tff_robust.tasks import base

DATASET_NAME = 'sentiment140'
SPLITS = 'train+test'
MIN_TWEETS_PER_DEVICE = 50
POSITIVE_POLARITY = 4
NEGATIVE_POLARITY = 0
PAD_ID = 0
OUT_OF_VOCABULARY_ID = 1
NUM_RESERVED_IDS = 2
_TOKEN = re.compile(r"[\w']+|[.,!?;]")
_BATCH = 16384


def _load(data_dir: Optional[str], download: bool) -> tf.data.Dataset:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  # only Sent140 needs it (~2 s)
  try:
    return tfds.load(DATASET_NAME, split=SPLITS, data_dir=data_dir, download=download)
  except Exception as error:  # TFDS raises AssertionError, FileNotFoundError, download errors, ...
    raise base.DataUnavailableError(
        f'Could not load {DATASET_NAME!r} from data_dir={data_dir!r} ({type(error).__name__}: {error}). '
        'Without network access, prepare it where TFDS looks (`tfds build sentiment140 --data_dir=DIR` on a '
        'machine with network, then copy DIR) and pass that data_dir or set TFDS_DATA_DIR.'
    ) from error


def load_devices(
    data_dir: Optional[str] = None, *, min_tweets: int = MIN_TWEETS_PER_DEVICE, download: bool = False
) -> dict:
  """The accounts with >= `min_tweets` tweets: {user: (texts, labels)}.

  Args:
    data_dir: TFDS data directory (None: TFDS's default, `TFDS_DATA_DIR` or ~/tensorflow_datasets).
    min_tweets: smallest number of tweets (neutral ones included) an account needs to be kept.
    download: whether TFDS may download and prepare the data when it is not in `data_dir`.

  Returns:
    texts as a list of str and int32 labels of shape (n,), in canonical order; users sorted. An account
    whose kept tweets are all neutral is left out.

  Raises:
    RuntimeError: if TFDS cannot load the data.
    ValueError: if `min_tweets` is not an integer >= 1.
  """
  if isinstance(min_tweets, bool) or not isinstance(min_tweets, (int, np.integer)) or min_tweets < 1:
    raise ValueError(f'min_tweets must be an integer >= 1, got {min_tweets!r}')
  dataset = _load(data_dir, download).batch(_BATCH)  # batched first: a map per tweet is ~10x slower
  counts = collections.Counter()
  for batch in dataset.as_numpy_iterator():
    counts.update(batch['user'].tolist())
  kept = {user for user, count in counts.items() if count >= min_tweets}
  tweets = collections.defaultdict(list)
  for batch in dataset.as_numpy_iterator():
    for user, text, polarity in zip(batch['user'].tolist(), batch['text'].tolist(), batch['polarity'].tolist()):
      if user in kept and polarity in (POSITIVE_POLARITY, NEGATIVE_POLARITY):
        tweets[user.decode('utf-8')].append((text.decode('utf-8'), int(polarity == POSITIVE_POLARITY)))
  devices = {}
  for user in sorted(tweets):
    pairs = sorted(tweets[user])
    devices[user] = ([text for text, _ in pairs], np.array([label for _, label in pairs], np.int32))
  return devices


def split_within_devices(devices: dict, *, train_fraction: float = 0.8, seed: int = 0):
  """RFA's split by sample (App. D.1.3): a random floor(train_fraction * n) (at least 1) of each device's
  tweets train, the rest test. Returns ({user: (texts, labels)} train, same for test)."""
  if isinstance(train_fraction, bool) or not isinstance(train_fraction, float) or not 0 < train_fraction < 1:
    raise ValueError(f'train_fraction must be a float in (0, 1), got {train_fraction!r}')
  rng = np.random.default_rng(seed)
  train, test = {}, {}
  for user in sorted(devices):
    texts, labels = devices[user]
    order = rng.permutation(len(labels))
    num_train = max(1, int(train_fraction * len(labels)))
    train[user] = _take(texts, labels, order[:num_train])
    test[user] = _take(texts, labels, order[num_train:])
  return train, test


def split_by_device(devices: dict, *, seed: int = 0):
  """Superquantile FL's split by device (App. C.1.2): a seeded floor(N / 2) of the devices train (438 of
  877) and the others are unseen test devices (439). Returns (train devices, test devices)."""
  users = sorted(devices)
  order = np.random.default_rng(seed).permutation(len(users))
  num_train = len(users) // 2
  train = {users[i]: devices[users[i]] for i in sorted(order[:num_train])}
  test = {users[i]: devices[users[i]] for i in sorted(order[num_train:])}
  return train, test


def _take(texts, labels, indices):
  return [texts[i] for i in indices], labels[indices]


def tokenize(text: str) -> list:
  """Lower-cased tokens: runs of word characters and apostrophes, or one of . , ! ? ;"""
  return _TOKEN.findall(text.lower())


def token_counts(texts: Iterable[str]) -> collections.Counter:
  """How often each token occurs in `texts`."""
  counts = collections.Counter()
  for text in texts:
    counts.update(tokenize(text))
  return counts


def most_frequent(counts: dict, size: Optional[int] = None) -> list:
  """The `size` most frequent tokens (all if None), by decreasing count, ties in alphabetical order."""
  ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
  return [token for token, _ in ranked[:size]]


def encode(texts: Iterable[str], vocabulary: list, sequence_length: int) -> np.ndarray:
  """int32 token ids of shape (n, sequence_length): the first `sequence_length` tokens of each text, word i
  of `vocabulary` as id i + 2, other words as id 1, padded with id 0 at the end."""
  if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 1:
    raise ValueError(f'sequence_length must be an integer >= 1, got {sequence_length!r}')
  ids = {token: index + NUM_RESERVED_IDS for index, token in enumerate(vocabulary)}
  texts = list(texts)
  encoded = np.full((len(texts), sequence_length), PAD_ID, np.int32)
  for row, text in enumerate(texts):
    tokens = tokenize(text)[:sequence_length] or [None]
    encoded[row, :len(tokens)] = [ids.get(token, OUT_OF_VOCABULARY_ID) for token in tokens]
  return encoded


def read_glove(path: str, tokens: set, dimension: int) -> dict:
  """{token: float32 vector} for the `tokens` found in a GloVe text file ('word v_1 ... v_dimension' lines).

  Raises:
    ValueError: if a line of a wanted token does not hold `dimension` numbers.
  """
  vectors = {}
  with tf.io.gfile.GFile(path, 'r') as lines:
    for number, line in enumerate(lines, 1):
      word, _, rest = line.rstrip('\n').partition(' ')
      if word not in tokens or word in vectors:
        continue
      values = np.array(rest.split(), np.float32)
      if values.shape != (dimension,):
        raise ValueError(f'{path}:{number}: expected {dimension} numbers for {word!r}, got {values.size}')
      vectors[word] = values
  return vectors


def embedding_matrix(vocabulary: list, vectors: dict, dimension: int) -> np.ndarray:
  """float32 (len(vocabulary) + 2, dimension): zero rows for padding and out-of-vocabulary, then the
  vocabulary's vectors in order."""
  matrix = np.zeros((len(vocabulary) + NUM_RESERVED_IDS, dimension), np.float32)
  for index, token in enumerate(vocabulary):
    matrix[index + NUM_RESERVED_IDS] = vectors[token]
  return matrix
