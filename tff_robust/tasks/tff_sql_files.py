"""The SQLite files that TFF's EMNIST and Shakespeare loaders read: where they are, their per-client counts,
and small local ones written in the same format.

`tff.simulation.datasets.emnist.load_data` and `shakespeare.load_data` (TFF 0.87) download
`<cache_dir>/emnist_all.sqlite` and `<cache_dir>/shakespeare.sqlite` (cache_dir defaults to `~/.tff`) unless
the file is already there, then read it as `SqlClientData`: a table `examples(split_name, client_id,
serialized_example_proto)` of `tf.train.Example`s and a table `client_metadata(client_id, split_name,
num_examples)`. Every client of these datasets is in both splits (EMNIST: 'all_train'/'all_test' for the 62
classes, 'digits_only_train'/'digits_only_test' for digits; Shakespeare: 'train'/'test').

Writing a small file of that format into a directory and pointing the real loader's `cache_dir` at it loads
local data with no network access (tests; `use_synthetic_data` of the paper tasks). TFF's own
`save_to_sql_client_data` puts each client in a single split, so it cannot write these files.
"""

import atexit
import os
import shutil
import sqlite3
import tempfile
from typing import Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

EMNIST_FILENAME = 'emnist_all.sqlite'
SHAKESPEARE_FILENAME = 'shakespeare.sqlite'
EMNIST_SPLITS = ('all_train', 'all_test')
SHAKESPEARE_SPLITS = ('train', 'test')


def database_path(cache_dir: Optional[str], filename: str) -> str:
  """Where TFF's loader keeps `filename` (its `download.get_compressed_file`: `~/.tff` by default)."""
  return os.path.join(cache_dir or os.path.join(os.path.expanduser('~'), '.tff'), filename)


def example_counts(path: str, split_name: str) -> dict[str, int]:
  """{client_id: number of examples} of one split, from the file's `client_metadata` table."""
  with sqlite3.connect(path) as connection:
    rows = connection.execute(
        'SELECT client_id, num_examples FROM client_metadata WHERE split_name = ?;', (split_name,)
    ).fetchall()
  return {client_id: int(count) for client_id, count in rows}


