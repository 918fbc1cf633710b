"""The robustness sweep's results.csv: one row per finished run, read back to resume, added as each run ends.

Columns (`FIELDS`): algorithm (or defence chain), corruption (canonical spec), fraction (rho), seed, the final
evaluation's accuracy and loss, secure-average calls per round, the realised corrupted share of the training
examples, and the targeted attacks' columns (`experiments.targeted_runs.FIELDS`). A file written before those
columns existed is read with '' in them and rewritten with the full header at the next append, so that an older
sweep resumes.

Imports no TensorFlow.
"""

import csv
import io
import os

from experiments import targeted_runs
from tff_robust.simulation import atomic_files

FIELDS = ('algorithm', 'corruption', 'fraction', 'seed', 'accuracy', 'loss', 'calls_per_round',
          'corruption_weight_share') + targeted_runs.FIELDS
_NUMBERS = {'fraction': float, 'seed': int, 'accuracy': float, 'loss': float, 'calls_per_round': float,
            'corruption_weight_share': float}


def run_key(row: dict) -> tuple:
  """(algorithm, corruption, fraction, seed): what identifies a run of the sweep."""
  return row['algorithm'], row['corruption'], float(row['fraction']), int(row['seed'])


def read_finished(output_dir: str) -> list[dict]:
  """The rows of `output_dir`/results.csv, the first columns' numbers parsed (the targeted attacks' columns kept as
  text, '' where absent); [] if there is no file."""
  path = os.path.join(output_dir, 'results.csv')
  if not os.path.exists(path):
    return []
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    row.update({field: row.get(field) or '' for field in targeted_runs.FIELDS})
    row.update({field: kind(row[field]) for field, kind in _NUMBERS.items()})
  return rows


def append(output_dir: str, row: dict) -> None:
  """Adds `row` (its `FIELDS`) to `output_dir`/results.csv, with the header in a new file. The file is rewritten
  whole (`atomic_files`), so a sweep killed while writing leaves the rows before or after, never a torn last row
  that a resume would misread. A file with another header (written before the targeted attacks' columns) gets
  `FIELDS`, its rows keeping their values and '' in the new columns."""
  path = os.path.join(output_dir, 'results.csv')
  rows = []
  if os.path.exists(path):
    with open(path, newline='') as f:
      rows = list(csv.DictReader(f))
  text = io.StringIO(newline='')
  writer = csv.DictWriter(text, fieldnames=FIELDS, restval='')
  writer.writeheader()
  writer.writerows(rows + [row])
  atomic_files.write_text_atomically(path, text.getvalue())
