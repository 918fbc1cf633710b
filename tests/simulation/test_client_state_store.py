"""Client state store: exact round trips, structure checks, atomic writes, checkpoints and bounded memory."""

import collections
import gc
import os
import tracemalloc

import numpy as np
import pytest

from tff_robust.simulation import client_state_store

ClientStateStore = client_state_store.ClientStateStore
CheckpointError = client_state_store.CheckpointError

ODD_IDS = ('a/b', 'with space', 'ünïcødé', 'Upper', 'upper', '%41', 'A', '..', '.', '日本')


def _initial():
  return {'w': np.zeros((3, 4), np.float32), 'extra': [np.arange(2, dtype=np.int64)]}


def _state(seed):
  rng = np.random.default_rng(seed)
  return {
      'w': rng.standard_normal((3, 4)).astype(np.float32),
      'extra': [rng.integers(-2**40, 2**40, size=2, dtype=np.int64)],
  }


def _assert_state_equal(actual, expected):
  assert set(actual) == set(expected) and len(actual['extra']) == len(expected['extra'])
  for a, e in [(actual['w'], expected['w']), (actual['extra'][0], expected['extra'][0])]:
    assert a.dtype == e.dtype and a.shape == e.shape
    np.testing.assert_array_equal(a, e)


def _store_files(directory):
  return sorted(os.listdir(directory))


def test_never_visited_clients_get_independent_copies_of_initial_state(tmp_path):
  initial = _initial()
  store = ClientStateStore(str(tmp_path / 'store'), initial)
  initial['w'] += 7.0  # The store keeps its own copy.
  (first,) = store.get(['c0'])
  _assert_state_equal(first, _initial())
  first['w'][:] = 5.0
  first['extra'][0][:] = 9
  (again,) = store.get(['c0'])
  _assert_state_equal(again, _initial())
  assert len(store) == 0 and 'c0' not in store and _store_files(tmp_path / 'store') == []


def test_put_get_round_trip_is_exact_and_follows_client_order(tmp_path):
  store = ClientStateStore(str(tmp_path), _initial())
  ids = list(ODD_IDS)
  store.put(ids, [_state(i) for i in range(len(ids))])
  order = [ids[3], 'never', ids[0], ids[3], ids[9]]
  got = store.get(order)
  for cid, state in zip(order, got):
    _assert_state_equal(state, _state(ids.index(cid)) if cid in ids else _initial())
  assert isinstance(got[0], dict) and isinstance(got[0]['extra'], list)
  assert store.stored_client_ids() == sorted(ids) and len(store) == len(ids)
  assert all(cid in store for cid in ids) and 'never' not in store and 'a' not in store
  names = _store_files(tmp_path)
  assert len({name.lower() for name in names}) == len(ids)  # Distinct even on case-insensitive file systems.
  assert all('/' not in name and ' ' not in name and name.isascii() for name in names)
  store.put([ids[0]], [_state(100)])
  _assert_state_equal(store.get([ids[0]])[0], _state(100))


def test_mismatched_states_are_rejected_naming_the_client(tmp_path):
  store = ClientStateStore(str(tmp_path), _initial())
  good = _state(0)
  bad_structure = {'w': good['w'], 'extra': (good['extra'][0],)}
  bad_shape = {'w': np.zeros((4, 3), np.float32), 'extra': good['extra']}
  bad_dtype = {'w': good['w'].astype(np.float64), 'extra': good['extra']}
  missing_key = {'w': good['w']}
  for bad in (bad_structure, bad_shape, bad_dtype, missing_key):
    with pytest.raises(ValueError, match="client 'bad id'"):
      store.put(['ok', 'bad id'], [good, bad])
  assert len(store) == 0  # A batch with a bad state writes nothing.
  with pytest.raises(ValueError, match='2 client_ids but 1 states'):
    store.put(['a', 'b'], [good])
  with pytest.raises(ValueError, match='repeat'):
    store.put(['a', 'a'], [good, good])
  with pytest.raises(TypeError, match='client_id must be a str'):
    store.put([3], [good])
  with pytest.raises(TypeError, match='single str'):
    store.get('abc')
  with pytest.raises(ValueError, match='non-empty'):
    store.get([''])