def emnist_example(pixels: np.ndarray, label: int) -> bytes:
  """One EMNIST example as the loader parses it: 'pixels' (28x28 floats in [0, 1]) and 'label'."""
  feature = {
      'pixels': tf.train.Feature(float_list=tf.train.FloatList(value=np.asarray(pixels, np.float32).ravel())),
      'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def shakespeare_example(snippet: str) -> bytes:
  """One Shakespeare example as the loader parses it: a 'snippets' string."""
  feature = {'snippets': tf.train.Feature(bytes_list=tf.train.BytesList(value=[snippet.encode('utf-8')]))}
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_database(path: str, examples: Mapping[str, Mapping[str, Sequence[bytes]]]) -> None:
  """Writes {split_name: {client_id: serialized examples}} as a `SqlClientData` file (no overwriting)."""
  if os.path.exists(path):
    raise FileExistsError(f'{path} exists; refusing to overwrite a dataset file')
  os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
  partial = path + '.partial'
  if os.path.exists(partial):
    os.remove(partial)
  with sqlite3.connect(partial) as connection:
    connection.execute(
        'CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, '
        'serialized_example_proto BLOB NOT NULL);'
    )
    connection.execute(
        'CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, '
        'num_examples INTEGER NOT NULL);'
    )
    for split_name, clients in examples.items():
      for client_id, protos in clients.items():
        connection.executemany(
            'INSERT INTO examples (split_name, client_id, serialized_example_proto) VALUES (?, ?, ?);',
            [(split_name, client_id, proto) for proto in protos],
        )
        connection.execute(
            'INSERT INTO client_metadata (client_id, split_name, num_examples) VALUES (?, ?, ?);',
            (client_id, split_name, len(protos)),
        )
    connection.execute('CREATE INDEX examples_by_client ON examples (client_id, split_name);')
  os.replace(partial, path)


def write_emnist(cache_dir: str, clients: Mapping[str, tuple]) -> str:
  """Writes `{writer_id: ((train_pixels, train_labels), (test_pixels, test_labels))}` as EMNIST-62 into
  `cache_dir`, where `emnist.load_data(only_digits=False, cache_dir=cache_dir)` reads it. Returns the path."""
  examples = {split: {} for split in EMNIST_SPLITS}
  for client_id, parts in clients.items():
    for split, (pixels, labels) in zip(EMNIST_SPLITS, parts):
      examples[split][client_id] = [emnist_example(p, l) for p, l in zip(pixels, labels)]
  path = database_path(cache_dir, EMNIST_FILENAME)
  write_database(path, examples)
  return path


def write_shakespeare(cache_dir: str, clients: Mapping[str, tuple]) -> str:
  """Writes `{role_id: (train_snippets, test_snippets)}` into `cache_dir`, where
  `shakespeare.load_data(cache_dir=cache_dir)` reads it. Returns the path."""
  examples = {split: {} for split in SHAKESPEARE_SPLITS}
  for client_id, parts in clients.items():
    for split, snippets in zip(SHAKESPEARE_SPLITS, parts):
      examples[split][client_id] = [shakespeare_example(s) for s in snippets]
  path = database_path(cache_dir, SHAKESPEARE_FILENAME)
  write_database(path, examples)
  return path


def synthetic_emnist_clients(*, num_writers: int = 16, seed: int = 0) -> dict:
  """Random stand-in writers of 60-200 examples (some below the papers' 100), about 90% train, 10% test.

  A label's images share a random prototype plus noise, so the classes are learnable."""
  rng = np.random.default_rng(seed)
  prototypes = rng.uniform(size=(62, 28, 28)).astype(np.float32)
  clients = {}
  for writer in range(num_writers):
    count = int(rng.integers(60, 201))
    labels = rng.integers(0, 62, size=count).astype(np.int32)
    pixels = np.clip(prototypes[labels] + rng.normal(0, 0.2, (count, 28, 28)), 0, 1).astype(np.float32)
    num_train = max(1, int(0.9 * count))
    clients[f'f{writer:04d}_00'] = ((pixels[:num_train], labels[:num_train]),
                                    (pixels[num_train:], labels[num_train:]))
  return clients


_WORDS = ('thou', 'art', 'more', 'lovely', 'and', 'temperate', 'Rough', 'winds', 'do', 'shake', 'the', 'darling',
          'buds', 'of', 'May', 'O', 'Romeo', 'wherefore', 'ROMEO', 'JULIET', 'to', 'be', 'or', 'not')


def synthetic_shakespeare_clients(*, num_roles: int = 12, seed: int = 0) -> dict:
  """Random stand-in roles: 2-12 lines of 1-14 words each (some roles below 100 examples)."""
  rng = np.random.default_rng(seed)
  clients = {}
  for role in range(num_roles):
    lines = [' '.join(rng.choice(_WORDS, size=int(rng.integers(1, 15)))) + rng.choice(['.', ',', '!', '?'])
             for _ in range(int(rng.integers(2, 13)))]
    num_train = max(1, int(0.9 * len(lines)))
    clients[f'PLAY_{role:02d}_ROLE'] = (lines[:num_train], lines[num_train:])
  return clients


_SYNTHETIC_WRITERS = {
    'emnist': lambda cache_dir: write_emnist(cache_dir, synthetic_emnist_clients()),
    'shakespeare': lambda cache_dir: write_shakespeare(cache_dir, synthetic_shakespeare_clients()),
}
_synthetic_dirs: dict[str, str] = {}


def synthetic_cache_dir(dataset: str) -> str:
  """A temporary cache_dir holding a synthetic 'emnist' or 'shakespeare' file for the real loader (written
  once per process, removed at exit)."""
  if dataset not in _SYNTHETIC_WRITERS:
    raise ValueError(f'dataset must be one of {sorted(_SYNTHETIC_WRITERS)}, got {dataset!r}')
  if dataset not in _synthetic_dirs:
    cache_dir = tempfile.mkdtemp(prefix=f'tff_robust_synthetic_{dataset}_')
    atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
    _SYNTHETIC_WRITERS[dataset](cache_dir)
    _synthetic_dirs[dataset] = cache_dir
  return _synthetic_dirs[dataset]
