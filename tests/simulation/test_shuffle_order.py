"""`shuffle_order` against tf.data itself: the positions `Dataset.shuffle` yields, epoch by epoch, for buffers
smaller than, equal to and larger than the input, with and without reshuffling, under a global seed or none."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import shuffle_order


def _tf_data_order(length, buffer_size, seed, reshuffle, epochs):
  dataset = tf.data.Dataset.range(length).shuffle(buffer_size, seed=seed, reshuffle_each_iteration=reshuffle)
  return np.array(list(dataset.repeat(epochs).as_numpy_iterator()), np.int64).reshape(epochs, length)


@pytest.mark.parametrize('global_seed', [None, 3])
@pytest.mark.parametrize('length, buffer_size', [(1, 1), (10, 4), (257, 16), (1000, 1024), (3500, 1024), (64, 64)])
@pytest.mark.parametrize('reshuffle', [False, True])
def test_positions_equal_tf_data_shuffle_in_every_epoch(global_seed, length, buffer_size, reshuffle):
  tf.random.set_seed(global_seed)
  for seed in (0, 7, 2**31 - 2):
    expected = _tf_data_order(length, buffer_size, seed, reshuffle, epochs=3)
    seeds = shuffle_order.dataset_seeds(seed)
    for epoch in range(3):
      got = shuffle_order.shuffled_positions(
          length, buffer_size, shuffle_order.iterator_seeds(seeds, reshuffle, epoch))
      np.testing.assert_array_equal(got, expected[epoch])


def test_a_prefix_is_the_first_outputs():
  seeds = shuffle_order.iterator_seeds(shuffle_order.dataset_seeds(5), False)
  full = shuffle_order.shuffled_positions(500, 500, seeds)
  np.testing.assert_array_equal(shuffle_order.shuffled_positions(500, 500, seeds, count=64), full[:64])
  assert sorted(full.tolist()) == list(range(500))


def test_philox_first_block_is_the_random123_known_answer():
  # Philox4x32-10 with an all-zero key and counter (Salmon et al. 2011, Random123's known-answer vectors).
  np.testing.assert_array_equal(shuffle_order.philox_uint32(0, 0, 4),
                                np.array([0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8], np.uint64))
