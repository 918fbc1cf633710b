"""Where the TFF worker runs client computations, from a `--gpus` setting and the worker binary in use, and how
many it runs at once on the CPU (`client_concurrency`).

TFF's C++ runtime runs every TensorFlow computation of a round (client training included) inside the
`worker_binary`, not in Python. Whether that binary's TensorFlow can place an op on a GPU at all was fixed
when it was compiled, and TFF 0.87's PyPI wheel ships a worker built without CUDA: with it, every client
computation runs on the CPU whatever the machine has, and a GPU host's value is its CPU cores.
`worker_binaries.gpu_support` reads that from the binary (its docstring says why the check is reliable and
what it cannot see). So, per worker process:
- 'auto': a worker built without CUDA says so once, naming the CPU cores it runs on; any other worker sees
  every GPU TensorFlow sees (it inherits the environment), or it is said once that there is none;
- 'none': no GPU (CUDA_VISIBLE_DEVICES=-1), everything on CPU;
- '0,2': exactly those GPU indices (CUDA_VISIBLE_DEVICES); refused for a worker built without CUDA, and for
  indices beyond the GPUs TensorFlow sees.
A GPU needs a worker built from TFF's source with CUDA (`--worker_binary` or $TFF_ROBUST_WORKER_BINARY). What
is tested here: the refusal and the message on TFF's CPU-only worker, the binary check on TFF's worker and on
TensorFlow's own CUDA build, and a stand-in binary being started in TFF's place. Not tested: a run on a GPU
(there is none on these machines).

TensorFlow is imported only by the checks that count GPUs, and only for a worker that may use them, so that a
runner checks `--gpus` (`parse_gpu_indices`, `check_binary_supports`) before loading it.
"""

import importlib.metadata
import os
from typing import Optional

from absl import logging

from tff_robust.runtime import worker_binaries

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


def _binary_description(binary: str) -> str:
  """'the TFF 0.87.0 wheel's worker_binary' for TFF's own, else the binary's path."""
  try:
    if os.path.samefile(binary, worker_binaries.tff_wheel_binary()):
      return f"the TFF {importlib.metadata.version('tensorflow-federated')} wheel's worker_binary"
  except (OSError, RuntimeError, importlib.metadata.PackageNotFoundError):
    pass
  return f'the worker binary {binary}'


def cpu_cores() -> int:
  """The cores this process (and the worker it starts, which inherits its affinity) may run on."""
  return len(os.sched_getaffinity(0))


def client_concurrency(setting: Optional[int]) -> int:
  """A worker's `max_concurrent_computation_calls` for `setting`: None gives one client computation per CPU core
  (`cpu_cores`); a non-positive setting means no limit, TFF's default.

  With no limit a worker starts a round's client computations all at once; on 2 cores a limit of one per core
  made a default run's round 7-33 % faster and a CPU-heavy one 20-40 % (`benchmarks/results.md` section 6).
  """
  return cpu_cores() if setting is None else setting


def check_binary_supports(setting: str, binary: str) -> None:
  """Raises ValueError naming `--gpus` when `setting` asks for GPUs that `binary` cannot use. No TensorFlow."""
  if setting in (AUTO, NONE):
    return
  parse_gpu_indices(setting)
  if worker_binaries.gpu_support(binary) is worker_binaries.GpuSupport.NONE:
    raise ValueError(
        f'--gpus={setting}: {_binary_description(binary)} is built without CUDA or ROCm, so no op can run on a '
        f'GPU; pass --gpus=auto or none (the CPU, {cpu_cores()} cores), or a worker built with CUDA '
        f'(--worker_binary or ${worker_binaries.ENVIRONMENT_VARIABLE})'
    )


def check_gpu_setting(setting: str, binary: str) -> None:
  """Raises ValueError naming `--gpus` unless `setting` is valid for `binary` on this machine."""
  check_binary_supports(setting, binary)
  if setting in (AUTO, NONE):
    return
  indices = parse_gpu_indices(setting)
  available = len(_physical_gpus())
  if max(indices) >= available:
    raise ValueError(f'--gpus={setting} asks for GPU {max(indices)}, but TensorFlow sees {available} GPU(s)')


def visible_gpus_setting(setting: str, binary: str) -> Optional[str]:
  """CUDA_VISIBLE_DEVICES for the worker `binary` under `setting` (None: inherit), saying where it runs once."""
  check_gpu_setting(setting, binary)
  if setting == NONE:
    logging.info('--gpus=none: client computation runs on CPU.')
    return '-1'
  if setting == AUTO:
    support = worker_binaries.gpu_support(binary)
    if support is worker_binaries.GpuSupport.NONE:
      logging.warning('--gpus=auto: %s is built without CUDA, so client computation runs on the CPU (%d cores).',
                      _binary_description(binary), cpu_cores())
      return None
    if support is worker_binaries.GpuSupport.UNKNOWN:
      logging.info('Cannot tell whether %s can use a GPU (no TensorFlow GPU string in it).', binary)
    gpus = _physical_gpus()
    if gpus:
      logging.info('Client computation may use %d GPU(s): %s', len(gpus), [gpu.name for gpu in gpus])
    else:
      logging.warning('TensorFlow sees no GPU on this machine: client computation runs on CPU.')
    return None
  logging.info('Client computation may use GPU(s) %s.', setting)
  return setting
