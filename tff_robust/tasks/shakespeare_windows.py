"""Shakespeare roles as next-character windows, held once in NumPy and served as TFF client data.

A role's text, normalized (newlines made spaces, runs of spaces one space: LEAF's `txt_to_data`), is a sequence
s of l symbols in 0..52 (`symbol_ids`: A-Z -> 1..26, a-z -> 27..52, anything else 0, the order of the RFA
authors' code, " ABC...Zabc...z"). Its windows are w_j = s[j : j + 21] for j = 0..l - 21, example j being
x = w_j[:20], y = w_j[20]: l - 20 examples (none for l <= 20).

`Symbols` keeps every role's symbols in one uint8 array; `WindowsClientData` keeps, per role, the start positions
of the windows it serves (all of them, or a split's part) into that array: 4 bytes per window, and a role's
dataset is one gather. `create_tf_dataset_for_client` builds it from NumPy (a dataset of that role's windows
only, no map: cheap to build, to serialise into a TFF call and to iterate); `serializable_dataset_fn` builds the
same elements from a string tensor, for TFF's `create_tf_dataset_from_all_clients` and for
`evaluation.indexed_batches`, gathering from the arrays captured as eager tensors (never serialised).
"""

import collections
import dataclasses
import re
from typing import Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

SEQUENCE_LENGTH = 20
WINDOW = SEQUENCE_LENGTH + 1
_SPACES = re.compile(' {2,}')


def normalized_text(text: str) -> str:
  """Newlines made spaces, runs of spaces made one space."""
  return _SPACES.sub(' ', text.replace('\n', ' '))


def symbol_ids(text: str) -> np.ndarray:
  """uint8 symbol of each character of `text`: A-Z -> 1..26, a-z -> 27..52, anything else -> 0."""
  codes = np.frombuffer(text.encode('utf-32-le'), np.uint32).astype(np.int64)
  upper = (codes >= ord('A')) & (codes <= ord('Z'))
  lower = (codes >= ord('a')) & (codes <= ord('z'))
  return np.where(upper, codes - ord('A') + 1, np.where(lower, codes - ord('a') + 27, 0)).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Symbols:
  """Every role's normalized symbols in one array: role r's are `values[starts[r] : starts[r] + lengths[r]]`."""

  values: np.ndarray
  starts: Mapping[str, int]
  lengths: Mapping[str, int]

  @classmethod
  def from_texts(cls, texts: Mapping[str, str]) -> 'Symbols':
    """The symbols of {role: raw text}, each normalized (`normalized_text`, `symbol_ids`)."""
    parts = [symbol_ids(normalized_text(text)) for text in texts.values()]
    lengths = [len(part) for part in parts]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if parts else []
    values = np.concatenate(parts) if parts else np.zeros([0], np.uint8)
    return cls(values, dict(zip(texts, (int(s) for s in starts))), dict(zip(texts, lengths)))

  def num_windows(self, role: str) -> int:
    """l - 20 for a role of l symbols (0 for l <= 20)."""
    return max(self.lengths[role] - SEQUENCE_LENGTH, 0)

  def window_positions(self, role: str, indices: Optional[np.ndarray] = None) -> np.ndarray:
    """int64 start positions in `values` of the role's windows `indices` (default: all, in text order)."""
    if indices is None:
      indices = np.arange(self.num_windows(role))
    return self.starts[role] + np.asarray(indices, np.int64)


def element_spec() -> collections.OrderedDict:
  """One unbatched example: x int32 [SEQUENCE_LENGTH] character ids, y int32 [], the next character."""
  return collections.OrderedDict(x=tf.TensorSpec([SEQUENCE_LENGTH], tf.int32), y=tf.TensorSpec([], tf.int32))


