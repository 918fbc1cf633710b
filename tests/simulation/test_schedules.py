"""Step decay of the client learning rate, and its effect on a `tff.learning` process."""

import numpy as np
import pytest

from tff_robust.simulation import algorithms
from tff_robust.simulation import schedules
from tff_robust import tasks


def test_step_decay_follows_gamma0_c_to_the_floor_of_t_over_t0():
  schedule = schedules.step_decay(0.2, 0.5, 3)
  expected = [0.2 * 0.5 ** (t // 3) for t in range(10)]  # round t + 1
  np.testing.assert_allclose([schedule(r) for r in range(1, 11)], expected)


@pytest.mark.parametrize('initial, decay, period, message', [
    (-0.1, 0.5, 1, 'initial'), (0.1, 0.0, 1, 'decay'), (0.1, 1.5, 1, 'decay'), (0.1, 0.5, 0, 'period'),
])
def test_bad_schedules_are_refused(initial, decay, period, message):
  with pytest.raises(ValueError, match=message):
    schedules.step_decay(initial, decay, period)


@pytest.mark.parametrize('name', ['fedavg', 'delta_fl'])
def test_the_scheduled_learning_rate_is_the_one_clients_train_with(name):
  task = tasks.create_task('synthetic_regression', client_epochs=1, client_batch_size=8, seed=0)
  process = algorithms.build_learning_process(name, task.model_fn, algorithms.AlgorithmConfig(conformity_level=1.0))
  cohort = [task.client_dataset(cid) for cid in task.train_data.client_ids[:3]]
  state = process.initialize()
  frozen = schedules.set_client_learning_rate(process, state, 0.0)
  assert process.get_hparams(frozen)['client_work']['learning_rate'] == 0.0
  unchanged = process.get_model_weights(process.next(frozen, cohort).state).trainable
  for before, after in zip(process.get_model_weights(state).trainable, unchanged):
    np.testing.assert_array_equal(after, before)  # a zero learning rate: no client moves, nor the model
  moved = process.get_model_weights(
      process.next(schedules.set_client_learning_rate(process, state, 0.1), cohort).state
  ).trainable
  assert any(not np.allclose(a, b) for a, b in zip(moved, process.get_model_weights(state).trainable))


def test_a_process_without_a_client_learning_rate_is_refused():
  task = tasks.create_task('synthetic_regression', client_epochs=1, client_batch_size=8, seed=0)
  process = algorithms.build_learning_process('fedplus_avg', task.model_fn, algorithms.AlgorithmConfig())
  with pytest.raises(TypeError, match='no client learning rate'):
    schedules.set_client_learning_rate(process, process.initialize(), 0.1)
