"""tests/conftest.py's choice of pytest-xdist workers for pytest.ini's `-n auto`."""

import types

import pytest

from tests import conftest


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
