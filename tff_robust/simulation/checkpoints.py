"""Checkpoints of a training run: program state with `tff.program.FileProgramStateManager`, client states
with `ClientStateStore` snapshots, so that a killed run resumes where its last checkpoint left it.

A checkpoint of round k is `<root>/program_state/round_<k>` (server state, sampler RNG state, counters)
and, for processes with stateful clients, `<root>/client_states/round_<k>` (hard-linked snapshot of the
store). The client snapshot is written first, so a program state on disk means a complete checkpoint.
A checkpoint that cannot be read back (truncated or damaged files) is reported and the previous one used.
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


def rng_state_to_json(rng: np.random.Generator) -> str:
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
    self._program_state_dir = os.path.join(root_dir, 'program_state')
    self._clients_dir = os.path.join(root_dir, 'client_states')
    self._damaged_dir = os.path.join(root_dir, 'damaged')
    self._store = store

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
    for source, kind in ((os.path.join(self._program_state_dir, f'{_PREFIX}{version}'), 'program_state'),
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
    Damaged checkpoints are logged as warnings and moved to `<root>/damaged/` (kept for inspection, out
    of the way of the rounds that will be checkpointed again).
    """
    versions = asyncio.run(self._manager.get_versions()) or []
    for version in sorted(versions, reverse=True):
      try:
        program_state = asyncio.run(self._manager.load(version, structure))
        if self._store is not None:
          self._store.restore(self._client_snapshot(version))
      except (client_state_store.CheckpointError, OSError, ValueError, RuntimeError) as error:
        logging.warning('Checkpoint of round %d is damaged and was skipped: %s', version, error)
        self._set_aside(version)
        continue
      return version, program_state
    return None
