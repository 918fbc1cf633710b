"""The runtime modules that run before or instead of a Python TFF program import neither TensorFlow nor TFF: the
worker launcher (before every local worker starts) and its TLS relay, `worker_service` (which starts the worker, and
parses its flags with `tff_robust.command_line.finite_flags`) and the checks the runner makes before it loads
TensorFlow (`worker_binaries`, `gpu_placement`, `worker_tls`)."""

import subprocess
import sys

from tests import repository


def _heavy_modules_after(script: str) -> str:
  """The TensorFlow and TFF modules loaded after running `script` in a fresh interpreter, as printed."""
  script += (
      "\nimport sys\n"
      "print(sorted(name for name in sys.modules if name.split('.')[0] in ('tensorflow', 'tensorflow_federated')))\n"
  )
  result = subprocess.run([sys.executable, '-c', script], cwd=repository.ROOT, capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout.strip().splitlines()[-1]


def test_the_launcher_service_and_placement_checks_import_no_tensorflow():
  assert _heavy_modules_after(
      'from tff_robust.runtime import gpu_placement, tls_relay, worker_binaries, worker_launcher, worker_service\n'
      'from tff_robust.runtime import worker_channels, worker_tls\n'
      'gpu_placement.check_binary_supports("auto", worker_binaries.resolve())'
  ) == '[]'


def test_the_worker_service_the_flag_parser_and_the_task_names_import_no_tensorflow():
  assert _heavy_modules_after(
      'import tff_robust.runtime.worker_service\nimport tff_robust.command_line.finite_flags\nimport tff_robust.tasks'
  ) == '[]'


def test_the_scan_sees_tensorflow_when_it_is_imported():
  assert 'tensorflow' in _heavy_modules_after('import tensorflow')
