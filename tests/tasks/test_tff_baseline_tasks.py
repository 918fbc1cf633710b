"""TFF's baseline tasks (`emnist_cnn`, `shakespeare_rnn`) on TFF's synthetic data: local training shuffles every
example once an epoch in an order drawn from the task's seed only, so that a resumed process trains as an
uninterrupted one; the EMNIST CNN's initial weights are drawn from the seed too."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust import tasks

_NAMES = ('emnist_cnn', 'shakespeare_rnn')


def _task(name, seed=0, epochs=2):
  return tasks.create_task(name, client_epochs=epochs, client_batch_size=4, seed=seed, use_synthetic_data=True)


def _rows(dataset):
  """Each example of a batched dataset as one flat row (x then y), in order."""
  rows = []
  for batch in dataset.as_numpy_iterator():
    x, y = (np.asarray(part) for part in (batch if isinstance(batch, tuple) else tuple(batch.values())))
    rows.extend(np.concatenate([np.ravel(xi), np.ravel(yi)]) for xi, yi in zip(x, y))
  return rows


def _training_rows(task):
  client_id = task.train_data.client_ids[0]
  return _rows(task.client_dataset(client_id))


@pytest.mark.parametrize('name', _NAMES)
def test_the_local_order_depends_on_the_seed_only_not_on_the_random_ops_made_before(name):
  tf.keras.utils.set_random_seed(0)
  task = _task(name)
  first = _training_rows(task)
  for _ in range(3):  # what a resumed process's other random ops do to TF's sequence of op seeds
    tf.random.uniform([1])
  np.testing.assert_array_equal(_training_rows(task), first)
  tf.keras.utils.set_random_seed(0)
  assert not np.array_equal(_training_rows(_task(name, seed=1)), first)


@pytest.mark.parametrize('name', _NAMES)
def test_each_epoch_is_a_reshuffle_of_the_same_examples(name):
  one_epoch = _training_rows(_task(name, epochs=1))
  rows = _training_rows(_task(name, epochs=2))
  epochs = rows[:len(one_epoch)], rows[len(one_epoch):]
  for epoch in epochs:
    assert sorted(map(tuple, epoch)) == sorted(map(tuple, one_epoch))
  assert not np.array_equal(epochs[0], epochs[1])


def test_emnist_trains_on_each_raw_image_once_an_epoch():
  task = _task('emnist_cnn', epochs=1)
  client_id = task.train_data.client_ids[0]
  raw = [np.concatenate([np.ravel(example['pixels']), [example['label']]])
         for example in task.train_data.create_tf_dataset_for_client(client_id).as_numpy_iterator()]
  assert sorted(map(tuple, _training_rows(task))) == sorted(map(tuple, raw))


def _kernels(seed):
  """The EMNIST CNN's initial kernels (flattened), built after another global seed each time."""
  tf.keras.utils.set_random_seed(100 + seed)
  return [variable.numpy().ravel() for variable in _task('emnist_cnn', seed=seed).model_fn().trainable_variables
          if variable.shape.rank > 1]


def test_the_emnist_cnn_draws_its_initial_weights_from_the_seed_and_adjacent_seeds_share_no_layer():
  first = _kernels(0)
  for kernel, again in zip(first, _kernels(0)):
    np.testing.assert_array_equal(again, kernel)
  for kernel in first:  # TFF seeds layer i with debug_seed + i: debug_seed = seed would give seed 1's layer 1 the
    for other in _kernels(1):  # draws of seed 0's layer 2, up to scale
      n = min(kernel.size, other.size)
      assert abs(np.corrcoef(kernel[:n], other[:n])[0, 1]) < 0.5
