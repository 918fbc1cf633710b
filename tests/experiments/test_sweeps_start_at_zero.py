"""`mtfeel_sweep` and `fedplus_tables` run several processes in one Python process without
`initial_weights.drawn` (which `robustness_sweep` and `superquantile_tables` need): their tasks' models start at
zero, so a run's initial model cannot depend on the Keras models built before it. These tests keep it so."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from experiments import fedplus_tables
from tff_robust.simulation.tasks import digits_cohorts


def _weights_after_other_models(model_fn):
  tf.keras.utils.set_random_seed(0)
  tf.keras.layers.Dense(3).build([None, 2])  # advances Keras' unseeded initializer state, as a built process does
  return tff.learning.models.ModelWeights.from_model(model_fn())


def _model_fn(name):
  """The model_fn of the task the sweep runs under `name`."""
  if name == 'digits_cohorts':
    return digits_cohorts.create_task(client_epochs=1, client_batch_size=20, seed=0).model_fn
  create_task, settings, _ = fedplus_tables._TASKS[name]  # pylint: disable=protected-access
  return create_task(client_epochs=1, client_batch_size=settings['batch'], seed=0).model_fn


@pytest.mark.parametrize('name', ['digits_cohorts', *fedplus_tables._TASKS])  # pylint: disable=protected-access
def test_the_sweeps_tasks_start_from_zero_weights(name):
  weights = _weights_after_other_models(_model_fn(name))
  leaves = tf.nest.flatten(weights.trainable) + tf.nest.flatten(weights.non_trainable)
  assert leaves, name
  for leaf in leaves:
    np.testing.assert_array_equal(np.asarray(leaf), 0.0, err_msg=name)
