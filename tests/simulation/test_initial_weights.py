"""`initial_weights.drawn`: a seed's initial model, whatever Keras models were built before it."""

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import initial_weights
from tff_robust.tasks import digits


def _flat(weights):
  return np.concatenate([np.ravel(w) for w in tf.nest.flatten(weights)])


def test_the_drawn_model_does_not_depend_on_the_models_built_before_it():
  first = initial_weights.drawn(digits.model_fn, 0)
  tf.keras.utils.set_random_seed(0)
  for _ in range(3):  # what building other processes does
    digits.model_fn()
  after_others = initial_weights.drawn(digits.model_fn, 0)
  np.testing.assert_array_equal(_flat(after_others), _flat(first))
  # ... while a model built without it does depend on them (the reason it exists).
  tf.keras.utils.set_random_seed(0)
  digits.model_fn()
  second_model = tf.nest.map_structure(lambda v: v.numpy(), tf.nest.flatten(digits.model_fn().trainable_variables))
  assert not np.array_equal(_flat(second_model), _flat(first.trainable))


def test_other_seeds_draw_other_models_as_numpy_arrays():
  zero, one = initial_weights.drawn(digits.model_fn, 0), initial_weights.drawn(digits.model_fn, 1)
  assert all(isinstance(w, np.ndarray) for w in tf.nest.flatten(zero))
  assert [w.shape for w in zero.trainable] == [(64, 32), (32,), (32, 10), (10,)]
  assert not np.array_equal(_flat(zero), _flat(one))


@pytest.mark.parametrize('seed', [-1, 0.5, float('nan'), float('inf'), True, '0'])
def test_a_bad_seed_is_refused_naming_it(seed):
  with pytest.raises(ValueError, match='seed'):
    initial_weights.drawn(digits.model_fn, seed)
