"""Test session set-up: one TFF worker owned by the test process, stopped when the session ends."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from tff_robust.simulation import execution_context  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='session', autouse=True)
def tff_worker():
  worker = execution_context.set_local_execution_context()
  yield worker
  execution_context.stop_local_execution_context()
  assert not worker.is_running(), 'the TFF worker_binary outlived the test session'
