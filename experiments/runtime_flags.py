"""The runner's flags of where client computations run: remote workers, or the local worker's binary, GPUs and
concurrency; and the checks of the local worker that need no TensorFlow.

Imports no TensorFlow.
"""

from absl import flags

from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries

TFF_WORKER_ADDRESS = flags.DEFINE_list(
    'tff_worker_address', [],
    'host:port of TFF executor services (python -m tff_robust.runtime.worker_service) to run on; several '
    'split each cohort over them, every aggregation pass on all at once (every algorithm). Empty: a local worker.',
)
TFF_WORKER_CREDENTIALS = flags.DEFINE_string(
    'tff_worker_credentials', None,
    'Mutual TLS with the --tff_worker_address workers (started with worker_service --tls_*): a directory holding '
    'ca.pem (signed the workers\' certificates), client.pem and client.key (this driver\'s); '
    'scripts/make_test_certificates.sh makes a test set (its driver/). Unset: plain gRPC (loopback, SSH tunnel).',
)
GPUS = flags.DEFINE_string(
    'gpus', gpu_placement.AUTO,
    "Local worker: GPUs client computation may use: 'auto' (all TensorFlow sees), 'none' (CPU) or '0,1'. TFF's "
    "PyPI worker_binary has no CUDA: it runs on the CPU ('auto' says so, '0,1' is refused); see --worker_binary.",
)
MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', None,
    'Local worker: client computations run at once at most; unset: one per CPU core this run may use (faster than '
    'no limit on 2 cores: benchmarks/results.md section 6); non-positive: no limit (TFF\'s default).',
)
WORKER_BINARY = flags.DEFINE_string(
    'worker_binary', None,
    f'Local worker: the executable to start, e.g. TFF\'s worker_binary built from source with CUDA; unset: '
    f'${worker_binaries.ENVIRONMENT_VARIABLE}, else the TFF wheel\'s worker_binary (no CUDA).',
)


def _is_worker_address(address: str) -> bool:
  host, _, port = address.rpartition(':')
  return bool(host) and port.isdigit() and 1 <= int(port) <= 65535


def _gpu_setting_is_valid(setting: str) -> bool:
  """The syntax of --gpus; the GPUs TensorFlow sees are counted by `train_program.check_settings`."""
  if setting not in (gpu_placement.AUTO, gpu_placement.NONE):
    try:
      gpu_placement.parse_gpu_indices(setting)
    except ValueError as error:
      raise flags.ValidationError(str(error)) from None
  return True


flags.register_validator(
    'tff_worker_address', lambda addresses: all(_is_worker_address(a) for a in addresses),
    message='--tff_worker_address must be a comma-separated list of host:port with port in [1, 65535]',
)
flags.register_validator('gpus', _gpu_setting_is_valid)
flags.register_validator(
    'worker_binary', lambda path: path is None or worker_binaries.is_executable_file(path),
    message='--worker_binary must name an executable file: a TFF worker_binary, e.g. one built with CUDA',
)
