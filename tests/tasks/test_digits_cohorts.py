"""MtFEEL's cohort task on digits: 30 devices in hidden cohorts A/B/C, 20 train / 80 test examples each."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust import tasks
from tff_robust.tasks import digits_cohorts


def _rows(arrays):
  """Each image of {client_id: (x, y)} as a hashable row, per client."""
  return {c: [row.tobytes() for row in x] for c, (x, _) in arrays.items()}


@pytest.fixture(scope='module')
def cohort_arrays():
  return digits_cohorts.load_cohort_arrays()


def test_thirty_devices_in_cohort_order(cohort_arrays):
  train, test = cohort_arrays
  expected = [f'A{k:02d}' for k in range(12)] + [f'B{k:02d}' for k in range(12)] + [f'C{k:02d}' for k in range(6)]
  assert list(train) == list(test) == digits_cohorts.client_ids() == sorted(expected) == expected
  assert list(digits_cohorts.COHORTS) == ['A', 'B', 'C']
  assert [n for _, n in digits_cohorts.COHORTS.values()] == [12, 12, 6]
  assert digits_cohorts.cohort_labels() == ['A'] * 12 + ['B'] * 12 + ['C'] * 6
  assert digits_cohorts.cohort_of('C05') == 'C'
  with pytest.raises(ValueError, match='unknown client id'):
    digits_cohorts.cohort_of('C06')


def test_labels_sizes_and_dtypes_per_device(cohort_arrays):
  train, test = cohort_arrays
  for arrays, size in ((train, 20), (test, 80)):
    for client_id, (x, y) in arrays.items():
      labels = digits_cohorts.COHORTS[digits_cohorts.cohort_of(client_id)][0]
      assert x.shape == (size, 64) and y.shape == (size,)
      assert x.dtype == np.float32 and y.dtype == np.int32
      assert x.min() >= 0.0 and x.max() <= 1.0
      assert set(y.tolist()) <= set(labels)
  for name, (labels, _) in digits_cohorts.COHORTS.items():  # every cohort digit is used in training
    pooled = np.concatenate([y for c, (_, y) in train.items() if c.startswith(name)])
    assert set(pooled.tolist()) == set(labels)


def test_training_sets_disjoint_and_never_tested(cohort_arrays):
  train_rows, test_rows = (_rows(arrays) for arrays in cohort_arrays)
  all_train = [row for rows in train_rows.values() for row in rows]
  assert len(set(all_train)) == len(all_train) == 600
  all_train = set(all_train)
  for rows in test_rows.values():
    assert len(set(rows)) == 80  # distinct within a device
    assert not all_train & set(rows)


def test_deterministic_for_a_split_seed(cohort_arrays):
  train, test = cohort_arrays
  again_train, again_test = digits_cohorts.load_cohort_arrays(split_seed=0)
  other_train, other_test = digits_cohorts.load_cohort_arrays(split_seed=1)
  for arrays, again, other in ((train, again_train, other_train), (test, again_test, other_test)):
    for client_id in arrays:
      for left, right in zip(arrays[client_id], again[client_id]):
        np.testing.assert_array_equal(left, right)
    assert any(not np.array_equal(arrays[c][0], other[c][0]) for c in arrays)


def test_rejects_impossible_counts():
  with pytest.raises(ValueError, match='train_per_device must be an integer >= 1'):
    digits_cohorts.load_cohort_arrays(train_per_device=0)
  with pytest.raises(ValueError, match='test_per_device must be an integer >= 1'):
    digits_cohorts.load_cohort_arrays(test_per_device=True)
  with pytest.raises(ValueError, match='cannot draw 60 training examples'):
    digits_cohorts.load_cohort_arrays(train_per_device=60)  # 30 x 60 > 1797 images


def test_task(cohort_arrays):
  task = tasks.create_task('digits_cohorts', client_epochs=2, client_batch_size=10, seed=0)
  assert task.name == 'digits_cohorts' and 'digits_cohorts' in tasks.TASK_NAMES
  assert task.device_evaluator is None
  assert list(task.train_data.client_ids) == digits_cohorts.client_ids()
  assert task.personal_test_data.client_ids == task.train_data.client_ids
  model = task.model_fn()
  assert sum(int(np.prod(v.shape)) for v in model.trainable_variables) == 650
  batches = list(task.client_dataset('B03').as_numpy_iterator())
  assert [b['x'].shape for b in batches] == [(10, 64)] * 4  # 20 examples, 2 epochs
  assert all(b['y'].dtype == np.int32 for b in batches)
  train, test = cohort_arrays
  personal = list(task.personal_test_data.create_tf_dataset_for_client('C02').as_numpy_iterator())
  np.testing.assert_array_equal(np.stack([e['x'] for e in personal]), test['C02'][0])
  metrics = task.evaluate(tff.learning.models.ModelWeights.from_model(model))
  # Zero-initialised logistic regression: uniform predictions (loss ln 10), argmax the label 0.
  y_test = np.concatenate([y for _, y in test.values()])
  assert metrics['loss'] == pytest.approx(np.log(10), rel=1e-5)
  assert metrics['accuracy'] == pytest.approx(np.mean(y_test == 0), abs=1e-6)
