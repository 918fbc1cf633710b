"""`tasks.base.Batching`, the local-training pipeline of the package's tasks: every epoch a uniform permutation of
a client's examples, however many it has, in the order `simulation.shuffle_order` computes for the runner's cap."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import shuffle_order
from tff_robust.tasks import base


def _epochs(dataset, epochs):
  return np.concatenate([batch.numpy() for batch in dataset]).reshape(epochs, -1)


def test_an_epoch_of_a_client_larger_than_the_default_buffer_is_a_uniform_permutation():
  """3,000 examples in order (as a Shakespeare role's windows come): a 1,024 buffer would yield only the first
  ~1,300 in the first 300 draws; the whole-client buffer draws from everywhere."""
  batching = base.batching(epochs=2, batch_size=10, seed=4)
  tf.random.set_seed(0)
  order = _epochs(batching(tf.data.Dataset.range(3000)), 2)
  for epoch in order:
    np.testing.assert_array_equal(np.sort(epoch), np.arange(3000))
    assert epoch[:300].max() > 2700 and epoch[:300].min() < 300
  assert not np.array_equal(order[0], order[1])  # reshuffled each epoch
  tf.random.set_seed(0)
  seeds = shuffle_order.iterator_seeds(shuffle_order.dataset_seeds(4), True, 0)
  expected = shuffle_order.shuffled_positions(3000, base.Batching.buffer_size(3000), seeds)
  np.testing.assert_array_equal(order[0], expected)


def test_a_dataset_of_unknown_size_is_shuffled_through_the_default_buffer():
  batching = base.batching(epochs=1, batch_size=10, seed=4)
  dataset = tf.data.Dataset.range(3000).filter(lambda x: x >= 0)  # cardinality unknown
  order = _epochs(batching(dataset), 1)[0]
  np.testing.assert_array_equal(np.sort(order), np.arange(3000))
  assert order[:300].max() < base.Batching.SHUFFLE_BUFFER + 300


@pytest.mark.parametrize('name, value', [('epochs', 0), ('epochs', -1), ('batch_size', 0), ('epochs', 1.5),
                                         ('batch_size', True)])
def test_a_count_below_one_is_refused_naming_it(name, value):
  arguments = {'epochs': 1, 'batch_size': 4, 'seed': 0, name: value}
  with pytest.raises(ValueError, match=f'{name} must be an integer >= 1, got {value!r}'):
    base.batching(**arguments)
