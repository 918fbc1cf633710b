"""Disk-backed store of one persistent state per client, for personalisation algorithms (Fed+, personalized RFA).

A training loop reads the states of a round's cohort with `get`, runs the round and writes the new states back
with `put`. Every client's state is one uncompressed `.npz` file in the store's directory, so memory use is bounded
by the arrays a call takes or returns (plus one copy of the initial state), whatever the number of clients.

Guarantees:
  * Writes are atomic (`atomic_files`): a state is written to a temporary file in the same directory, then
    `os.replace`d over the client's file, so a crash leaves either the old or the new state, never a half-written
    one, and a file is never modified in place (hard links taken by `save` keep the content they had).
  * `save` snapshots the states into a checkpoint directory with hard links (copies where linking fails) and writes
    a manifest with every file's size and SHA-256 last, so a snapshot without a manifest is recognisably incomplete.
  * `restore` verifies the whole snapshot before touching the live directory; on damage it raises `CheckpointError`
    and the live states are unchanged.

A store's directory must have one writer at a time.
"""

import hashlib
import json
import os
import shutil
import string
from typing import Any, Iterable
import zipfile

import numpy as np
import tensorflow as tf

from tff_robust.simulation import atomic_files

MANIFEST_NAME = 'client_state_manifest.json'
_MANIFEST_FORMAT = 'tff_robust.client_state_store/1'
_SUFFIX = '.npz'
# File names use only these characters verbatim; every other UTF-8 byte (upper-case letters and '%' included) becomes
# '%XX' with upper-case hex digits, so the mapping is reversible and stays injective on case-insensitive file systems.
_SAFE_CHARS = frozenset(string.ascii_lowercase + string.digits + '_-')
_MAX_NAME_BYTES = 255
_HASH_CHUNK_BYTES = 1 << 20


class CheckpointError(RuntimeError):
  """A checkpoint's snapshot of client states is missing, incomplete or damaged; try an older checkpoint."""


class StateFileError(RuntimeError):
  """A live client state file cannot be read or does not hold a state of the store's structure."""


def _client_filename(client_id: str) -> str:
  if not isinstance(client_id, str):
    raise TypeError(f'client_id must be a str, got {type(client_id).__name__}: {client_id!r}')
  if not client_id:
    raise ValueError('client_id must be a non-empty str')
  parts = []
  for char in client_id:
    if char in _SAFE_CHARS:
      parts.append(char)
    else:
      parts.extend(f'%{byte:02X}' for byte in char.encode('utf-8'))
  name = ''.join(parts) + _SUFFIX
  if len(name.encode('ascii')) > _MAX_NAME_BYTES:
    raise ValueError(f'client_id {client_id!r} is too long: its file name would exceed {_MAX_NAME_BYTES} bytes')
  return name


def _client_id_from_filename(filename: str) -> str | None:
  """The client id whose state file is `filename`, or None for a name the store does not produce."""
  if not filename.endswith(_SUFFIX) or filename.startswith('.'):
    return None
  encoded = filename[:-len(_SUFFIX)]
  data = bytearray()
  i = 0
  while i < len(encoded):
    char = encoded[i]
    if char == '%':
      hex_digits = encoded[i + 1:i + 3]
      if len(hex_digits) != 2 or any(c not in '0123456789ABCDEF' for c in hex_digits):
        return None
      data.append(int(hex_digits, 16))
      i += 3
    elif char in _SAFE_CHARS:
      data.append(ord(char))
      i += 1
    else:
      return None
  try:
    client_id = data.decode('utf-8')
  except UnicodeDecodeError:
    return None
  try:
    canonical = _client_filename(client_id)
  except ValueError:
    return None
  return client_id if canonical == filename else None


def _link_or_copy(src: str, dst: str) -> None:
  """Makes `dst` a hard link to `src` (a copy where linking fails), replacing `dst` atomically."""

  def fill(tmp_path):
    os.remove(tmp_path)  # os.link needs a free name; mkstemp only reserved a unique one.
    try:
      os.link(src, tmp_path)
    except OSError:
      shutil.copyfile(src, tmp_path)
      with open(tmp_path, 'rb+') as f:
        os.fsync(f.fileno())

  atomic_files.replace_atomically(dst, fill)


