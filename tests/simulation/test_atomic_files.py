"""`atomic_files`: a file is replaced whole or left as it was, and a failed write leaves no temporary file."""

import os
import stat

import pytest

from tff_robust.simulation import atomic_files


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path):
  path = tmp_path / 'summary.json'
  path.write_text('{"rounds": 40}')
  atomic_files.write_text_atomically(str(path), '{"rounds": 80}')
  assert path.read_text() == '{"rounds": 80}'
  assert os.listdir(tmp_path) == ['summary.json']


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary_file(tmp_path):
  path = tmp_path / 'results.csv'
  path.write_text('algorithm\nfedavg\n')

  def torn_write(f):
    f.write(b'algorithm\nfedavg\nrf')  # a row cut off, as a kill mid-write would leave it
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    atomic_files.write_atomically(str(path), torn_write)
  assert path.read_text() == 'algorithm\nfedavg\n'
  assert os.listdir(tmp_path) == ['results.csv']


def test_temporary_files_carry_the_prefix_a_directory_owner_removes(tmp_path, monkeypatch):
  seen = []
  monkeypatch.setattr(os, 'replace', lambda src, dst: seen.append(os.path.basename(src)))
  atomic_files.write_text_atomically(str(tmp_path / 'x'), 'x')
  assert len(seen) == 1 and seen[0].startswith(atomic_files.TMP_PREFIX)


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_follows_the_umask(tmp_path):
  old = tmp_path / 'summary.json'
  old.write_text('{}')
  os.chmod(old, 0o640)
  atomic_files.write_text_atomically(str(old), '{"rounds": 2}')
  assert stat.S_IMODE(os.stat(old).st_mode) == 0o640
  mask = os.umask(0o022)
  try:
    atomic_files.write_text_atomically(str(tmp_path / 'results.csv'), 'algorithm\n')
  finally:
    os.umask(mask)
  assert stat.S_IMODE(os.stat(tmp_path / 'results.csv').st_mode) == 0o644  # as open() would make it, not 0600
