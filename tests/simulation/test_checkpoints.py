"""A damaged checkpoint (any of its files truncated, emptied, overwritten with garbage or deleted) is reported, moved
to `damaged/`, and the previous one restored, with its client states."""

import collections
import logging
import os

import numpy as np
import pytest

from tff_robust.simulation import checkpoints
from tff_robust.simulation import client_state_store

_CLIENTS = ('alice', 'bob')
# Every file of a checkpoint, by kind.
_FILES = (
    'program_state/saved_model.pb', 'program_state/fingerprint.pb', 'program_state/variables.index',
    'program_state/variables.data', f'program_state/{checkpoints.MANIFEST_NAME}',
    'client_states/alice.npz', 'client_states/bob.npz', f'client_states/{client_state_store.MANIFEST_NAME}',
)


def _program_state(round_num: int) -> collections.OrderedDict:
  return collections.OrderedDict(
      server_state=[np.full([64, 8], round_num, np.float32), np.arange(5, dtype=np.int32) * round_num],
      rng=checkpoints.rng_state_to_json(np.random.default_rng(round_num)), secure_average_calls=3 * round_num,
  )


def _client_state(client: str, round_num: int) -> dict:
  return {'u': np.full([16], round_num + _CLIENTS.index(client), np.float32)}


@pytest.fixture
def saved_run(tmp_path):
  """(checkpoint root, the store) after checkpoints of rounds 1 and 2, each after a round that updated every client."""
  store = client_state_store.ClientStateStore(tmp_path / 'client_states', {'u': np.zeros([16], np.float32)})
  checkpointer = checkpoints.RunCheckpointer(str(tmp_path / 'checkpoints'), store)
  for round_num in (1, 2):
    store.put(_CLIENTS, [_client_state(client, round_num) for client in _CLIENTS])
    checkpointer.save(round_num, _program_state(round_num))
  return tmp_path / 'checkpoints', store


def _files_of_round(root, round_num: int) -> dict[str, str]:
  """{kind of file: its path} of every file of round `round_num`'s checkpoint."""
  program, clients = root / 'program_state' / f'round_{round_num}', root / 'client_states' / f'round_{round_num}'
  files = {}
  for path in sorted([*program.rglob('*'), *clients.rglob('*')]):
    if path.is_file():
      kind = f'{path.relative_to(root).parts[0]}/{path.name}'
      files[kind.replace('-00000-of-00001', '')] = str(path)
  return files


def test_a_checkpoint_has_the_files_the_damage_test_covers(saved_run):
  root, _ = saved_run
  assert set(_files_of_round(root, 2)) == set(_FILES)


def _damage(path: str, damage: str) -> None:
  size = os.path.getsize(path)
  if damage == 'truncated':
    os.truncate(path, size // 2)
  elif damage == 'zero_length':
    os.truncate(path, 0)
  elif damage == 'garbage':  # same length, in place (as a disk error would leave it)
    with open(path, 'r+b') as f:
      original = f.read()
      f.seek(0)
      f.write(bytes((byte + 1 + index) % 256 for index, byte in enumerate(original)))
  else:
    os.remove(path)


@pytest.mark.parametrize('damage', ['truncated', 'zero_length', 'garbage', 'deleted'])
@pytest.mark.parametrize('file_kind', _FILES)
def test_a_damaged_checkpoint_is_set_aside_and_the_previous_one_restored(saved_run, file_kind, damage, caplog):
  root, store = saved_run
  _damage(_files_of_round(root, 2)[file_kind], damage)
  checkpointer = checkpoints.RunCheckpointer(str(root), store)
  with caplog.at_level(logging.WARNING):
    round_num, program_state = checkpointer.restore_latest(_program_state(0))
  assert round_num == 1
  expected = _program_state(1)
  for array, reference in zip(program_state['server_state'], expected['server_state'], strict=True):
    np.testing.assert_array_equal(array, reference)
  assert program_state['rng'] in (expected['rng'], expected['rng'].encode())
  assert program_state['secure_average_calls'] == expected['secure_average_calls']
  for client, state in zip(_CLIENTS, store.get(_CLIENTS), strict=True):
    np.testing.assert_array_equal(state['u'], _client_state(client, 1)['u'])
  assert 'Checkpoint of round 2 is damaged and was skipped' in caplog.text
  assert (root / 'damaged' / 'program_state' / 'round_2').is_dir()
  assert (root / 'damaged' / 'client_states' / 'round_2').is_dir()
  assert not (root / 'program_state' / 'round_2').exists() and not (root / 'client_states' / 'round_2').exists()


def test_an_undamaged_checkpoint_is_restored(saved_run):
  root, store = saved_run
  round_num, program_state = checkpoints.RunCheckpointer(str(root), store).restore_latest(_program_state(0))
  assert round_num == 2 and program_state['secure_average_calls'] == 6
  np.testing.assert_array_equal(program_state['server_state'][0], _program_state(2)['server_state'][0])
  assert not (root / 'damaged').exists()
