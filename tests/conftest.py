"""Test session set-up: one TFF worker owned by the test process, stopped when the session ends."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import sys  # pylint: disable=g-import-not-at-top

import pytest  # pylint: disable=g-import-not-at-top

# TensorFlow Federated is imported by the test modules and the `tff_worker` fixture, not here: the pytest-xdist
# controller imports this file but collects and runs no test, so it would import TensorFlow and TFF (~5 s of CPU)
# for nothing, beside its two workers doing the same at start.


def pytest_xdist_auto_num_workers(config):
  """Workers for pytest.ini's `-n auto`: none (this process runs the tests) when the command names one file or tests
  of one file, else xdist's default (one per core; pytest.ini caps it at 4).

  Each xdist worker pays ~9 s of imports and start-up before its first test, more than most single files take, and
  `--dist loadfile` would give one file to one worker anyway.
  """
  files = {arg.split('::')[0] for arg in config.args}
  if len(files) == 1 and os.path.isfile(files.pop()):
    return 0
  return None


def pytest_unconfigure(config):
  """A process that imported TFF without running a test (`--collect-only`) discards TFF's import-time context: its
  worker manager would print an ignored `AttributeError ... 'Popen'` at exit. After `tff_worker` ran this does
  nothing (`discard_tff_default_context` leaves an installed context alone)."""
  del config  # unused
  if 'tensorflow_federated' in sys.modules:
    from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
    execution_context.discard_tff_default_context()


@pytest.fixture(scope='session', autouse=True)
def tff_worker():
  from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
  execution_context.discard_tff_default_context()  # before installing ours, as at any binary's start
  # Without Grappler (`simulation_compiler`): the session compiles thousands of small computations and runs each
  # a few times, so compiling them dominated its time. The runner, which the end-to-end tests start as users do,
  # keeps TFF's own lowering with Grappler, and so do the two-worker contexts the tests build.
  worker = execution_context.set_local_execution_context(optimize_graphs=False)
  yield worker
  execution_context.stop_local_execution_context()
  assert not worker.is_running(), 'the TFF worker_binary outlived the test session'
