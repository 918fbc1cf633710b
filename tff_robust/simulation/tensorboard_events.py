"""A resumed run's TensorBoard events: drop those of the rounds it will train and release again.

`metrics.csv` is cut back to the newest checkpoint before a run resumes (`metrics_csv`); the TensorBoard event files
of the interrupted process hold the same rounds past it, which the resumed process writes again, and TensorBoard
would plot both (its own purge on a restart, a `SessionLog.START` event, depends on the order in which the files are
read and is not relied on here). So each event file of the log directory is rewritten whole (`atomic_files`),
without the summaries of steps >= `first_round`; events without a summary (the file version) are kept. A file whose
records stop being readable (a process killed while writing leaves a torn last record) keeps its readable ones, with
a warning: TensorBoard events never stop a resume. Reads and writes TFRecord files with TensorFlow's own reader and
writer.
"""

import os

from absl import logging
import tensorflow as tf

from tff_robust.simulation import atomic_files


def keep_rounds_before(log_dir: str, first_round: int) -> int:
  """Drops the summaries of steps >= `first_round` from every event file in `log_dir`; returns how many."""
  if not os.path.isdir(log_dir):
    return 0
  dropped = 0
  for name in sorted(os.listdir(log_dir)):
    if 'tfevents' not in name:
      continue
    path = os.path.join(log_dir, name)
    records, damaged = _readable_records(path)
    kept = [record for record in records if not _is_summary_from(record, first_round)]
    if len(kept) < len(records) or damaged:
      dropped += len(records) - len(kept)
      atomic_files.replace_atomically(path, lambda tmp_path, kept=kept: _write_records(tmp_path, kept))
  return dropped


def _readable_records(path: str) -> tuple[list[bytes], bool]:
  """(the records of `path` up to the first unreadable one, whether there was one)."""
  records = []
  try:
    for record in tf.data.TFRecordDataset(path):
      records.append(record.numpy())
  except tf.errors.DataLossError as error:
    logging.warning('TensorBoard event file %s is damaged after its %d readable records; they are kept, the rest is '
                    'dropped: %s', path, len(records), error.message)
    return records, True
  return records, False


def _is_summary_from(record: bytes, first_round: int) -> bool:
  event = tf.compat.v1.Event.FromString(record)
  return event.WhichOneof('what') == 'summary' and event.step >= first_round


def _write_records(path: str, records: list[bytes]) -> None:
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)
  with open(path, 'rb') as written:  # on disk before the rename makes it the event file
    os.fsync(written.fileno())
