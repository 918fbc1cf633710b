"""`tensorboard_events`: a resumed run's event files keep the summaries of the rounds before it, once each."""

import os

import tensorflow as tf

from tff_robust.simulation import tensorboard_events


def _write(log_dir, steps):
  """One process's writer: a scalar per step, as TFF's `TensorBoardReleaseManager` releases a round's metrics."""
  writer = tf.summary.create_file_writer(log_dir, filename_suffix=f'.{steps[0]}')
  with writer.as_default():
    for step in steps:
      tf.summary.scalar('train/loss', 1.0 / step, step=step)
  writer.close()


def _steps(log_dir):
  """(tag, step) of every summary in `log_dir`'s event files, sorted (CRCs checked as TensorBoard checks them). The
  files' names order them only within a second, and their counters compare as text, so no order is asserted."""
  found = []
  for name in sorted(os.listdir(log_dir)):
    for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      found.extend((value.tag, event.step) for value in event.summary.value)
  return sorted(found)


def test_an_interrupted_runs_later_rounds_are_dropped_and_the_resumed_ones_appear_once(tmp_path):
  log_dir = str(tmp_path)
  _write(log_dir, [1, 2, 3, 4, 5])  # killed after round 5, newest checkpoint at round 3
  assert tensorboard_events.keep_rounds_before(log_dir, 4) == 2
  _write(log_dir, [4, 5, 6])  # the resumed process
  assert _steps(log_dir) == [('train/loss', step) for step in range(1, 7)]
  files = os.listdir(log_dir)
  assert len(files) == 2 and all('tfevents' in name for name in files)  # no temporary file left
  for name in files:  # each still starts with its file version, which TensorBoard reads first
    first = next(iter(tf.data.TFRecordDataset(os.path.join(log_dir, name))))
    assert tf.compat.v1.Event.FromString(first.numpy()).WhichOneof('what') == 'file_version'


def test_a_resume_from_the_last_released_round_drops_nothing(tmp_path):
  _write(str(tmp_path), [1, 2, 3])
  before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
  assert tensorboard_events.keep_rounds_before(str(tmp_path), 4) == 0
  assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before


def test_a_missing_log_directory_is_nothing_to_drop(tmp_path):
  assert tensorboard_events.keep_rounds_before(str(tmp_path / 'tensorboard'), 1) == 0


def test_a_torn_last_record_is_dropped_and_the_readable_ones_kept(tmp_path):
  """A process killed while writing leaves a torn last record: the resume keeps what is readable, never fails."""
  _write(str(tmp_path), [1, 2, 3])
  [name] = os.listdir(tmp_path)
  data = (tmp_path / name).read_bytes()
  (tmp_path / name).write_bytes(data[:-5])  # the last record (step 3) cut short
  assert tensorboard_events.keep_rounds_before(str(tmp_path), 3) == 0  # step 3 was unreadable, not dropped
  assert _steps(str(tmp_path)) == [('train/loss', 1), ('train/loss', 2)]


def test_a_fresh_start_over_an_earlier_processes_events_drops_them_all(tmp_path):
  """A run killed before its first checkpoint starts again from round 1 (`first_round` 1): none of its events stay."""
  _write(str(tmp_path), [1, 2])
  assert tensorboard_events.keep_rounds_before(str(tmp_path), 1) == 2
  _write(str(tmp_path), [1, 2, 3])
  assert _steps(str(tmp_path)) == [('train/loss', step) for step in (1, 2, 3)]
