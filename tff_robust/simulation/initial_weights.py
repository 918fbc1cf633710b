"""A task's initial model drawn from a seed alone, whatever ran before it in the Python process.

Keras layers without an initializer seed take one from a state that every Keras model built in the process
advances and that only `tf.keras.utils.set_random_seed` resets (TF 2.14, Keras 2.14: two models built one after
the other after one `set_random_seed` get different weights). TFF's tracing builds the model a few times when a
process is built, so a process's own initial model (`process.initialize()`) depends on every process built before
it in the same Python process. A driver that runs several processes in one Python process (a sweep) therefore
gives each run `drawn(model_fn, seed)` as `training_loop.run_training`'s `initial_model_weights`: then a run's
result does not depend on which runs came before it, nor on where an interrupted sweep resumed.
"""

from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks


def drawn(model_fn: Callable[[], tff.learning.models.VariableModel], seed: int) -> tff.learning.models.ModelWeights:
  """The initial weights of `model_fn()` right after `tf.keras.utils.set_random_seed(seed)`, as NumPy arrays.

  The model is built eagerly and discarded. Resets Python's, NumPy's and TensorFlow's global seeds to `seed`
  (`set_random_seed`), as a driver does once at its start.

  Raises:
    ValueError: if `seed` is not an integer >= 0.
  """
  tf.keras.utils.set_random_seed(type_checks.check_integer('seed', seed, minimum=0))
  weights = tff.learning.models.ModelWeights.from_model(model_fn())
  return tf.nest.map_structure(lambda v: v.numpy(), weights)
