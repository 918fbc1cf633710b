"""Turning TFF's nested round metrics into flat, release-ready dictionaries."""

import collections
from typing import Any

import numpy as np


def flatten_metrics(metrics: Any, prefix: str = '') -> dict[str, float]:
  """Flattens nested mappings into 'a/b/c' keys; vectors become 'key/0', 'key/1', ...; empty ones vanish."""
  flat = collections.OrderedDict()
  if isinstance(metrics, dict):
    for key, value in metrics.items():
      flat.update(flatten_metrics(value, f'{prefix}{key}/'))
    return flat
  if isinstance(metrics, (list, tuple)):
    for index, value in enumerate(metrics):
      flat.update(flatten_metrics(value, f'{prefix}{index}/'))
    return flat
  array = np.asarray(metrics)
  name = prefix.rstrip('/')
  if array.ndim == 0:
    flat[name] = array.item()
  else:
    for index, value in enumerate(array.reshape(-1)):
      flat[f'{name}/{index}'] = value.item()
  return flat
