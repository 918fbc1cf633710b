"""`--gpus` against the worker binary in use: TFF's PyPI worker (no CUDA) runs on the CPU and refuses GPU indices."""

import os

from absl import logging
import pytest
import tensorflow as tf

from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries

_CORES = len(os.sched_getaffinity(0))


@pytest.fixture
def tff_binary():
  return worker_binaries.tff_wheel_binary()


@pytest.fixture
def gpu_capable_binary(tmp_path):
  """A stand-in holding TensorFlow's GPU-count string without the CPU-only note (as a CUDA build does)."""
  path = tmp_path / 'cuda_worker'
  path.write_bytes(b'\0Number of eligible GPUs (core count >= 8, compute capability >= \0')
  return str(path)


@pytest.fixture
def warnings_logged(monkeypatch):
  logged = []
  monkeypatch.setattr(logging, 'warning', lambda message, *args: logged.append(message % args))
  return logged


@pytest.mark.parametrize('setting', ['0', '1,0'])
def test_gpu_indices_are_refused_in_one_line_for_a_worker_without_cuda(tff_binary, setting):
  with pytest.raises(ValueError) as refusal:
    gpu_placement.check_gpu_setting(setting, tff_binary)
  message = str(refusal.value)
  assert '\n' not in message
  assert message.startswith(f'--gpus={setting}: ') and 'built without CUDA' in message
  assert f'{_CORES} cores' in message and '--worker_binary' in message


def test_auto_says_in_one_line_that_clients_run_on_the_cpu_cores(tff_binary, warnings_logged):
  assert gpu_placement.visible_gpus_setting('auto', tff_binary) is None
  assert len(warnings_logged) == 1
  assert warnings_logged[0].startswith('--gpus=auto: ') and 'built without CUDA' in warnings_logged[0]
  assert f'runs on the CPU ({_CORES} cores)' in warnings_logged[0]


def test_none_hides_every_gpu_and_says_nothing_at_warning_level(tff_binary, warnings_logged):
  assert gpu_placement.visible_gpus_setting('none', tff_binary) == '-1'
  assert not warnings_logged


@pytest.mark.parametrize('setting', ['first', '0,0', '-1', ''])
def test_malformed_settings_are_refused_naming_the_flag(tff_binary, setting):
  with pytest.raises(ValueError, match='^--gpus must be'):
    gpu_placement.check_gpu_setting(setting, tff_binary)


def test_a_worker_that_can_use_gpus_is_checked_against_the_gpus_tensorflow_sees(gpu_capable_binary,
                                                                                warnings_logged):
  gpus = len(tf.config.list_physical_devices('GPU'))
  gpu_placement.check_binary_supports('0', gpu_capable_binary)  # the binary could: only the count decides
  with pytest.raises(ValueError, match=f'asks for GPU {gpus}, but TensorFlow sees {gpus} GPU'):
    gpu_placement.check_gpu_setting(str(gpus), gpu_capable_binary)
  assert gpu_placement.visible_gpus_setting('auto', gpu_capable_binary) is None
  no_gpu = 'TensorFlow sees no GPU on this machine: client computation runs on CPU.'
  assert warnings_logged == ([] if gpus else [no_gpu])


def test_client_concurrency_is_one_per_core_unless_set():
  assert gpu_placement.client_concurrency(None) == _CORES
  assert gpu_placement.client_concurrency(3) == 3
  assert gpu_placement.client_concurrency(-1) == -1  # no limit, TFF's default
