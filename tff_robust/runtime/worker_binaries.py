"""Which TFF `worker_binary` to start, and whether its TensorFlow can place ops on a GPU at all.

Every local worker (`execution_context.LocalWorker`, hence `experiments.train` and every binary, test and
benchmark) and `worker_service` start the binary `resolve()` names: the argument if given (the runner's
`--worker_binary`), else $TFF_ROBUST_WORKER_BINARY, else the one in the TFF wheel. That is how a user runs
with a worker built from TFF's source with CUDA: TFF 0.87's PyPI wheel ships a binary built without it.

`gpu_support(path)` reads the binary itself, once per file version. TensorFlow's grappler (`devices.cc`, in
every TensorFlow runtime: it optimises every graph the worker runs) logs its count of eligible GPUs with one
of two string literals chosen at compile time: under `#if GOOGLE_CUDA || TENSORFLOW_USE_ROCM` "Number of
eligible GPUs (core count >= 8, compute capability >= ...", otherwise the same text followed by "(Note:
TensorFlow was not compiled with CUDA or ROCm support)". A compiled string literal cannot be dropped by
stripping symbols, so the note's presence proves a build without CUDA and ROCm, and the first string without
the note proves a build with one of them. Checked here: TFF 0.87's worker holds the note; TensorFlow 2.14's
own CUDA-built `libtensorflow_cc.so.2` (`tf.test.is_built_with_cuda()` is True) holds the string without it.
`ldd` is no such check: TensorFlow opens its CUDA libraries with `dlopen` at run time, so its CUDA build
links no CUDA library either.

What the check cannot see: whether the CUDA driver and libraries load at run time, whether the binary's CUDA
kernels suit the GPU's compute capability, and which GPUs the worker's environment exposes; a CUDA build can
still end up on the CPU. A file holding neither string (a wrapper script that starts the real binary, a
binary built without grappler) gives `UNKNOWN`: then nothing is assumed.

No TensorFlow here (the runner resolves the binary before importing it), and TFF's location is found
without importing TFF.
"""

import enum
import functools
import importlib.util
import mmap
import os
from typing import Optional

ENVIRONMENT_VARIABLE = 'TFF_ROBUST_WORKER_BINARY'

_CPU_ONLY_NOTE = b'(Note: TensorFlow was not compiled with CUDA or ROCm support)'
_GPU_COUNT_LOG = b'Number of eligible GPUs (core count >= 8, compute capability >= '


class GpuSupport(enum.Enum):
  """What a worker binary's TensorFlow was compiled for (see the module docstring)."""

  NONE = 'built without CUDA or ROCm'
  CUDA_OR_ROCM = 'built with CUDA or ROCm'
  UNKNOWN = 'not recognised as a TensorFlow binary'


def tff_wheel_binary() -> str:
  """Path of the `worker_binary` shipped in the installed TFF wheel (found without importing TFF)."""
  spec = importlib.util.find_spec('tensorflow_federated')
  if spec is None or not spec.submodule_search_locations:
    raise RuntimeError('tensorflow-federated is not installed: it ships the TFF worker binary')
  path = os.path.join(spec.submodule_search_locations[0], 'data', 'worker_binary')
  if not os.path.isfile(path):
    raise RuntimeError(f'TFF worker binary not found at {path}; is tensorflow-federated installed whole?')
  return path


def is_executable_file(path: str) -> bool:
  """Whether `path` is a regular file this user may execute."""
  return os.path.isfile(path) and os.access(path, os.X_OK)


def _check_executable(path: str, source: str) -> str:
  if not is_executable_file(path):
    reason = 'is not an executable file' if os.path.exists(path) else 'does not exist'
    raise ValueError(f'{source}={path} {reason}; it must name a TFF worker_binary (e.g. one built with CUDA)')
  return os.path.abspath(path)


def resolve(path: Optional[str] = None, *, name: str = 'worker_binary') -> str:
  """The absolute path of the worker binary to start: `path`, else $TFF_ROBUST_WORKER_BINARY, else TFF's.

  Raises ValueError, naming `name` (e.g. '--worker_binary') or the environment variable, when the path given
  is not an executable file.
  """
  if path:
    return _check_executable(path, name)
  from_environment = os.environ.get(ENVIRONMENT_VARIABLE)
  if from_environment:
    return _check_executable(from_environment, f'${ENVIRONMENT_VARIABLE}')
  return tff_wheel_binary()


@functools.lru_cache(maxsize=8)
def _gpu_support_of_version(path: str, size: int, mtime_ns: int) -> GpuSupport:
  del size, mtime_ns  # the cache key: a rebuilt binary is read again
  with open(path, 'rb') as binary:
    if os.fstat(binary.fileno()).st_size == 0:
      return GpuSupport.UNKNOWN
    with mmap.mmap(binary.fileno(), 0, access=mmap.ACCESS_READ) as contents:
      if contents.find(_CPU_ONLY_NOTE) >= 0:
        return GpuSupport.NONE
      if contents.find(_GPU_COUNT_LOG) >= 0:
        return GpuSupport.CUDA_OR_ROCM
  return GpuSupport.UNKNOWN


def gpu_support(path: str) -> GpuSupport:
  """Whether the TensorFlow compiled into the binary at `path` can place ops on a GPU (module docstring).

  Reads the file (memory-mapped: ~35 ms for TFF's 300 MB binary once cached) at most once per version.
  """
  status = os.stat(path)
  return _gpu_support_of_version(os.path.realpath(path), status.st_size, status.st_mtime_ns)
