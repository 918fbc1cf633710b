"""Checkpoints of a training run: program state with `tff.program.FileProgramStateManager`, client states
with `ClientStateStore` snapshots, so that a killed run resumes where its last checkpoint left it.

A checkpoint of round k is `<root>/program_state/round_<k>` (server state, sampler RNG state, counters)
and, for processes with stateful clients, `<root>/client_states/round_<k>` (hard-linked snapshot of the
store, with its own manifest). The client snapshot is written first, then the program state, then
`program_state/round_<k>/checkpoint_manifest.json` with every program-state file's size and SHA-256: a
checkpoint is complete once its manifest exists. Restoring verifies the manifests before loading, and treats
any error of the load itself as damage too, so a checkpoint with any file truncated, emptied, overwritten or
missing is reported, moved to `<root>/damaged/`, and the previous one used.
"""

import asyncio
import json
import os
import shutil
from typing import Optional

from absl import logging
import numpy as np
import tensorflow_federated as tff

from tff_robust.simulation import client_state_store

_KEEP_TOTAL = 3
_PREFIX = 'round_'
MANIFEST_NAME = 'checkpoint_manifest.json'


class DamagedCheckpointError(RuntimeError):
  """A program-state checkpoint is incomplete or does not match its manifest."""


def _program_state_files(directory: str) -> dict[str, dict]:
  """{path relative to `directory`: {'size', 'sha256'}} of every file under `directory` but the manifest."""
  files = {}
  for parent, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(parent, name)
      relative = os.path.relpath(path, directory)
      if relative != MANIFEST_NAME:
        files[relative] = {'size': os.path.getsize(path), 'sha256': client_state_store.file_sha256(path)}
  return files


def _write_manifest(directory: str) -> None:
  path, files = os.path.join(directory, MANIFEST_NAME), _program_state_files(directory)
  with open(path + '.tmp', 'w') as f:
    json.dump({'files': files}, f, indent=1, sort_keys=True)
  os.replace(path + '.tmp', path)


def _verify_manifest(directory: str) -> None:
  """Raises DamagedCheckpointError unless the files under `directory` are exactly those its manifest lists."""
  try:
    with open(os.path.join(directory, MANIFEST_NAME)) as f:
      recorded = json.load(f)['files']
  except FileNotFoundError:
    raise DamagedCheckpointError(f'{directory} has no {MANIFEST_NAME}: the checkpoint is incomplete') from None
  except (OSError, ValueError, KeyError, TypeError) as error:
    raise DamagedCheckpointError(f'{directory}/{MANIFEST_NAME} cannot be read ({error})') from None
  found = _program_state_files(directory)
  if found != recorded:
    differing = sorted(name for name in set(found) | set(recorded) if found.get(name) != recorded.get(name))
    raise DamagedCheckpointError(f'{directory}: {", ".join(differing)} missing or changed since it was saved')


def rng_state_to_json(rng: np.random.Generator) -> str:
  """The bit generator's state of `rng` as JSON, for a checkpoint to restore the same draws."""
  return json.dumps(rng.bit_generator.state)


def rng_from_json(serialized) -> np.random.Generator:
  """A generator in the state `rng_state_to_json` recorded (bytes or str)."""
  if isinstance(serialized, bytes):
    serialized = serialized.decode('utf-8')
  rng = np.random.default_rng()
  rng.bit_generator.state = json.loads(serialized)
  return rng


class RunCheckpointer:
  """Saves and restores (round, program state[, client states]) under `root_dir`, keeping the newest 3."""

  def __init__(self, root_dir: str, store: Optional[client_state_store.ClientStateStore] = None):
    if not root_dir:
      raise ValueError('root_dir must be a non-empty path')
    self._manager = tff.program.FileProgramStateManager(
        os.path.join(root_dir, 'program_state'), prefix=_PREFIX, keep_total=_KEEP_TOTAL, keep_first=False
    )
    self.root_dir = root_dir
    self._program_state_dir = os.path.join(root_dir, 'program_state')
    self._clients_dir = os.path.join(root_dir, 'client_states')
    self._damaged_dir = os.path.join(root_dir, 'damaged')
    self._store = store

  def _program_state_path(self, round_num: int) -> str:
    return os.path.join(self._program_state_dir, f'{_PREFIX}{round_num}')

  def _client_snapshot(self, round_num: int) -> str:
    return os.path.join(self._clients_dir, f'{_PREFIX}{round_num}')

  def save(self, round_num: int, program_state) -> None:
    """Checkpoints round `round_num` (program state: any `tff.program` structure of values)."""
    if self._store is not None:
      snapshot = self._client_snapshot(round_num)
      if os.path.exists(snapshot):  # an unfinished save of a killed run: no program state refers to it
        shutil.rmtree(snapshot)
      self._store.save(snapshot)
    asyncio.run(self._manager.save(program_state, round_num))
    _write_manifest(self._program_state_path(round_num))
    self._remove_stale_client_snapshots()

  def _remove_stale_client_snapshots(self) -> None:
    if self._store is None or not os.path.isdir(self._clients_dir):
      return
    kept = {self._client_snapshot(v) for v in asyncio.run(self._manager.get_versions()) or []}
    for name in os.listdir(self._clients_dir):
      path = os.path.join(self._clients_dir, name)
      if path not in kept:
        shutil.rmtree(path)

  def _set_aside(self, version: int) -> None:
    for source, kind in ((self._program_state_path(version), 'program_state'),
                         (self._client_snapshot(version), 'client_states')):
      if os.path.exists(source):
        destination = os.path.join(self._damaged_dir, kind, f'{_PREFIX}{version}')
        if os.path.exists(destination):
          shutil.rmtree(destination)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        os.replace(source, destination)

  def restore_latest(self, structure) -> Optional[tuple[int, object]]:
    """(round, program state) of the newest readable checkpoint, client states restored; None if none.

    `structure` is a program state of the same structure (e.g. the one a fresh run would save at round 0).
    A checkpoint whose manifest is missing or does not match its files, or whose loading fails in any way, is
    damaged: logged as a warning and moved to `<root>/damaged/` (kept for inspection, out of the way of the
    rounds that will be checkpointed again).
    """
    versions = asyncio.run(self._manager.get_versions()) or []
    for version in sorted(versions, reverse=True):
      try:
        _verify_manifest(self._program_state_path(version))
        program_state = asyncio.run(self._manager.load(version, structure))
        if self._store is not None:
          self._store.restore(self._client_snapshot(version))
      except Exception as error:  # pylint: disable=broad-except  (TF and TFF raise many kinds on damaged files)
        logging.warning('Checkpoint of round %d is damaged and was skipped: %s', version, error)
        self._set_aside(version)
        continue
      return version, program_state
    return None
