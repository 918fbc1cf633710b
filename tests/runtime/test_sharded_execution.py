"""Sharded execution over several TFF workers: the shards run at once, and their merge is exact."""

import threading
import time

import numpy as np
import pytest
import tensorflow_federated as tff


_SLOW_CALL_SECONDS = 0.3


@pytest.fixture
def create_calls(monkeypatch):
  """Makes every gRPC `create_call` of a stub take at least 0.3 s more; yields the (stub, start, end) list.

  The gRPC stub blocks until the worker answers, so calls that one driver thread made one after another could
  not overlap.
  """
  calls = []
  lock = threading.Lock()
  create_call = tff.framework.RemoteExecutorGrpcStub.create_call

  def slow_create_call(stub, *args, **kwargs):
    start = time.monotonic()
    time.sleep(_SLOW_CALL_SECONDS)
    result = create_call(stub, *args, **kwargs)
    with lock:
      calls.append((id(stub), start, time.monotonic()))
    return result

  monkeypatch.setattr(tff.framework.RemoteExecutorGrpcStub, 'create_call', slow_create_call)
  return calls


def test_the_shards_of_a_round_run_on_both_workers_at_once(two_worker_context, create_calls):
  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def mean(values):
    return tff.federated_mean(values)

  assert mean([1.0, 2.0, 3.0, 6.0]) == pytest.approx(3.0)
  stubs = {stub for stub, _, _ in create_calls}
  assert len(stubs) == 2, 'each worker computes its own shard'
  overlapping = [(a, b) for a in create_calls for b in create_calls
                 if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]]
  assert overlapping, f'the workers were called one after another: {create_calls}'


def test_a_weighted_mean_over_unequal_shards_equals_the_closed_form(two_worker_context):
  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS), tff.FederatedType(np.float32, tff.CLIENTS))
  def weighted_mean(values, weights):
    return tff.federated_mean(values, weights)

  values, weights = [1.0, 2.0, 4.0, 8.0, 16.0], [1.0, 3.0, 0.5, 2.0, 0.25]  # shards of 3 and 2 clients
  expected = np.dot(values, weights) / np.sum(weights)
  assert weighted_mean(values, weights) == pytest.approx(expected, rel=1e-6)
