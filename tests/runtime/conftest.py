"""Fixtures shared by the runtime tests."""

import pytest
import tensorflow_federated as tff

from tests.runtime import two_workers


@pytest.fixture
def two_worker_context():
  """The composing context over two fresh local workers, installed for the test; the workers stopped after."""
  with two_workers.two_worker_context() as context, tff.framework.get_context_stack().install(context):
    yield
