"""The papers' EMNIST and Shakespeare models, with the exact layer sizes of the implementation notes.

RFA (notes `rfa.md` §3.4) and Superquantile FL / Delta-FL (notes `superquantile_fl.md` §3.4):

* EMNIST linear (both papers): multinomial logistic regression, w_1..w_62 in R^{28x28}, no bias:
  62 * 784 = 48,608 parameters. Delta-FL adds (lambda/2)||w||^2 (`l2_regularization` = lambda).
* EMNIST ConvNet of RFA: Conv(32, 5x5, 'same') -> ReLU -> MaxPool(2x2, stride 2) -> Conv(64, 5x5, 'same')
  -> ReLU -> MaxPool -> FC(2048) -> ReLU -> FC(62): 6,603,710 parameters (the notes' "about 6.6M"; the
  flatten is 7*7*64 = 3136).
* EMNIST ConvNet of Delta-FL: the same convolutions without the FC-2048 layer: FC(62) reads the flatten.
  The paper does not state the padding (notes §3.4 give both); the authors' code (PyTorch `Conv2d` without
  padding) uses 'valid', so the flatten is 4*4*64 = 1024 and the model has 115,646 parameters.
* Shakespeare LSTM of RFA: an 8-dimensional embedding of the 53 symbols (a learned linear map of the
  one-hot input), 1 LSTM layer of 128 units, FC(53) on the last time step: 77,405 parameters.
* Shakespeare GRU of Delta-FL: the one-hot encoding of the 53 symbols (x in {0,1}^{20x53}, notes §3.3),
  1 GRU layer of 128 units, FC(53) on the last time step: 77,109 parameters. The GRU is Keras's
  `reset_after=True`, which has PyTorch's two bias vectors per gate. (The authors' code embeds the symbols in
  8 dimensions instead; the notes, and the paper, give the one-hot input.)

Every model outputs logits; kernels start from Keras's `glorot_uniform` (RFA notes §3.4, "Initialisation").
"""

import collections
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

EMNIST_CLASSES = 62
IMAGE_SIZE = 28
SHAKESPEARE_SYMBOLS = 53
SEQUENCE_LENGTH = 20
LSTM_EMBEDDING_DIM = 8
RECURRENT_UNITS = 128


def emnist_linear(l2_regularization: float = 0.0) -> tf.keras.Model:
  """Multinomial logistic regression on the 784 pixels, without bias; adds (lambda/2)||w||^2 if lambda > 0."""
  if l2_regularization < 0:
    raise ValueError(f'l2_regularization must be >= 0, got {l2_regularization}')
  regularizer = tf.keras.regularizers.L2(l2_regularization / 2) if l2_regularization else None
  inputs = tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE))
  flat = tf.keras.layers.Flatten()(inputs)
  logits = tf.keras.layers.Dense(EMNIST_CLASSES, use_bias=False, kernel_regularizer=regularizer)(flat)
  return tf.keras.Model(inputs, logits)


def _conv_features(inputs, padding: str):
  """Conv(32, 5x5) -> ReLU -> MaxPool(2, 2) -> Conv(64, 5x5) -> ReLU -> MaxPool(2, 2) -> flatten."""
  images = tf.keras.layers.Reshape((IMAGE_SIZE, IMAGE_SIZE, 1))(inputs)
  hidden = tf.keras.layers.Conv2D(32, 5, padding=padding, activation='relu')(images)
  hidden = tf.keras.layers.MaxPool2D(pool_size=2, strides=2)(hidden)
  hidden = tf.keras.layers.Conv2D(64, 5, padding=padding, activation='relu')(hidden)
  hidden = tf.keras.layers.MaxPool2D(pool_size=2, strides=2)(hidden)
  return tf.keras.layers.Flatten()(hidden)


def emnist_cnn_rfa() -> tf.keras.Model:
  """RFA's ConvNet: 'same' convolutions, FC(2048) with ReLU, FC(62)."""
  inputs = tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE))
  hidden = tf.keras.layers.Dense(2048, activation='relu')(_conv_features(inputs, 'same'))
  return tf.keras.Model(inputs, tf.keras.layers.Dense(EMNIST_CLASSES)(hidden))


def emnist_cnn_dfl() -> tf.keras.Model:
  """Delta-FL's ConvNet: 'valid' convolutions and a single FC(62)."""
  inputs = tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE))
  return tf.keras.Model(inputs, tf.keras.layers.Dense(EMNIST_CLASSES)(_conv_features(inputs, 'valid')))


def shakespeare_lstm_rfa() -> tf.keras.Model:
  """RFA's Shakespeare model: Embedding(53, 8) -> LSTM(128) -> FC(53) on the last step."""
  inputs = tf.keras.Input(shape=(SEQUENCE_LENGTH,), dtype=tf.int32)
  embedded = tf.keras.layers.Embedding(SHAKESPEARE_SYMBOLS, LSTM_EMBEDDING_DIM)(inputs)
  hidden = tf.keras.layers.LSTM(RECURRENT_UNITS)(embedded)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(SHAKESPEARE_SYMBOLS)(hidden))


def shakespeare_gru_dfl() -> tf.keras.Model:
  """Delta-FL's Shakespeare model: one-hot(53) -> GRU(128) -> FC(53) on the last step."""
  inputs = tf.keras.Input(shape=(SEQUENCE_LENGTH,), dtype=tf.int32)
  one_hot = tf.keras.layers.Lambda(lambda ids: tf.one_hot(ids, SHAKESPEARE_SYMBOLS))(inputs)
  hidden = tf.keras.layers.GRU(RECURRENT_UNITS)(one_hot)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(SHAKESPEARE_SYMBOLS)(hidden))


def emnist_input_spec():
  """Batched EMNIST elements: x float32 [None, 28, 28], y int32 [None]."""
  return collections.OrderedDict(
      x=tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE], tf.float32), y=tf.TensorSpec([None], tf.int32)
  )


def shakespeare_input_spec():
  """Batched Shakespeare elements: x int32 [None, SEQUENCE_LENGTH] character ids (20), y int32 [None], the next
  character."""
  return collections.OrderedDict(
      x=tf.TensorSpec([None, SEQUENCE_LENGTH], tf.int32), y=tf.TensorSpec([None], tf.int32)
  )


def classifier_model_fn(
    build_keras_model: Callable[[], tf.keras.Model], input_spec
) -> Callable[[], tff.learning.models.VariableModel]:
  """A TFF model_fn: softmax cross-entropy on the logits (the multinomial logistic loss) and accuracy."""
  def model_fn() -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        build_keras_model(),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=input_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
    )
  return model_fn
