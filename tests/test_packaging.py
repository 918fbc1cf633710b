"""What `pip install` puts into site-packages: the `tff_robust` package only, no top-level `experiments` or
`benchmarks` module that would shadow a user's own (the binaries run from the checkout with `python -m`)."""

import os
import runpy
import subprocess
import sys

import setuptools

from tests import repository


def _setup_arguments(monkeypatch) -> dict:
  """The keyword arguments setup.py passes to `setuptools.setup`, found by running it with `setup` replaced."""
  calls = []
  monkeypatch.setattr(setuptools, 'setup', lambda **kwargs: calls.append(kwargs))
  monkeypatch.chdir(repository.ROOT)  # find_packages() searches the working directory
  runpy.run_path(os.path.join(repository.ROOT, 'setup.py'), run_name='__main__')
  (arguments,), = [calls]
  return arguments


def test_only_tff_robust_packages_are_installed(monkeypatch):
  packages = _setup_arguments(monkeypatch)['packages']
  assert 'tff_robust' in packages and 'tff_robust.tasks' in packages
  assert [p for p in packages if p.split('.')[0] != 'tff_robust'] == []
  assert not _setup_arguments(monkeypatch).get('py_modules')


def test_the_runner_still_starts_from_the_checkout():
  result = subprocess.run(
      [sys.executable, '-c', 'import experiments.train, sys; print(experiments.train.__file__)'],
      cwd=repository.ROOT, capture_output=True, text=True, timeout=120,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == os.path.join(repository.ROOT, 'experiments', 'train.py')
