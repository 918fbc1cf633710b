"""The order in which `tf.data.Dataset.shuffle` yields its input, computed in NumPy without running a dataset.

tf.data's shuffle (TF 2.14, `ShuffleDatasetOp`) keeps a buffer of up to `buffer_size` elements, filled in input
order; each output draws r, the next uint32 of a Philox4x32-10 stream (TensorFlow's `PhiloxRandom` behind a
`SingleSampleAdapter`), yields the element at offset r mod (buffered count) from the oldest buffered one, moves
the oldest into its place and refills from the input. The stream of an iterator is seeded with (seed, seed2):
key = (low, high 32 bits of seed), counter = (0, 0, low, high 32 bits of seed2). With
`reshuffle_each_iteration=False` an iterator takes the dataset's seeds as they are; with True the i-th iterator
(epoch i of a `repeat`) takes the (2i-1)-th and 2i-th uint32 of a stream seeded with the dataset's seeds. The
dataset's seeds are `tensorflow.python.data.util.random_seed.get_seed(seed)` at construction (the global seed
and the op seed).

Which element comes out depends only on the input's length and the seeds, never on the elements, so the order is
a permutation of positions: `shuffled_positions`. The runner uses it to build a client's capped sample from its
in-memory examples (`client_pipelines.capped_in_memory`) in the order the dataset pipeline
(`client_pipelines.capped_examples`) would yield them,
without pushing every example of the client through tf.data (a few microseconds per element and operation).
`tests/simulation/test_shuffle_order.py` checks it against tf.data itself.
"""

import numpy as np
from tensorflow.python.data.util import random_seed  # pylint: disable=g-direct-tensorflow-import

_MASK = np.uint64(0xFFFFFFFF)
_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_KEY_INCREMENTS = (np.uint64(0x9E3779B9), np.uint64(0xBB67AE85))


def philox_uint32(seed: int, seed2: int, count: int) -> np.ndarray:
  """The first `count` uint32 of TensorFlow's Philox4x32-10 stream seeded with (seed, seed2), in the order a
  `SingleSampleAdapter` hands them out (the four words of block 0, then of block 1, ...)."""
  num_blocks = -(-count // 4)
  seed, seed2 = np.uint64(seed % 2**64), np.uint64(seed2 % 2**64)
  key = [seed & _MASK, seed >> np.uint64(32)]
  counter = [np.arange(num_blocks, dtype=np.uint64), np.zeros(num_blocks, np.uint64),
             np.full(num_blocks, seed2 & _MASK), np.full(num_blocks, seed2 >> np.uint64(32))]
  for round_index in range(10):
    product0 = _MULTIPLIERS[0] * counter[0]
    product1 = _MULTIPLIERS[1] * counter[2]
    counter = [(product1 >> np.uint64(32)) ^ counter[1] ^ key[0], product1 & _MASK,
               (product0 >> np.uint64(32)) ^ counter[3] ^ key[1], product0 & _MASK]
    if round_index < 9:
      key = [(key[0] + _KEY_INCREMENTS[0]) & _MASK, (key[1] + _KEY_INCREMENTS[1]) & _MASK]
  return np.stack(counter, axis=1).reshape(-1)[:count]


def dataset_seeds(seed: int) -> tuple[int, int]:
  """The (seed, seed2) a `shuffle(..., seed=seed)` built now gets (the global seed and the op seed)."""
  seed_tensor, seed2_tensor = random_seed.get_seed(seed)
  return int(seed_tensor), int(seed2_tensor)


def iterator_seeds(seeds: tuple[int, int], reshuffle_each_iteration: bool, iteration: int = 0) -> tuple[int, int]:
  """The seeds of the `iteration`-th iterator (0-based) of a shuffle dataset with `seeds`."""
  if not reshuffle_each_iteration:
    return seeds
  draws = philox_uint32(*seeds, 2 * iteration + 2)
  return int(draws[2 * iteration]), int(draws[2 * iteration + 1])


def shuffled_positions(length: int, buffer_size: int, seeds: tuple[int, int], count: int = -1) -> np.ndarray:
  """The input positions (0..length-1) in the order one iterator seeded with `seeds` yields them, the first
  `count` of them (all if -1)."""
  count = length if count < 0 else min(count, length)
  draws = philox_uint32(*seeds, count).tolist()
  buffered = list(range(min(buffer_size, length)))  # buffered[i]: input position held at logical slot i
  next_input = len(buffered)
  oldest = 0
  order = []
  for draw in draws:
    slot = oldest + draw % (len(buffered) - oldest)
    order.append(buffered[slot])
    buffered[slot] = buffered[oldest]
    oldest += 1
    if next_input < length:
      buffered.append(next_input)
      next_input += 1
  return np.asarray(order, np.int64)
