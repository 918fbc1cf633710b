"""`mtfeel_sweep` and `fedplus_tables` run several processes in one Python process without
`initial_weights.drawn` (which `robustness_sweep` and `superquantile_tables` need): their tasks' models start at
zero, so a run's initial model cannot depend on the Keras models built before it. These tests keep it so.

The binaries are read, not imported: each defines `--task`, as the runner's flags do, and absl keeps one flag
registry per process (tests/test_flag_definitions.py)."""

import ast
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import repository
from tff_robust import tasks


def _fedplus_table_tasks() -> list[str]:
  """The keys of `experiments/fedplus_tables.py`'s `_TASKS`, read from its source."""
  with open(os.path.join(repository.ROOT, 'experiments', 'fedplus_tables.py')) as f:
    module = ast.parse(f.read())
  [tasks_dict] = [node.value for node in module.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == '_TASKS' for t in node.targets)]
  return [key.value for key in tasks_dict.keys]


def test_the_fedplus_tables_tasks_are_read():
  assert _fedplus_table_tasks() == ['synthetic_regression_fedplus', 'digits_robust', 'digits_personal']


@pytest.mark.parametrize('name', ['digits_cohorts', *_fedplus_table_tasks()])  # mtfeel_sweep's, fedplus_tables'
def test_the_sweeps_tasks_start_from_zero_weights(name):
  model_fn = tasks.create_task(name, client_epochs=1, client_batch_size=10, seed=0).model_fn
  tf.keras.utils.set_random_seed(0)
  tf.keras.layers.Dense(3).build([None, 2])  # advances Keras' unseeded initializer state, as a built process does
  weights = tff.learning.models.ModelWeights.from_model(model_fn())
  leaves = tf.nest.flatten(weights.trainable) + tf.nest.flatten(weights.non_trainable)
  assert leaves, name
  for leaf in leaves:
    np.testing.assert_array_equal(np.asarray(leaf), 0.0, err_msg=name)
