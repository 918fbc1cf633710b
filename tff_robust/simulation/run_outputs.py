"""The files a finished run writes besides its metrics: the final model's weights and the per-device rows."""

import csv
from typing import Optional

import numpy as np
import tensorflow_federated as tff


def save_model_weights(path: str, model_weights: Optional[tff.learning.models.ModelWeights]) -> None:
  """Writes the final global model as `trainable_<i>` and `non_trainable_<i>` arrays (none: no file)."""
  if model_weights is None:
    return
  arrays = {f'trainable_{i}': np.asarray(v) for i, v in enumerate(model_weights.trainable)}
  arrays.update((f'non_trainable_{i}', np.asarray(v)) for i, v in enumerate(model_weights.non_trainable))
  np.savez(path, **arrays)


def write_device_rows(path: str, rows: list[dict]) -> None:
  """Writes `rows` (dicts with the same keys, at least one) as a CSV file with a header: devices.csv."""
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
