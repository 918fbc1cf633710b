"""The check that the targeted attacks' data tests share: the runner's data path against a NumPy reference's."""

import numpy as np

from tff_robust.simulation import client_pipelines


def _batches(dataset):
  return [(b['x'].numpy(), b['y'].numpy()) for b in dataset]


def assert_served_as_expected(task, data_fn, expected_client_data, client_id) -> np.ndarray:
  """Asserts that the batches the runner serves `client_id` (`data_fn`, e.g. `corruption.make_client_data_fn`'s)
  equal `task`'s training pipeline over `expected_client_data` (the reference's arrays); returns their labels."""
  served = _batches(client_pipelines.as_dataset(data_fn(client_id)))
  expected = _batches(task.preprocess_train(expected_client_data.create_tf_dataset_for_client(client_id)))
  assert len(served) == len(expected)
  for (x, y), (expected_x, expected_y) in zip(served, expected):
    np.testing.assert_array_equal(x, expected_x)
    np.testing.assert_array_equal(y, expected_y)
  return np.concatenate([y for _, y in served])