def test_reopened_store_sees_stored_states(tmp_path):
  directory = str(tmp_path / 'nested' / 'store')
  ClientStateStore(directory, _initial()).put(['x', 'y/z'], [_state(1), _state(2)])
  open(os.path.join(directory, '.tmp-leftover'), 'wb').close()  # As left by a crash mid-write.
  reopened = ClientStateStore(directory, _initial())
  assert reopened.stored_client_ids() == ['x', 'y/z'] and len(reopened) == 2 and 'y/z' in reopened
  x, yz, fresh = reopened.get(['x', 'y/z', 'new'])
  _assert_state_equal(x, _state(1))
  _assert_state_equal(yz, _state(2))
  _assert_state_equal(fresh, _initial())
  assert not any(name.startswith('.tmp-') for name in os.listdir(directory))


def test_failed_write_keeps_the_old_state(tmp_path, monkeypatch):
  store = ClientStateStore(str(tmp_path), _initial())
  store.put(['c'], [_state(1)])

  def savez_that_crashes(f, *arrays):
    f.write(b'PK\x03\x04 half written')
    raise OSError('disk full')

  monkeypatch.setattr(client_state_store.np, 'savez', savez_that_crashes)
  with pytest.raises(OSError, match='disk full'):
    store.put(['c'], [_state(2)])
  monkeypatch.undo()
  _assert_state_equal(store.get(['c'])[0], _state(1))
  assert len(_store_files(tmp_path)) == 1


def test_damaged_live_file_raises_naming_client_and_path(tmp_path):
  store = ClientStateStore(str(tmp_path), _initial())
  store.put(['bad/one'], [_state(1)])
  (name,) = _store_files(tmp_path)
  path = os.path.join(str(tmp_path), name)
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)
  with pytest.raises(client_state_store.StateFileError) as info:
    store.get(['bad/one'])
  assert "'bad/one'" in str(info.value) and path in str(info.value)
  other = ClientStateStore(str(tmp_path / 'other'), [np.zeros(3, np.float32)])
  other.put(['c'], [[np.ones(3, np.float32)]])
  wrong_spec = ClientStateStore(str(tmp_path / 'other'), [np.zeros(4, np.float32)])
  with pytest.raises(client_state_store.StateFileError, match="client 'c'"):
    wrong_spec.get(['c'])


def test_save_and_restore_round_trip(tmp_path):
  store = ClientStateStore(str(tmp_path / 'live'), _initial())
  store.put(['a', 'b/c'], [_state(1), _state(2)])
  checkpoint = str(tmp_path / 'ckpt' / 'round_5')
  store.save(checkpoint)
  for name in _store_files(tmp_path / 'live'):  # Saved cheaply, as hard links.
    assert os.path.samefile(os.path.join(str(tmp_path / 'live'), name), os.path.join(checkpoint, name))
  assert client_state_store.MANIFEST_NAME in os.listdir(checkpoint)
  snapshot = {name: open(os.path.join(checkpoint, name), 'rb').read() for name in os.listdir(checkpoint)}

  store.put(['a', 'later'], [_state(10), _state(11)])
  assert {name: open(os.path.join(checkpoint, name), 'rb').read() for name in os.listdir(checkpoint)} == snapshot
  with pytest.raises(ValueError, match='already contains'):
    store.save(checkpoint)

  store.restore(checkpoint)
  assert store.stored_client_ids() == ['a', 'b/c'] and 'later' not in store
  a, bc, later = store.get(['a', 'b/c', 'later'])
  _assert_state_equal(a, _state(1))
  _assert_state_equal(bc, _state(2))
  _assert_state_equal(later, _initial())
  store.put(['a'], [_state(20)])  # Writing after a restore must not reach into the checkpoint.
  store.restore(checkpoint)
  _assert_state_equal(store.get(['a'])[0], _state(1))
  reopened = ClientStateStore(str(tmp_path / 'elsewhere'), _initial())
  reopened.restore(checkpoint)
  _assert_state_equal(reopened.get(['b/c'])[0], _state(2))
  with pytest.raises(ValueError, match='leaves'):
    ClientStateStore(str(tmp_path / 'different'), [np.zeros(2, np.float32)]).restore(checkpoint)


