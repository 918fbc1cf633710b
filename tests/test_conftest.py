"""tests/conftest.py's choice of pytest-xdist workers for pytest.ini's `-n auto`, and what importing it costs."""

import subprocess
import sys
import types

import pytest

from tests import conftest
from tests import repository


@pytest.mark.parametrize('args', [
    ['tests/test_build_file.py'],
    ['tests/test_build_file.py::test_build_lists_every_source_file'],
    ['tests/test_build_file.py::test_a', 'tests/test_build_file.py::test_b'],
])
def test_one_file_or_tests_of_one_file_run_in_this_process(args):
  assert conftest.pytest_xdist_auto_num_workers(types.SimpleNamespace(args=args)) == 0


@pytest.mark.parametrize('args', [
    ['tests'],
    ['tests/aggregators'],
    ['tests/test_build_file.py', 'tests/test_readme.py'],
    ['tests/test_build_file.py::test_a', 'tests/test_readme.py::test_b'],
])
def test_a_directory_or_several_files_get_xdist_s_default(args):
  assert conftest.pytest_xdist_auto_num_workers(types.SimpleNamespace(args=args)) is None


def test_importing_the_conftest_imports_no_tensorflow():
  """The xdist controller imports tests/conftest.py and runs no test: TensorFlow there is ~5 s of CPU for nothing."""
  probe = ('import sys, tests.conftest; '
           'print(sorted(m for m in ("tensorflow", "tensorflow_federated") if m in sys.modules))')
  result = subprocess.run([sys.executable, '-c', probe], cwd=repository.ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
  assert result.stdout.strip() == '[]'