def file_sha256(path: str) -> str:
  """The SHA-256 of the file at `path`, as a hex string."""
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    while chunk := f.read(_HASH_CHUNK_BYTES):
      digest.update(chunk)
  return digest.hexdigest()


def _leaf_spec(leaf: np.ndarray) -> dict[str, Any]:
  return {'shape': list(leaf.shape), 'dtype': leaf.dtype.str}


class ClientStateStore:
  """Persistent per-client states on disk: one `.npz` file per client that has been `put`."""

  def __init__(self, directory: str, initial_state):
    """Opens (creating if missing) the store in `directory`.

    Args:
      directory: Where the client state files live. States already there (from an earlier store on the same
        directory) are used.
      initial_state: A nested structure (lists, tuples, dicts, as `tf.nest` understands) of NumPy arrays or values
        `np.asarray` accepts: the state of every client before its first `put`. Nothing is written for a client
        until it is `put`. Every state must have this structure and its leaves' shapes and dtypes. It is copied,
        so later changes to the caller's object do not affect the store.

    Raises:
      TypeError: If `directory` is not a path or a leaf of `initial_state` has an object dtype.
    """
    if not isinstance(directory, (str, os.PathLike)):
      raise TypeError(f'directory must be a path, got {type(directory).__name__}')
    self._directory = os.path.abspath(os.fspath(directory))
    leaves = [np.array(leaf, copy=True) for leaf in tf.nest.flatten(initial_state)]
    for index, leaf in enumerate(leaves):
      if leaf.dtype.hasobject:
        raise TypeError(f'initial_state leaf {index} has object dtype; only plain NumPy dtypes can be stored')
    self._initial_leaves = leaves
    self._structure = tf.nest.pack_sequence_as(initial_state, leaves)
    self._specs = [_leaf_spec(leaf) for leaf in leaves]
    os.makedirs(self._directory, exist_ok=True)
    for name in os.listdir(self._directory):  # Leftovers of writes interrupted by a crash.
      if name.startswith(atomic_files.TMP_PREFIX):
        os.remove(os.path.join(self._directory, name))

  @property
  def directory(self) -> str:
    return self._directory

  def _path(self, client_id: str) -> str:
    return os.path.join(self._directory, _client_filename(client_id))

  def _check_leaves(self, client_id: str, state) -> list[np.ndarray]:
    """Flattened leaves of `state`, or ValueError naming `client_id` and how it differs from the initial state."""
    try:
      tf.nest.assert_same_structure(self._structure, state)
    except (ValueError, TypeError) as e:
      raise ValueError(f'state of client {client_id!r} does not have the structure of initial_state: {e}') from e
    leaves = [np.asarray(leaf) for leaf in tf.nest.flatten(state)]
    for index, (leaf, expected) in enumerate(zip(leaves, self._initial_leaves)):
      if leaf.shape != expected.shape or leaf.dtype != expected.dtype:
        raise ValueError(
            f'state of client {client_id!r}: leaf {index} has shape {leaf.shape} and dtype {leaf.dtype}, '
            f'initial_state has shape {expected.shape} and dtype {expected.dtype}'
        )
    return leaves

  def _load(self, client_id: str):
    path = self._path(client_id)
    try:
      npz = np.load(path, allow_pickle=False)
    except FileNotFoundError:
      return tf.nest.pack_sequence_as(self._structure, [leaf.copy() for leaf in self._initial_leaves])
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
      raise StateFileError(f'cannot read the state of client {client_id!r} from {path}: {e}') from e
    with npz:
      names = [f'arr_{i}' for i in range(len(self._initial_leaves))]
      if sorted(npz.files) != sorted(names):
        raise StateFileError(
            f'state file {path} of client {client_id!r} holds arrays {sorted(npz.files)}, expected {names}'
        )
      leaves = []
      for name, expected in zip(names, self._initial_leaves):
        try:
          leaf = npz[name]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
          raise StateFileError(f'cannot read the state of client {client_id!r} from {path}: {e}') from e
        if leaf.shape != expected.shape or leaf.dtype != expected.dtype:
          raise StateFileError(
              f'state file {path} of client {client_id!r}: {name} has shape {leaf.shape} and dtype {leaf.dtype}, '
              f'expected shape {expected.shape} and dtype {expected.dtype}'
          )
        leaves.append(leaf)
    return tf.nest.pack_sequence_as(self._structure, leaves)

  def get(self, client_ids: Iterable[str]) -> list:
    """States of `client_ids`, in their order; a fresh copy of the initial state for a client never `put`.

    The returned arrays are new objects: mutating them does not change the store.

    Raises:
      TypeError: If `client_ids` is a single str, or an id is not a str.
      StateFileError: If a client's file is damaged (the message names the client and the path).
    """
    if isinstance(client_ids, str):
      raise TypeError('client_ids must be an iterable of client ids, not a single str')
    return [self._load(client_id) for client_id in client_ids]

  def put(self, client_ids: Iterable[str], states: Iterable[Any]) -> None:
    """Stores `states[i]` as the state of `client_ids[i]`, each file replaced atomically.

    All states are checked before any is written, so a bad state leaves the store unchanged.

    Raises:
      TypeError: If `client_ids` is a single str, or an id is not a str.
      ValueError: If the numbers of ids and states differ, an id repeats, or a state's structure, shapes or dtypes
        differ from the initial state's (the message names the client).
    """
    if isinstance(client_ids, str):
      raise TypeError('client_ids must be an iterable of client ids, not a single str')
    client_ids, states = list(client_ids), list(states)
    if len(client_ids) != len(states):
      raise ValueError(f'put got {len(client_ids)} client_ids but {len(states)} states')
    if len(set(client_ids)) != len(client_ids):
      raise ValueError(f'client_ids must not repeat, got {client_ids!r}')
    paths = [self._path(client_id) for client_id in client_ids]
    all_leaves = [self._check_leaves(client_id, state) for client_id, state in zip(client_ids, states)]
    for path, leaves in zip(paths, all_leaves):
      atomic_files.write_atomically(path, lambda f, leaves=leaves: np.savez(f, *leaves))
    if paths:
      atomic_files.fsync_directory(self._directory)

  def __contains__(self, client_id: str) -> bool:
    """Whether a state has been `put` for `client_id` (TypeError if it is not a str)."""
    return os.path.isfile(self._path(client_id))

  def _stored_files(self) -> dict[str, str]:
    """File name -> client id of every state file in the directory."""
    files = {}
    for name in os.listdir(self._directory):
      client_id = _client_id_from_filename(name)
      if client_id is not None:
        files[name] = client_id
    return files

  def __len__(self) -> int:
    """Number of clients with a stored state."""
    return len(self._stored_files())

  def stored_client_ids(self) -> list[str]:
    """Sorted ids of the clients with a stored state."""
    return sorted(self._stored_files().values())

  def clear(self) -> None:
    """Forgets every stored state: all clients are back to the initial state (snapshots are unaffected)."""
    for name in self._stored_files():
      os.remove(os.path.join(self._directory, name))

  def save(self, checkpoint_dir: str) -> None:
    """Snapshots the current states into `checkpoint_dir` (created if missing).

    Files are hard-linked (copied where linking fails, e.g. across devices); since the store never modifies a file
    in place, later `put`s do not change the snapshot. The manifest (`MANIFEST_NAME`, with every file's size and
    SHA-256 and the state's leaf shapes and dtypes) is written last and atomically.

    Raises:
      ValueError: If `checkpoint_dir` already holds a snapshot manifest or is the store's own directory.
    """
    checkpoint_dir = os.path.abspath(os.fspath(checkpoint_dir))
    if checkpoint_dir == self._directory:
      raise ValueError(f'checkpoint_dir must differ from the store directory, got {checkpoint_dir}')
    manifest_path = os.path.join(checkpoint_dir, MANIFEST_NAME)
    if os.path.exists(manifest_path):
      raise ValueError(f'checkpoint_dir {checkpoint_dir} already contains a client state snapshot')
    os.makedirs(checkpoint_dir, exist_ok=True)
    files = {}
    for name, client_id in sorted(self._stored_files().items()):
      snapshot_path = os.path.join(checkpoint_dir, name)
      _link_or_copy(os.path.join(self._directory, name), snapshot_path)
      files[name] = {
          'client_id': client_id,
          'size': os.path.getsize(snapshot_path),
          'sha256': file_sha256(snapshot_path),
      }
    atomic_files.fsync_directory(checkpoint_dir)
    manifest = {'format': _MANIFEST_FORMAT, 'leaves': self._specs, 'files': files}
    atomic_files.write_atomically(manifest_path, lambda f: f.write(json.dumps(manifest, indent=1).encode('utf-8')))
    atomic_files.fsync_directory(checkpoint_dir)

  def _verified_snapshot(self, checkpoint_dir: str) -> list[str]:
    """File names of the snapshot in `checkpoint_dir`, after checking every file against the manifest."""
    manifest_path = os.path.join(checkpoint_dir, MANIFEST_NAME)
    try:
      with open(manifest_path, 'rb') as f:
        manifest = json.loads(f.read().decode('utf-8'))
    except FileNotFoundError as e:
      raise CheckpointError(
          f'checkpoint {checkpoint_dir} has no client state manifest {manifest_path}: the snapshot is incomplete'
      ) from e
    except (OSError, ValueError) as e:
      raise CheckpointError(f'checkpoint {checkpoint_dir}: cannot read manifest {manifest_path}: {e}') from e
    if not isinstance(manifest, dict) or manifest.get('format') != _MANIFEST_FORMAT or not isinstance(
        manifest.get('files'), dict):
      raise CheckpointError(f'checkpoint {checkpoint_dir}: manifest {manifest_path} is not a client state manifest')
    if not isinstance(manifest.get('leaves'), list):
      raise CheckpointError(f'checkpoint {checkpoint_dir}: manifest {manifest_path} does not list the state leaves')
    if manifest['leaves'] != self._specs:
      raise ValueError(
          f'checkpoint {checkpoint_dir} holds states with leaves {manifest["leaves"]}, but this store\'s '
          f'initial_state has leaves {self._specs}'
      )
    names = []
    for name, entry in sorted(manifest['files'].items()):
      path = os.path.join(checkpoint_dir, name)
      if _client_id_from_filename(name) is None or not isinstance(entry, dict):
        raise CheckpointError(f'checkpoint {checkpoint_dir}: manifest {manifest_path} has an invalid entry {name!r}')
      try:
        size = os.path.getsize(path)
      except OSError as e:
        raise CheckpointError(f'checkpoint {checkpoint_dir}: client state file {path} is missing') from e
      if size != entry.get('size'):
        raise CheckpointError(
            f'checkpoint {checkpoint_dir}: client state file {path} has {size} bytes, the manifest says '
            f'{entry.get("size")}'
        )
      if file_sha256(path) != entry.get('sha256'):
        raise CheckpointError(f'checkpoint {checkpoint_dir}: client state file {path} fails its SHA-256 check')
      names.append(name)
    return names

  def restore(self, checkpoint_dir: str) -> None:
    """Replaces the live states with the snapshot `save` wrote into `checkpoint_dir`.

    The whole snapshot is verified first (manifest present, every file's size and SHA-256 as recorded); only then
    are the live files replaced, each atomically, and live files absent from the snapshot removed. A restore
    interrupted by a crash can be repeated.

    Raises:
      CheckpointError: If the manifest is missing or unreadable, or a file is missing or does not match it (the
        message names `checkpoint_dir` and the file). The live states are then unchanged.
      ValueError: If the snapshot's leaf shapes and dtypes differ from this store's initial state.
    """
    checkpoint_dir = os.path.abspath(os.fspath(checkpoint_dir))
    names = self._verified_snapshot(checkpoint_dir)
    for name in names:
      src, dst = os.path.join(checkpoint_dir, name), os.path.join(self._directory, name)
      if not (os.path.exists(dst) and os.path.samefile(src, dst)):
        _link_or_copy(src, dst)
    keep = set(names)
    for name in self._stored_files():
      if name not in keep:
        os.remove(os.path.join(self._directory, name))
    atomic_files.fsync_directory(self._directory)
