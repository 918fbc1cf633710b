"""Which GPUs the TFF worker's client computations may use, from a `--gpus` setting.

TFF's C++ runtime runs every TensorFlow computation of a round (client training included) inside the
`worker_binary`, whose TensorFlow places ops on the GPUs it sees, exactly as TensorFlow does in Python. So
placement is chosen per worker process with CUDA_VISIBLE_DEVICES:
- 'auto': every GPU TensorFlow sees (the worker inherits the environment);
- 'none': no GPU (CUDA_VISIBLE_DEVICES=-1), everything on CPU;
- '0,2': exactly those GPU indices.
With several GPUs, TFF's runtime runs the cohort's client computations concurrently and TensorFlow spreads
them over the visible GPUs; `max_concurrent_computation_calls` bounds how many run at once when GPU memory
is short.

TensorFlow is imported only by the checks that count GPUs, so that a runner checks the syntax of `--gpus`
(`parse_gpu_indices`) before loading it.
"""

from typing import Optional

from absl import logging

AUTO = 'auto'
NONE = 'none'


def parse_gpu_indices(setting: str) -> list[int]:
  """The GPU indices of a comma-separated setting such as '0,2'; ValueError naming `--gpus` otherwise."""
  try:
    indices = [int(part) for part in setting.split(',')]
  except ValueError:
    indices = []
  if not indices or any(index < 0 for index in indices) or len(set(indices)) != len(indices):
    raise ValueError(f"--gpus must be 'auto', 'none' or distinct GPU indices like '0,1', got {setting!r}")
  return indices


def _physical_gpus() -> list:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (see the module docstring)
  return tf.config.list_physical_devices('GPU')


def check_gpu_setting(setting: str) -> None:
  """Raises ValueError naming `--gpus` unless `setting` is valid on this machine."""
  if setting in (AUTO, NONE):
    return
  indices = parse_gpu_indices(setting)
  available = len(_physical_gpus())
  if max(indices) >= available:
    raise ValueError(f'--gpus={setting} asks for GPU {max(indices)}, but TensorFlow sees {available} GPU(s)')


def visible_gpus_setting(setting: str) -> Optional[str]:
  """CUDA_VISIBLE_DEVICES for the worker under `setting` (None: inherit), logging the placement once."""
  check_gpu_setting(setting)
  if setting == NONE:
    logging.info('--gpus=none: client computation runs on CPU.')
    return '-1'
  if setting == AUTO:
    gpus = _physical_gpus()
    if gpus:
      logging.info('Client computation may use %d GPU(s): %s', len(gpus), [gpu.name for gpu in gpus])
    else:
      logging.warning('TensorFlow sees no GPU on this machine: client computation runs on CPU.')
    return None
  logging.info('Client computation may use GPU(s) %s.', setting)
  return setting
