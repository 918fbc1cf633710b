"""Sent140's two models over 50-dimensional word embeddings (rfa notes Sec. 3.4, superquantile_fl notes
Sec. 3.4), binary logistic loss on one logit.

  * linear: phi(x) = (1/|x|) sum_i G(x_i), the average embedding of the tweet's tokens (padding masked),
    and the score w^T phi(x) with w in R^50 and no bias (50 parameters; RFA's and Delta-FL's model).
  * lstm: one LSTM layer over the embeddings with hidden dimension = embedding dimension = 50 (20,200
    parameters), and a dense layer 50 -> 1 on its output at the last token (51 parameters; the head is
    not stated in the paper, notes Sec. 7 item 10). Padding is masked.

G is GloVe in the papers, fixed. With `pretrained` vectors the embedding is that matrix, frozen, and the
trainable parameters are exactly the papers' (50 and 20,251). Without them (no GloVe offline) the
embedding is trainable and initialised by Keras's default (uniform in [-0.05, 0.05]), the one deviation:
it adds num_tokens x 50 trainable parameters and makes the linear model non-convex.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

EMBEDDING_DIMENSION = 50
LSTM_UNITS = 50
MODEL_KINDS = ('linear', 'lstm')


def _check_arguments(kind, num_tokens, sequence_length, pretrained, l2_regularization):
  if kind not in MODEL_KINDS:
    raise ValueError(f'kind must be one of {MODEL_KINDS}, got {kind!r}')
  if not l2_regularization >= 0 or (l2_regularization and kind != 'linear'):
    raise ValueError(
        f'l2_regularization must be >= 0, and 0 unless kind is linear (Delta-FL regularises its linear models only), '
        f'got {l2_regularization!r} for kind {kind!r}'
    )
  for name, value in (('num_tokens', num_tokens), ('sequence_length', sequence_length)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f'{name} must be an integer >= 1, got {value!r}')
  if pretrained is not None and np.shape(pretrained) != (num_tokens, EMBEDDING_DIMENSION):
    raise ValueError(
        f'pretrained must have shape {(num_tokens, EMBEDDING_DIMENSION)}, got {np.shape(pretrained)}'
    )


def create_keras_model(
    kind: str, *, num_tokens: int, sequence_length: int, pretrained: Optional[np.ndarray] = None,
    l2_regularization: float = 0.0,
) -> tf.keras.Model:
  """The Keras model `kind` ('linear' or 'lstm'): int32 token ids (batch, sequence_length) -> one logit.

  Args:
    kind: 'linear' or 'lstm'.
    num_tokens: embedding rows, padding and out-of-vocabulary ids included.
    sequence_length: tokens per example.
    pretrained: optional float32 (num_tokens, 50) embedding matrix, then frozen; None: trainable.
    l2_regularization: lambda >= 0 of Delta-FL's (lambda/2)||w||^2 on the linear model's w (notes
      superquantile_fl.md §3.4); the linear model only.

  Raises:
    ValueError: if an argument is out of range or `pretrained` has the wrong shape.
  """
  _check_arguments(kind, num_tokens, sequence_length, pretrained, l2_regularization)
  inputs = tf.keras.Input(shape=(sequence_length,), dtype=tf.int32)
  embedding = tf.keras.layers.Embedding(
      num_tokens, EMBEDDING_DIMENSION, mask_zero=True, trainable=pretrained is None,
      embeddings_initializer='uniform' if pretrained is None else tf.keras.initializers.Constant(pretrained),
  )(inputs)
  if kind == 'linear':
    features, use_bias = tf.keras.layers.GlobalAveragePooling1D()(embedding), False
  else:
    features, use_bias = tf.keras.layers.LSTM(LSTM_UNITS)(embedding), True
  regularizer = tf.keras.regularizers.L2(l2_regularization / 2) if l2_regularization else None
  return tf.keras.Model(inputs, tf.keras.layers.Dense(1, use_bias=use_bias, kernel_regularizer=regularizer)(features))


def make_model_fn(
    kind: str, *, num_tokens: int, sequence_length: int, pretrained: Optional[np.ndarray] = None,
    l2_regularization: float = 0.0,
):
  """A no-arg `model_fn` of `create_keras_model`'s model: elements {'x': int32 ids, 'y': int32 in {0, 1}},
  binary cross-entropy on the logit (plus (lambda/2)||w||^2 with `l2_regularization` = lambda), and
  'accuracy' (logit > 0 predicts 1)."""
  _check_arguments(kind, num_tokens, sequence_length, pretrained, l2_regularization)

  def model_fn() -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        create_keras_model(
            kind, num_tokens=num_tokens, sequence_length=sequence_length, pretrained=pretrained,
            l2_regularization=l2_regularization,
        ),
        loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
        input_spec=collections.OrderedDict(
            x=tf.TensorSpec([None, sequence_length], tf.int32), y=tf.TensorSpec([None], tf.int32)
        ),
        metrics=[tf.keras.metrics.BinaryAccuracy(name='accuracy', threshold=0.0)],
    )

  return model_fn
