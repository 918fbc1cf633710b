"""The task options a runner sets (`tasks.TASK_OPTIONS`) reach the builders that take them, and only those."""

import numpy as np
import pytest

from tff_robust.tasks import task_names
from tff_robust import tasks
from tff_robust.tasks import fedprox_synthetic
from tff_robust.tasks import sent140
from tff_robust.tasks import sent140_models

_TRAINING = dict(client_epochs=1, client_batch_size=4, seed=0)


def _client_arrays(task, client_id):
  return [batch['x'] for batch in task.train_data.create_tf_dataset_for_client(client_id).batch(10_000)]


def test_every_option_is_taken_by_some_task_and_the_table_names_only_known_tasks():
  for option in tasks.TASK_OPTIONS:
    assert set(tasks.tasks_accepting(option)) <= set(tasks.TASK_NAMES) and tasks.tasks_accepting(option)
  assert tasks.tasks_accepting('l2_regularization') == (
      'sent140_linear', 'sent140_linear_by_device', 'emnist_linear_rfa', 'emnist_linear_dfl')
  with pytest.raises(ValueError, match='option must be one of'):
    tasks.tasks_accepting('num_parties')


def test_the_tensorflow_free_task_names_are_the_tasks_the_modules_build():
  assert tuple(sent140.TASK_SETTINGS) == task_names.SENT140_TASK_NAMES
  assert tuple(fedprox_synthetic.TASK_PARAMETERS) == task_names.FEDPROX_SYNTHETIC_TASK_NAMES
  assert tasks.TASK_NAMES == task_names.TASK_NAMES and len(set(tasks.TASK_NAMES)) == len(tasks.TASK_NAMES)
  assert set(tasks.tasks_accepting('l2_regularization')) & set(sent140.TASK_SETTINGS) == {
      name for name, (kind, _) in sent140.TASK_SETTINGS.items() if kind == 'linear'}


@pytest.mark.parametrize('name, option, value', [
    ('digits', 'split_seed', 1),
    ('synthetic_regression', 'num_devices', 5),
    ('emnist_cnn_dfl', 'l2_regularization', 0.01),  # the CNN has no l2 term (Delta-FL: linear models only)
    ('sent140_linear_by_device', 'max_evaluated_devices', 10),
    ('emnist_linear_rfa', 'split_seed', 1),  # RFA's EMNIST split is TFF's own, not drawn
])
def test_an_option_the_task_does_not_take_is_refused_naming_the_tasks_that_do(name, option, value):
  accepting = ', '.join(tasks.tasks_accepting(option))
  with pytest.raises(ValueError, match=f'{option} applies to the tasks {accepting}, not {name!r}'):
    tasks.create_task(name, **_TRAINING, **{option: value})


def test_unset_options_leave_the_builders_defaults():
  assert tasks.builder_arguments('digits', split_seed=None, num_devices=None) == {}
  default = tasks.create_task('fedprox_synthetic', **_TRAINING)
  explicit = tasks.create_task('fedprox_synthetic', **_TRAINING, split_seed=0, num_devices=None)
  np.testing.assert_array_equal(_client_arrays(default, 'client_003'), _client_arrays(explicit, 'client_003'))


def test_split_seed_redraws_the_data():
  first = tasks.create_task('fedprox_synthetic', **_TRAINING)
  second = tasks.create_task('fedprox_synthetic', **_TRAINING, split_seed=1)
  assert first.train_data.client_ids == second.train_data.client_ids  # same N devices, other data
  assert not np.array_equal(_client_arrays(first, 'client_003')[0][:5], _client_arrays(second, 'client_003')[0][:5])
  by_device = [tasks.create_task('emnist_linear_dfl', **_TRAINING, use_synthetic_data=True, split_seed=s)
               for s in (0, 1, 2)]
  assert len({tuple(t.train_data.client_ids) for t in by_device}) > 1  # Delta-FL's split by writer moves


@pytest.mark.parametrize('name, num_devices', [
    ('digits_robust', 20), ('digits_personal', 50), ('synthetic_regression_fedplus', 4), ('fedprox_synthetic', 7),
])
def test_num_devices_sets_the_number_of_parties(name, num_devices):
  task = tasks.create_task(name, **_TRAINING, num_devices=num_devices)
  assert len(task.train_data.client_ids) == len(task.personal_test_data.client_ids) == num_devices


def test_max_evaluated_devices_caps_each_evaluated_group():
  every = tasks.create_task('emnist_linear_dfl', **_TRAINING, use_synthetic_data=True)
  capped = tasks.create_task('emnist_linear_dfl', **_TRAINING, use_synthetic_data=True, max_evaluated_devices=2)
  sizes = lambda task: {name: len(group.client_data.client_ids) for name, group in task.device_evaluator._groups.items()}
  assert sizes(every) == {'train': 3, 'eval': 3} and sizes(capped) == {'train': 2, 'eval': 2}
  with pytest.raises(ValueError, match='max_evaluated_devices must be an integer >= 1 or None, got 0'):
    tasks.create_task('emnist_linear_dfl', **_TRAINING, use_synthetic_data=True, max_evaluated_devices=0)


def test_l2_regularization_adds_half_lambda_times_the_squared_norm_to_the_loss():
  l2 = 0.1
  (batch, *_) = tasks.create_task('emnist_linear_dfl', **_TRAINING, use_synthetic_data=True).client_dataset(
      'f0004_00').as_numpy_iterator()
  kernel = np.random.default_rng(0).normal(size=(784, 62)).astype(np.float32) * 0.01
  losses = []
  for value in (None, l2):
    model = tasks.create_task(
        'emnist_linear_dfl', **_TRAINING, use_synthetic_data=True, l2_regularization=value
    ).model_fn()
    model.trainable_variables[0].assign(kernel)
    losses.append(float(model.forward_pass(batch, training=False).loss))
  assert losses[1] - losses[0] == pytest.approx(l2 / 2 * float(np.sum(kernel.astype(np.float64) ** 2)), rel=1e-4)


def test_sent140s_linear_model_takes_l2_regularization_on_w_and_the_lstm_refuses_it():
  l2, tokens = 0.3, np.array([[1, 2, 3], [2, 0, 0]], np.int32)
  losses, kernels = [], []
  for value in (0.0, l2):
    model = sent140_models.make_model_fn('linear', num_tokens=4, sequence_length=3, l2_regularization=value)()
    for variable, array in zip(model.trainable_variables, (np.full((4, 50), 0.1), np.full((50, 1), 0.2))):
      variable.assign(array.astype(np.float32))
    losses.append(float(model.forward_pass(dict(x=tokens, y=np.array([1, 0], np.int32)), training=False).loss))
  assert losses[1] - losses[0] == pytest.approx(l2 / 2 * 50 * 0.2**2, rel=1e-5)  # the embedding is not penalised
  with pytest.raises(ValueError, match='l2_regularization must be >= 0, and 0 unless kind is linear'):
    sent140_models.make_model_fn('lstm', num_tokens=4, sequence_length=3, l2_regularization=l2)
