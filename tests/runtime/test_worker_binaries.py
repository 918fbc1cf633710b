"""Which worker binary is started, and the check of whether its TensorFlow can place ops on a GPU."""

import os

import pytest
import tensorflow as tf

from tff_robust.runtime import worker_binaries

_TFF_WHEEL_BINARY = os.path.join(
    os.path.dirname(os.path.dirname(tf.__file__)), 'tensorflow_federated', 'data', 'worker_binary'
)


def _executable(path, text='#!/bin/sh\nexit 0\n'):
  path.write_text(text)
  path.chmod(0o755)
  return str(path)


def test_the_tff_wheel_binary_is_found_without_importing_tff():
  assert worker_binaries.tff_wheel_binary() == _TFF_WHEEL_BINARY
  assert os.path.isfile(_TFF_WHEEL_BINARY)


def test_tff_0_87_pypi_worker_is_built_without_cuda():
  # What the issue found by hand (`strings` on the binary): TFF 0.87's PyPI worker cannot use a GPU.
  assert worker_binaries.gpu_support(_TFF_WHEEL_BINARY) is worker_binaries.GpuSupport.NONE


def test_tensorflows_own_library_is_classified_as_its_build_info_says():
  # An independent reference: the CUDA flag TensorFlow records about its own build. TF 2.14's Linux wheel is a
  # CUDA build, so this is the check's positive case (its libraries link no CUDA library either: `ldd` cannot tell).
  library = os.path.join(tf.sysconfig.get_lib(), 'libtensorflow_framework.so.2')
  expected = (worker_binaries.GpuSupport.CUDA_OR_ROCM if tf.sysconfig.get_build_info()['is_cuda_build']
              else worker_binaries.GpuSupport.NONE)
  assert worker_binaries.gpu_support(library) is expected


def test_a_file_without_tensorflows_strings_is_unknown(tmp_path):
  assert worker_binaries.gpu_support(_executable(tmp_path / 'wrapper')) is worker_binaries.GpuSupport.UNKNOWN
  (tmp_path / 'empty').write_bytes(b'')
  assert worker_binaries.gpu_support(str(tmp_path / 'empty')) is worker_binaries.GpuSupport.UNKNOWN


def test_a_rebuilt_binary_is_read_again(tmp_path):
  path = tmp_path / 'worker'
  path.write_bytes(b'\0Number of eligible GPUs (core count >= 8, compute capability >= \0')
  assert worker_binaries.gpu_support(str(path)) is worker_binaries.GpuSupport.CUDA_OR_ROCM
  path.write_bytes(b'\0Number of eligible GPUs (core count >= 8, compute capability >= '
                   b'(Note: TensorFlow was not compiled with CUDA or ROCm support)\0 ')
  assert worker_binaries.gpu_support(str(path)) is worker_binaries.GpuSupport.NONE


def test_resolve_prefers_the_argument_then_the_environment_then_tff(tmp_path, monkeypatch):
  given, from_environment = _executable(tmp_path / 'given'), _executable(tmp_path / 'from_environment')
  monkeypatch.delenv(worker_binaries.ENVIRONMENT_VARIABLE, raising=False)
  assert worker_binaries.resolve() == _TFF_WHEEL_BINARY
  monkeypatch.setenv(worker_binaries.ENVIRONMENT_VARIABLE, from_environment)
  assert worker_binaries.resolve() == from_environment
  assert worker_binaries.resolve(given) == given


@pytest.mark.parametrize('make, reason', [
    (lambda path: None, 'does not exist'),
    (lambda path: path.write_text('not executable'), 'is not an executable file'),
    (lambda path: path.mkdir(), 'is not an executable file'),
])
def test_a_bad_binary_path_is_refused_naming_where_it_came_from(tmp_path, monkeypatch, make, reason):
  path = tmp_path / 'worker'
  make(path)
  with pytest.raises(ValueError, match=f'^--worker_binary={path} {reason}'):
    worker_binaries.resolve(str(path), name='--worker_binary')
  monkeypatch.setenv(worker_binaries.ENVIRONMENT_VARIABLE, str(path))
  with pytest.raises(ValueError, match=rf'^\${worker_binaries.ENVIRONMENT_VARIABLE}={path} {reason}'):
    worker_binaries.resolve()
