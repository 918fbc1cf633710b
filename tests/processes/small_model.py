"""A small Keras linear classifier as a `tff.learning` model, shared by the process tests."""

import collections

import tensorflow as tf
import tensorflow_federated as tff

NUM_FEATURES = 3


def model_fn():
  """Two-class logistic regression on `NUM_FEATURES` float features (elements {'x': float32, 'y': int32})."""
  inputs = tf.keras.Input(shape=(NUM_FEATURES,))
  outputs = tf.keras.layers.Dense(2, kernel_initializer='glorot_uniform')(inputs)
  return tff.learning.models.from_keras_model(
      tf.keras.Model(inputs, outputs),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, NUM_FEATURES], tf.float32), y=tf.TensorSpec([None], tf.int32)
      ),
  )
