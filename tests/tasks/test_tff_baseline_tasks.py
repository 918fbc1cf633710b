"""TFF's baseline tasks (`emnist_cnn`, `shakespeare_rnn`) on TFF's synthetic data: local training shuffles every
example once an epoch in an order drawn from the task's seed only, so that a resumed process trains as an
uninterrupted one; the EMNIST CNN's initial weights and Dropout masks are drawn from the seed too."""

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


def _training_mode_output(model_fn, x):
  """The model's output with Dropout on, traced and run in a graph of its own, as TFF runs it: no TF seed."""
  with tf.Graph().as_default() as graph:
    model = model_fn()
    output = model.predict_on_batch(x, training=True)
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return session.run(output)


def test_the_emnist_cnn_draws_its_weights_and_dropout_masks_from_the_seed():
  x = np.random.default_rng(0).uniform(size=(8, 28, 28, 1)).astype(np.float32)
  model_fn = _task('emnist_cnn').model_fn
  first = _training_mode_output(model_fn, x)
  np.testing.assert_array_equal(_training_mode_output(model_fn, x), first)
  np.testing.assert_array_equal(_training_mode_output(_task('emnist_cnn').model_fn, x), first)
  assert not np.allclose(_training_mode_output(_task('emnist_cnn', seed=1).model_fn, x), first)
