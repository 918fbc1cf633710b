"""A resumed run's `metrics.csv`: keep the rows of the checkpointed rounds, drop a damaged tail, refuse other damage.

`training_loop.run_training` releases one row per round (`round` first, then numbers) with TFF's
`CSVFileReleaseManager`, which appends each row, and checkpoints round k only after releasing it. A run killed
while appending leaves a torn last line, always of a round after the newest checkpoint, which the resumed run
trains and releases again. Before resuming from round k, `keep_checkpointed_rounds` rewrites the file with its
intact rows of rounds 1..k (atomically), and says in one line what it dropped if a line was damaged. Damage that
loses a checkpointed round (its row damaged, missing or repeated, a header without `round`, no file) raises
`DamagedMetricsError`, whose message is one line: the run's directory is then refused, and --overwrite starts
afresh. `rounds_without_counted_update` and `last_released_row` read back what a resumed run needs of the file;
`evaluation_at` the evaluation of a round before the last (a sweep's measurement at the end of an attack window).

Imports no TensorFlow.
"""

import csv
import os
from typing import Optional

KEY = 'round'


class DamagedMetricsError(ValueError):
  """metrics.csv lacks rows of the rounds a checkpoint holds; the message is one line naming the file."""


def _row(line: str, width: int) -> Optional[list[str]]:
  """The fields of one line of a table `width` columns wide, or None if it is not an intact row: a positive
  integer round and, in every other column, a number or nothing."""
  try:
    (fields,) = csv.reader([line])
  except (csv.Error, ValueError):  # NUL bytes, an unclosed quote, or an empty line
    return None
  if len(fields) != width or not fields[0].isdigit() or int(fields[0]) < 1:
    return None
  for field in fields[1:]:
    try:
      if field:
        float(field)
    except ValueError:
      return None
  return fields


def _damaged(path: str, message: str) -> DamagedMetricsError:
  return DamagedMetricsError(f'{path} is damaged: {message}; --overwrite starts the run afresh')


def keep_checkpointed_rounds(path: str, last_round: int) -> Optional[str]:
  """Rewrites `path` with the rows of rounds 1..`last_round` only; returns a one-line note if it dropped a
  damaged line (None if the file was intact).

  Raises:
    DamagedMetricsError: `path` is missing or unreadable, has no `round` column, or lacks an intact row of a
      round in 1..`last_round` (the rows the resumed run will not release again).
  """
  try:
    with open(path, newline='', errors='replace') as f:
      lines = f.read().splitlines()
  except OSError as error:
    raise _damaged(path, f'it cannot be read ({error.strerror or error}) but the checkpoint holds rounds '
                         f'1-{last_round}') from None
  header = _header(lines[0]) if lines else None
  if header is None:
    raise _damaged(path, f'its first line is not a header starting with {KEY!r}')
  rows = [_row(line, len(header)) for line in lines[1:]]
  kept = [fields for fields in rows if fields is not None and int(fields[0]) <= last_round]
  rounds = [int(fields[0]) for fields in kept]
  if rounds != list(range(1, last_round + 1)):
    missing = sorted(set(range(1, last_round + 1)) - set(rounds))
    repeated = sorted({number for number in rounds if rounds.count(number) > 1})
    problems = ([f'no intact row of round(s) {_ranges(missing)}'] if missing else []) + (
        [f'several rows of round(s) {_ranges(repeated)}'] if repeated else []) or ['its rows are out of order']
    raise _damaged(path, f'the checkpoint holds rounds 1-{last_round}, but it has {" and ".join(problems)}')
  damaged = [number for number, fields in enumerate(rows, start=2) if fields is None]
  with open(path + '.tmp', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(kept)
  os.replace(path + '.tmp', path)
  if not damaged:
    return None
  return (f'{path}: dropped {len(damaged)} damaged line(s) (line(s) {_ranges(damaged)}; a run killed while writing '
          f'leaves one); the rows of rounds 1-{last_round} are intact')


def _header(line: str) -> Optional[list[str]]:
  try:
    (fields,) = csv.reader([line])
  except (csv.Error, ValueError):
    return None
  return fields if fields and fields[0] == KEY and all(fields) else None


def _ranges(numbers: list[int]) -> str:
  """'1-3, 7' for [1, 2, 3, 7]."""
  parts, start = [], None
  for index, number in enumerate(numbers):
    start = number if start is None else start
    if index + 1 == len(numbers) or numbers[index + 1] != number + 1:
      parts.append(str(number) if start == number else f'{start}-{number}')
      start = None
  return ', '.join(parts)


def rounds_without_counted_update(csv_path: str, last_round: int) -> list[int]:
  """The rounds up to `last_round` whose metrics.csv row has `counted_updates` 0, in order (a run resumed from
  round `last_round`)."""
  if not os.path.exists(csv_path):
    return []
  with open(csv_path, newline='') as f:
    rows = {int(row['round']): row.get('counted_updates') for row in csv.DictReader(f)}
  return sorted(r for r, counted in rows.items() if r <= last_round and counted not in (None, '') and
                float(counted) == 0)


def last_released_row(csv_path: str, round_num: int) -> dict[str, float]:
  """The `train/*` values released for `round_num` in metrics.csv (empty if it has no such row)."""
  if not os.path.exists(csv_path):
    return {}
  with open(csv_path, newline='') as f:
    rows = [row for row in csv.DictReader(f) if int(row['round']) == round_num]
  if not rows:
    return {}
  return {key: float(value) for key, value in rows[-1].items() if key.startswith('train/') and value != ''}


def evaluation_at(csv_path: str, round_num: int) -> tuple[Optional[int], dict[str, float]]:
  """(round, its `eval/*` values) of the last evaluation released at or before round `round_num` in metrics.csv:
  round `round_num`'s own when it was evaluated, an earlier one when the run stopped before it (a non-finite model);
  (None, {}) if there is none. A row is an evaluation when any `eval/*` value is non-empty."""
  if not os.path.exists(csv_path):
    return None, {}
  with open(csv_path, newline='') as f:
    rows = [row for row in csv.DictReader(f) if int(row[KEY]) <= round_num]
  for row in reversed(rows):
    evaluated = {key: float(value) for key, value in row.items() if key.startswith('eval/') and value not in ('', None)}
    if evaluated:
      return int(row[KEY]), evaluated
  return None, {}