@pytest.mark.parametrize('damage', ['truncate', 'flip', 'delete_file', 'delete_manifest'])
def test_damaged_snapshot_raises_and_leaves_live_store_unchanged(tmp_path, damage):
  store = ClientStateStore(str(tmp_path / 'live'), _initial())
  store.put(['a', 'b'], [_state(1), _state(2)])
  checkpoint = str(tmp_path / 'ckpt')
  store.save(checkpoint)
  store.put(['a', 'c'], [_state(3), _state(4)])
  victim = os.path.join(checkpoint, client_state_store.MANIFEST_NAME if damage == 'delete_manifest' else 'b.npz')
  if damage == 'truncate':
    with open(victim, 'r+b') as f:
      f.truncate(os.path.getsize(victim) - 10)
  elif damage == 'flip':  # Same size, one byte changed: only the checksum catches it.
    with open(victim, 'rb') as f:
      data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    os.remove(victim)  # A new file, not writing through the hard link into the live store.
    with open(victim, 'wb') as f:
      f.write(data)
  else:
    os.remove(victim)
  live_before = {name: open(os.path.join(str(tmp_path / 'live'), name), 'rb').read()
                 for name in _store_files(tmp_path / 'live')}
  with pytest.raises(CheckpointError) as info:
    store.restore(checkpoint)
  assert checkpoint in str(info.value) and victim in str(info.value)
  assert isinstance(info.value, RuntimeError)
  assert {name: open(os.path.join(str(tmp_path / 'live'), name), 'rb').read()
          for name in _store_files(tmp_path / 'live')} == live_before
  assert store.stored_client_ids() == ['a', 'b', 'c']
  _assert_state_equal(store.get(['a'])[0], _state(3))


def test_memory_stays_bounded_by_a_few_states(tmp_path):
  size = 250_000
  state_bytes = size * 4
  template = collections.OrderedDict(kernel=np.zeros((size - 1000,), np.float32), bias=np.zeros((1000,), np.float32))
  store = ClientStateStore(str(tmp_path), template)
  gc.collect()
  tracemalloc.start()
  try:
    for i in range(200):
      state = collections.OrderedDict(
          kernel=np.full((size - 1000,), i, np.float32), bias=np.full((1000,), -i, np.float32)
      )
      store.put([f'client {i}'], [state])
      del state
    _, put_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    cohort = store.get([f'client {i}' for i in (3, 50, 99, 150, 199)])
    _, get_peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert len(store) == 200
  assert put_peak < 4 * state_bytes, put_peak  # Not proportional to the 200 stored states.
  assert get_peak < (5 + 3) * state_bytes, get_peak  # The 5 returned states and little else.
  for i, state in zip((3, 50, 99, 150, 199), cohort):
    assert state['kernel'][0] == i and state['bias'][-1] == -i


def test_save_and_restore_copy_where_hard_links_fail(tmp_path, monkeypatch):
  store = ClientStateStore(str(tmp_path / 'live'), _initial())
  store.put(['a'], [_state(1)])

  def link_across_devices(src, dst):
    raise OSError(18, 'Invalid cross-device link')

  monkeypatch.setattr(client_state_store.os, 'link', link_across_devices)
  checkpoint = str(tmp_path / 'ckpt')
  store.save(checkpoint)
  assert not os.path.samefile(os.path.join(str(tmp_path / 'live'), 'a.npz'), os.path.join(checkpoint, 'a.npz'))
  store.put(['a', 'b'], [_state(2), _state(3)])
  store.restore(checkpoint)
  assert store.stored_client_ids() == ['a']
  _assert_state_equal(store.get(['a'])[0], _state(1))


def test_clear_forgets_every_state_but_not_snapshots(tmp_path):
  store = client_state_store.ClientStateStore(str(tmp_path / 'live'), [np.zeros(2, np.float32)])
  store.put(['a', 'b'], [[np.ones(2, np.float32)], [np.full(2, 2.0, np.float32)]])
  store.save(str(tmp_path / 'snapshot'))
  store.clear()
  assert len(store) == 0
  np.testing.assert_array_equal(store.get(['a'])[0][0], np.zeros(2))
  store.restore(str(tmp_path / 'snapshot'))
  np.testing.assert_array_equal(store.get(['b'])[0][0], np.full(2, 2.0))
