"""`validation_fraction` (digits and Fed+'s digits tasks): each client's validation part replaces the held-out
data in every evaluation, and no held-out example is read."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust import tasks
from tff_robust.tasks import digits
from tff_robust.tasks import digits_fedplus
from tests.simulation import numpy_classifiers

_FRACTION = 0.2


def _arrays(client_data, client_id):
  batches = list(client_data.create_tf_dataset_for_client(client_id).batch(10_000))
  return (np.concatenate([b['x'].numpy() for b in batches]), np.concatenate([b['y'].numpy() for b in batches]))


def _sorted_rows(x, y):
  rows = np.concatenate([x, y[:, None].astype(np.float32)], axis=1)
  return rows[np.lexsort(rows.T[::-1])]


def _numpy_mlp_loss(weights, x, y):
  return numpy_classifiers.mean_cross_entropy(numpy_classifiers.mlp_logits(weights, x), y)


@pytest.fixture(scope='module')
def split_task():
  return tasks.create_task(
      'digits', client_epochs=1, client_batch_size=8, seed=0, validation_fraction=_FRACTION
  )


def test_each_client_is_split_into_training_and_validation_parts(split_task):
  clients, _ = digits.load_client_arrays()
  for client_id, (x, y) in clients.items():
    x_train, y_train = _arrays(split_task.train_data, client_id)
    x_val, y_val = _arrays(split_task.personal_test_data, client_id)
    assert len(y_val) == round(_FRACTION * len(y))
    np.testing.assert_array_equal(
        _sorted_rows(np.concatenate([x_train, x_val]), np.concatenate([y_train, y_val])), _sorted_rows(x, y)
    )


def test_every_evaluation_reads_the_validation_parts_and_no_held_out_example(split_task):
  _, (x_test, y_test) = digits.load_client_arrays()
  validation = [_arrays(split_task.personal_test_data, cid) for cid in split_task.train_data.client_ids]
  x_val, y_val = np.concatenate([x for x, _ in validation]), np.concatenate([y for _, y in validation])
  rng = np.random.default_rng(0)
  model = digits.model_fn()
  trainable = [rng.normal(scale=0.5, size=v.shape).astype(np.float32) for v in model.trainable_variables]
  weights = tff.learning.models.ModelWeights(trainable=trainable, non_trainable=[])
  pooled = split_task.evaluate(weights)
  assert pooled['loss'] == pytest.approx(_numpy_mlp_loss(trainable, x_val, y_val), rel=1e-4)
  assert abs(_numpy_mlp_loss(trainable, x_test, y_test) - pooled['loss']) > 1e-2
  devices = split_task.device_evaluator(weights)['eval']
  assert list(devices.device_ids) == list(split_task.train_data.client_ids)
  expected = [_numpy_mlp_loss(trainable, x, y) for x, y in validation]
  np.testing.assert_allclose(devices.loss, expected, rtol=1e-4)


def test_without_a_fraction_clients_train_on_all_their_examples():
  task = tasks.create_task('digits', client_epochs=1, client_batch_size=8, seed=0)
  clients, _ = digits.load_client_arrays()
  for client_id, (x, y) in clients.items():
    np.testing.assert_array_equal(_sorted_rows(*_arrays(task.train_data, client_id)), _sorted_rows(x, y))


@pytest.mark.parametrize('fraction', [0.0, 1.0, -0.1, float('nan'), True, '0.2'])
def test_a_fraction_outside_0_1_is_refused_by_name(fraction):
  with pytest.raises(ValueError, match=r'validation_fraction must be a number in \(0, 1\)'):
    digits.split_validation({'c': (np.zeros((5, 2)), np.zeros(5))}, fraction)


def test_validation_fraction_is_refused_for_another_task():
  with pytest.raises(ValueError, match="validation_fraction applies to the tasks digits, digits_robust, "
                                       "digits_personal, shakespeare_lstm_rfa, shakespeare_gru_dfl, not 'digits_cohorts'"):
    tasks.create_task('digits_cohorts', client_epochs=1, client_batch_size=8, seed=0, validation_fraction=0.2)


def _fedplus_halves(name, split_seed):
  """The party halves of Fed+'s digits task `name` as its builder makes them (transform included)."""
  train, test = digits_fedplus.load_party_arrays(split_seed=split_seed)
  if name == 'digits_robust':
    return digits_fedplus.negate_parties(train, test, seed=split_seed)[:2]
  return digits_fedplus.add_class_noise(train, test, seed=split_seed)[:2]


def _numpy_logistic_loss(weights, x, y):
  return numpy_classifiers.mean_cross_entropy(numpy_classifiers.logistic_logits(weights, x), y)


@pytest.mark.parametrize('name', ['digits_robust', 'digits_personal'])
def test_fedplus_digits_tasks_score_on_a_validation_part_of_each_training_half(name):
  task = tasks.create_task(name, client_epochs=1, client_batch_size=8, seed=0, split_seed=2,
                           validation_fraction=0.25)
  train_halves, test_halves = _fedplus_halves(name, split_seed=2)
  validation = {}
  for client_id, (x, y) in train_halves.items():
    x_train, y_train = _arrays(task.train_data, client_id)
    validation[client_id] = _arrays(task.personal_test_data, client_id)
    assert len(validation[client_id][1]) == round(0.25 * len(y))
    np.testing.assert_array_equal(  # training + validation parts = the party's training half, exactly
        _sorted_rows(np.concatenate([x_train, validation[client_id][0]]),
                     np.concatenate([y_train, validation[client_id][1]])),
        _sorted_rows(x, y),
    )
  rng = np.random.default_rng(1)
  trainable = [rng.normal(size=v.shape).astype(np.float32) for v in digits_fedplus.model_fn().trainable_variables]
  pooled = task.evaluate(tff.learning.models.ModelWeights(trainable=trainable, non_trainable=[]))
  x_val = np.concatenate([x for x, _ in validation.values()])
  y_val = np.concatenate([y for _, y in validation.values()])
  assert pooled['loss'] == pytest.approx(_numpy_logistic_loss(trainable, x_val, y_val), rel=1e-4)
  x_test = np.concatenate([x for x, _ in test_halves.values()])
  y_test = np.concatenate([y for _, y in test_halves.values()])
  assert abs(_numpy_logistic_loss(trainable, x_test, y_test) - pooled['loss']) > 1e-2
