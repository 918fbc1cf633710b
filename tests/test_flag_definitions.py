"""The modules the tests import from `benchmarks` and `experiments` can live in one process.

pytest imports every test module into one process, and absl keeps one global flag registry: a benchmark
module that defines `--task` imported beside `experiments.train_flags` (which defines it too) fails with
DuplicateFlagError at the first test that touches the runner's flags. Binaries may reuse flag names among
themselves (each runs alone); what the tests import in-process must not.
"""

import ast
import subprocess
import sys

from tests import repository

_PACKAGES = ('benchmarks', 'experiments')


def _modules_imported_by_tests() -> list[str]:
  """Every `benchmarks.x` / `experiments.x` module any test file imports, at module level or inside a function."""
  modules = set()
  for path in (repository.ROOT / 'tests').rglob('*.py'):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ImportFrom) and node.module in _PACKAGES:
        modules.update(f'{node.module}.{alias.name}' for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] in _PACKAGES:
        modules.add(node.module)
      elif isinstance(node, ast.Import):
        modules.update(alias.name for alias in node.names if alias.name.split('.')[0] in _PACKAGES)
  return sorted(modules)


def test_the_scan_finds_the_runner_flags_and_a_benchmark_module():
  modules = _modules_imported_by_tests()
  assert 'experiments.train_flags' in modules
  assert any(module.startswith('benchmarks.') for module in modules)


def test_every_module_the_tests_import_defines_its_flags_once_beside_the_others():
  modules = _modules_imported_by_tests()
  script = ''.join(f'import {module}\n' for module in modules)
  result = subprocess.run([sys.executable, '-c', script], cwd=repository.ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
