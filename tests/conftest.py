"""Test session set-up: one TFF worker owned by the test process, stopped when the session ends."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top

# The pytest-xdist controller (and `--collect-only`) imports this file but runs no test: without this, the worker
# manager of TFF's import-time context prints an ignored `AttributeError ... 'Popen'` when it exits.
execution_context.discard_tff_default_context()


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


@pytest.fixture(scope='session', autouse=True)
def tff_worker():
  # Without Grappler (`simulation_compiler`): the session compiles thousands of small computations and runs each
  # a few times, so compiling them dominated its time. The runner, which the end-to-end tests start as users do,
  # keeps TFF's own lowering with Grappler, and so do the two-worker contexts the tests build.
  worker = execution_context.set_local_execution_context(optimize_graphs=False)
  yield worker
  execution_context.stop_local_execution_context()
  assert not worker.is_running(), 'the TFF worker_binary outlived the test session'
