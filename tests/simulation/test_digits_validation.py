"""digits' `validation_fraction`: each client's validation part replaces the held-out data in every evaluation."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.simulation import tasks
from tff_robust.simulation.tasks import digits

_FRACTION = 0.2


def _arrays(client_data, client_id):
  batches = list(client_data.create_tf_dataset_for_client(client_id).batch(10_000))
  return (np.concatenate([b['x'].numpy() for b in batches]), np.concatenate([b['y'].numpy() for b in batches]))


def _sorted_rows(x, y):
  rows = np.concatenate([x, y[:, None].astype(np.float32)], axis=1)
  return rows[np.lexsort(rows.T[::-1])]


def _numpy_mlp_loss(weights, x, y):
  """Mean cross-entropy of digits' MLP, relu(x W1 + b1) W2 + b2, in NumPy."""
  w1, b1, w2, b2 = (np.asarray(w, np.float64) for w in weights)
  logits = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
  logits -= logits.max(axis=1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
  return float(-log_probs[np.arange(len(y)), y].mean())


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
  with pytest.raises(ValueError, match="validation_fraction applies to the tasks digits, not 'digits_robust'"):
    tasks.create_task('digits_robust', client_epochs=1, client_batch_size=8, seed=0, validation_fraction=0.2)
