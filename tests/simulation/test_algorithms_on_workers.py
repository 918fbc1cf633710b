"""Whole algorithms on two TFF workers (`set_remote_execution_context`) train the same model as on one.

Five digits clients are split 3 + 2 over the workers; each algorithm's initial state goes through two rounds on
the session's local worker and on the two workers, from the same state and cohort. RFA and secure Delta-FL are
rounds of several dependent aggregation passes (Weiszfeld passes; quantile passes then the filtered mean), Fed+
(geometric median) keeps a state per client: every pass is merged from both workers' partial sums.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.runtime import composing_context
from tff_robust.runtime import execution_context
from tff_robust.simulation import algorithms
from tff_robust import tasks
from tests.runtime import two_workers

_NUM_CLIENTS = 5
_ROUNDS = 2


@pytest.fixture(scope='module')
def contexts():
  """(the session's local context, the context over two fresh local workers); stops both workers after."""
  with two_workers.two_worker_context() as context:
    yield tff.framework.get_context_stack().current, context


@pytest.fixture(scope='module')
def task_and_cohort():
  task = tasks.create_task('digits', client_epochs=1, client_batch_size=10, seed=0)
  ids = task.train_data.client_ids[:_NUM_CLIENTS]
  return task, ids, [task.client_dataset(client_id) for client_id in ids]


def _rounds(context, process, cohort, client_states=None):
  """The state (and the clients' states) after `_ROUNDS` rounds from `process.initialize()` in `context`."""
  with tff.framework.get_context_stack().install(context):
    state = process.initialize()
    for _ in range(_ROUNDS):
      if client_states is None:
        state = process.next(state, cohort).state
      else:
        output = process.next(state, cohort, client_states)
        state, client_states = output.state, output.client_states
  return state, client_states


def _assert_close(actual, expected):
  for actual_array, expected_array in zip(tf.nest.flatten(actual), tf.nest.flatten(expected), strict=True):
    np.testing.assert_allclose(actual_array, expected_array, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name, config', [
    ('fedavg', algorithms.AlgorithmConfig(client_learning_rate=0.05)),
    ('rfa', algorithms.AlgorithmConfig(client_learning_rate=0.05)),
    ('delta_fl', algorithms.AlgorithmConfig(client_learning_rate=0.05, quantile_method='secure')),
])
def test_the_global_model_on_two_workers_equals_the_local_one(contexts, task_and_cohort, name, config):
  local, two_workers = contexts
  task, _, cohort = task_and_cohort
  process = algorithms.build_learning_process(name, task.model_fn, config, clients_per_round=_NUM_CLIENTS)
  if config.quantile_method == 'secure':
    assert privacy.non_secure_intrinsics(process.next) == frozenset()  # what runs on the workers is audited
  expected, _ = _rounds(local, process, cohort)
  actual, _ = _rounds(two_workers, process, cohort)
  _assert_close(process.get_model_weights(actual), process.get_model_weights(expected))
  initial = process.get_model_weights(process.initialize())
  assert not np.allclose(tf.nest.flatten(process.get_model_weights(actual))[0], tf.nest.flatten(initial)[0])


def test_fedplus_global_and_personal_models_on_two_workers_equal_the_local_ones(contexts, task_and_cohort):
  local, two_workers = contexts
  task, _, cohort = task_and_cohort
  process = algorithms.build_learning_process(
      'fedplus_geomed', task.model_fn,
      algorithms.AlgorithmConfig(client_learning_rate=0.05, fedplus_max_iterations=5),  # 6 dependent passes
      clients_per_round=_NUM_CLIENTS)
  client_states = [process.initial_client_state(process.initialize())] * _NUM_CLIENTS
  expected, expected_clients = _rounds(local, process, cohort, client_states)
  actual, actual_clients = _rounds(two_workers, process, cohort, client_states)
  _assert_close(process.get_model_weights(actual), process.get_model_weights(expected))
  assert len(actual_clients) == _NUM_CLIENTS
  _assert_close(actual_clients, expected_clients)


@pytest.mark.slow
def test_every_algorithm_of_the_runner_runs_on_the_composing_context(task_and_cohort):
  task, _, _ = task_and_cohort
  for name in algorithms.ALGORITHM_NAMES:
    process = algorithms.build_learning_process(name, task.model_fn, algorithms.AlgorithmConfig(), clients_per_round=8)
    next_computation = tff.templates.IterativeProcess.next.fget(process)  # the computation under a Python `next`
    composing_context.check_supported(next_computation, execution_context.compile_for_simulation)