def windows_at(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
  """int32 [len(positions), 21]: the windows starting at `positions` of `values`."""
  return values[np.asarray(positions, np.int64)[:, np.newaxis] + np.arange(WINDOW)].astype(np.int32)


def examples(windows: np.ndarray) -> collections.OrderedDict:
  """{'x': windows[:, :20], 'y': windows[:, 20]}."""
  return collections.OrderedDict(x=windows[:, :SEQUENCE_LENGTH], y=windows[:, SEQUENCE_LENGTH])


class WindowsClientData(tff.simulation.datasets.ClientData):
  """One client per role of `positions` ({role: int64 window start positions into `symbols.values`}), serving
  the windows at those positions in that order, elements {'x': int32 [20], 'y': int32}."""

  def __init__(self, symbols: Symbols, positions: Mapping[str, np.ndarray]):
    self._symbols = symbols
    self._positions = {role: np.asarray(positions[role], np.int64) for role in sorted(positions)}
    self._client_ids = list(self._positions)
    self._tensors = None  # (values, concatenated positions, role table): built on the first graph use

  @property
  def client_ids(self) -> list[str]:
    return self._client_ids

  @property
  def element_type_structure(self):
    return element_spec()

  def num_examples(self, role: str) -> int:
    """The number of windows of `role`."""
    return len(self._positions[role])

  def windows(self, role: str) -> np.ndarray:
    """int32 [n, 21]: the role's windows in order."""
    return windows_at(self._symbols.values, self._positions[role])

  def subset(self, roles: Sequence[str]) -> 'WindowsClientData':
    """The clients `roles` alone (same windows)."""
    return WindowsClientData(self._symbols, {role: self._positions[role] for role in roles})

  def create_tf_dataset_for_client(self, client_id: str) -> tf.data.Dataset:
    """The role's windows as unbatched {x, y} examples; ValueError for an unknown role."""
    if client_id not in self._positions:
      raise ValueError(f'client_id must be one of the {len(self._client_ids)} roles of this client data, '
                       f'got {client_id!r}')
    return tf.data.Dataset.from_tensor_slices(examples(self.windows(client_id)))

  def create_tf_dataset_from_all_clients(self, seed=None) -> tf.data.Dataset:
    """Every role's windows, role after role in TFF's order (client ids shuffled by `np.random.RandomState(seed)`),
    as one in-memory dataset."""
    client_ids = self._client_ids.copy()
    np.random.RandomState(seed=seed).shuffle(client_ids)
    positions = np.concatenate([self._positions[role] for role in client_ids] or [np.zeros([0], np.int64)])
    return tf.data.Dataset.from_tensor_slices(examples(windows_at(self._symbols.values, positions)))

  @property
  def serializable_dataset_fn(self):
    """role (Python or TF string) -> its dataset; a tensor role gathers from the arrays held as eager tensors."""
    return self._dataset_of

  def _dataset_of(self, role) -> tf.data.Dataset:
    if isinstance(role, str):
      return self.create_tf_dataset_for_client(role)
    values, positions, first, end = self._graph_tensors()
    starts = positions[first.lookup(role):end.lookup(role)]
    windows = tf.cast(tf.gather(values, starts[:, tf.newaxis] + tf.range(WINDOW, dtype=tf.int64)), tf.int32)
    return tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=windows[:, :SEQUENCE_LENGTH], y=windows[:, SEQUENCE_LENGTH])
    )

  def _graph_tensors(self):
    """(symbols, every role's positions concatenated in client-id order, role -> its first and its end index
    there): eager tensors and tables, built once (an unknown role has no window)."""
    if self._tensors is None:
      with tf.init_scope():
        counts = np.array([len(self._positions[role]) for role in self._client_ids], np.int64)
        ends = np.cumsum(counts)
        roles = tf.constant(self._client_ids or [''], tf.string)
        table = lambda bounds: tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(roles, tf.constant(bounds if len(counts) else [0], tf.int64)), 0
        )
        all_positions = np.concatenate([self._positions[role] for role in self._client_ids] or
                                       [np.zeros([0], np.int64)])
        self._tensors = (tf.constant(self._symbols.values), tf.constant(all_positions), table(ends - counts),
                         table(ends))
    return self._tensors
