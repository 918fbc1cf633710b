"""Whole algorithms on two TFF workers (`set_remote_execution_context`) train the same model as on one.

Five digits clients are split 3 + 2 over the workers; each algorithm's initial state goes through two rounds on
the session's local worker and on the two workers, from the same state and cohort (`algorithm_rounds`). Fed+
(geometric median) keeps a state per client: every pass is merged from both workers' partial sums.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.runtime import composing_context
from tff_robust.runtime import simulation_compiler
from tff_robust.simulation import algorithms
from tests.runtime import two_workers
from tests.simulation import algorithm_rounds


@pytest.fixture(scope='module')
def contexts():
  """(the session's local context, the context over two fresh local workers); stops both workers after."""
  with two_workers.two_worker_context() as context:
    yield tff.framework.get_context_stack().current, context


@pytest.fixture(scope='module')
def task_and_cohort():
  return algorithm_rounds.task_and_cohort()


@pytest.mark.parametrize('name', sorted(algorithm_rounds.CONFIGS))
def test_the_global_model_on_two_workers_equals_the_local_one(contexts, task_and_cohort, name):
  local, two_workers = contexts
  task, _, cohort = task_and_cohort
  process = algorithm_rounds.build_process(name, task)
  if algorithm_rounds.CONFIGS[name].quantile_method == 'secure':
    assert privacy.non_secure_intrinsics(process.next) == frozenset()  # what runs on the workers is audited
  expected, _ = algorithm_rounds.run_rounds(local, process, cohort)
  actual, _ = algorithm_rounds.run_rounds(two_workers, process, cohort)
  algorithm_rounds.assert_close(process.get_model_weights(actual), process.get_model_weights(expected))
  initial = process.get_model_weights(process.initialize())
  assert not np.allclose(tf.nest.flatten(process.get_model_weights(actual))[0], tf.nest.flatten(initial)[0])


def test_fedplus_global_and_personal_models_on_two_workers_equal_the_local_ones(contexts, task_and_cohort):
  local, two_workers = contexts
  task, _, cohort = task_and_cohort
  process = algorithm_rounds.build_process(
      'fedplus_geomed', task,
      algorithms.AlgorithmConfig(client_learning_rate=0.05, fedplus_max_iterations=5))  # 6 dependent passes
  client_states = [process.initial_client_state(process.initialize())] * algorithm_rounds.NUM_CLIENTS
  expected, expected_clients = algorithm_rounds.run_rounds(local, process, cohort, client_states)
  actual, actual_clients = algorithm_rounds.run_rounds(two_workers, process, cohort, client_states)
  algorithm_rounds.assert_close(process.get_model_weights(actual), process.get_model_weights(expected))
  assert len(actual_clients) == algorithm_rounds.NUM_CLIENTS
  algorithm_rounds.assert_close(actual_clients, expected_clients)


def _compile_without_grappler(computation):
  return simulation_compiler.compile_for_simulation(computation, optimize_graphs=False)


@pytest.mark.slow
def test_every_algorithm_of_the_runner_runs_on_the_composing_context(task_and_cohort):
  task, _, _ = task_and_cohort
  for name in algorithms.ALGORITHM_NAMES:
    process = algorithms.build_learning_process(name, task.model_fn, algorithms.AlgorithmConfig(), clients_per_round=8)
    next_computation = tff.templates.IterativeProcess.next.fget(process)  # the computation under a Python `next`
    # Without Grappler, as the session compiles: it rewrites the TensorFlow graphs inside, not which intrinsics call
    # them (29 -> 17 s for the 21 algorithms).
    composing_context.check_supported(next_computation, _compile_without_grappler)
