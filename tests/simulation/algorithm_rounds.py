"""Two rounds of a runner algorithm on five digits clients from its initial state, in a given TFF context: what the
tests of algorithms on several workers compare with the same rounds on the session's local worker.

RFA and secure Delta-FL are rounds of several dependent aggregation passes (Weiszfeld passes; quantile passes then
the filtered mean), so a worker set-up that runs them like the local worker merges every pass correctly.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.simulation import algorithms
from tff_robust import tasks

NUM_CLIENTS = 5
ROUNDS = 2
CONFIGS = {
    'fedavg': algorithms.AlgorithmConfig(client_learning_rate=0.05),
    'rfa': algorithms.AlgorithmConfig(client_learning_rate=0.05),
    'delta_fl': algorithms.AlgorithmConfig(client_learning_rate=0.05, quantile_method='secure'),
}


def task_and_cohort():
  """(the digits task, the cohort's client ids, their datasets).

  TF's global seed is set first: a task's shuffle order is TensorFlow's function of (global seed, task seed), and
  earlier tests in the same Python process set other global seeds. So every process that calls this (the test's,
  a remote driver's) trains on the same order; without it the tests that compare a driver process's rounds with
  their own failed in CI whenever such a test had run first in their pytest worker (stop 48).
  """
  tf.random.set_seed(0)
  task = tasks.create_task('digits', client_epochs=1, client_batch_size=10, seed=0)
  ids = task.train_data.client_ids[:NUM_CLIENTS]
  return task, ids, [task.client_dataset(client_id) for client_id in ids]


def build_process(name, task, config=None):
  return algorithms.build_learning_process(name, task.model_fn, config or CONFIGS[name], clients_per_round=NUM_CLIENTS)


def run_rounds(context, process, cohort, client_states=None, initial_weights=None):
  """The state (and the clients' states) after `ROUNDS` rounds from `process.initialize()` in `context`, its model
  replaced by `initial_weights` (a flat list of arrays, `flat_model_weights`) if given: a process built in another
  Python process may draw another initial model."""
  with tff.framework.get_context_stack().install(context):
    state = process.initialize()
    if initial_weights is not None:
      state = process.set_model_weights(
          state, tf.nest.pack_sequence_as(process.get_model_weights(state), list(initial_weights)))
    for _ in range(ROUNDS):
      if client_states is None:
        state = process.next(state, cohort).state
      else:
        output = process.next(state, cohort, client_states)
        state, client_states = output.state, output.client_states
  return state, client_states


def assert_close(actual, expected, name=''):
  """Every array of two structures equal to float rounding (1e-5 relative); a failure names `name` and the array."""
  pairs = zip(tf.nest.flatten(actual), tf.nest.flatten(expected), strict=True)
  for index, (actual_array, expected_array) in enumerate(pairs):
    np.testing.assert_allclose(actual_array, expected_array, rtol=1e-5, atol=1e-6, err_msg=f'{name} array {index}')


def flat_model_weights(process, state) -> list:
  return [np.asarray(array) for array in tf.nest.flatten(process.get_model_weights(state))]
