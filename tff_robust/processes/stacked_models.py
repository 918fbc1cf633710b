"""Losses and gradients of many models of one architecture on one client's data (MtFEEL and DDE client work).

Several models are held as one `ModelWeights` whose tensors are stacked along a new leading axis; model i is
slice i of every tensor. A client evaluates the models it is asked for one after another, in the single
`VariableModel` it builds.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import client_loop


def stacked_type(weights_type, count: int) -> tff.StructWithPythonType:
  """The type of `count` models of `weights_type` (a `ModelWeights` type) stacked along a new leading axis."""
  def stack(part):
    return tff.StructWithPythonType([tff.TensorType(t.dtype, [count, *t.shape]) for t in part], list)

  return tff.StructWithPythonType(
      [('trainable', stack(weights_type.trainable)), ('non_trainable', stack(weights_type.non_trainable))],
      tff.learning.models.ModelWeights,
  )


def stack_models(models: list) -> tff.learning.models.ModelWeights:
  """Models (`ModelWeights` of arrays) -> one `ModelWeights` with every tensor stacked (NumPy side)."""
  return tff.learning.models.ModelWeights(
      trainable=[np.stack(parts) for parts in zip(*(m.trainable for m in models))],
      non_trainable=[np.stack(parts) for parts in zip(*(m.non_trainable for m in models))],
  )


def model_at(stacked, index: int) -> tff.learning.models.ModelWeights:
  """Model `index` of stacked weights (NumPy side)."""
  return tff.learning.models.ModelWeights(
      trainable=[w[index] for w in stacked.trainable], non_trainable=[w[index] for w in stacked.non_trainable]
  )


def losses_and_gradients(model: tff.learning.models.VariableModel, stacked, indices, dataset):
  """For each model i in `indices`: its mean loss over `dataset` and the gradient of that mean.

  Lhat(w_i, S) = sum_b n_b loss_b(w_i) / sum_b n_b over the batches b of the client's dataset S (the
  full-batch loss), and grad_{w_i} Lhat(w_i, S) likewise. Both are 0 for an empty dataset.

  Args:
    model: the client's `VariableModel`; its variables are overwritten.
    stacked: `ModelWeights` (or its TFF struct) of stacked tensors.
    indices: int32 vector of the models to evaluate.
    dataset: the client's batched `tf.data.Dataset`.

  Returns:
    (losses [len(indices)], gradients: list like the trainable weights, each [len(indices), ...],
    number of examples as float32).

  The batches run in an iterator loop (`client_loop.fold_batches`; see `local_training.train_locally`).
  """

  @tf.function
  def run(stacked_trainable, stacked_non_trainable, indices, dataset):
    model_weights = tff.learning.models.ModelWeights.from_model(model)
    trainable = list(model_weights.trainable)
    count = tf.size(indices)
    selected = [tf.gather(values, indices) for values in stacked_trainable]
    selected_non_trainable = [tf.gather(values, indices) for values in stacked_non_trainable]

    def add_batch(sums, batch):  # one pass over the data; every model on each batch
      loss_sums, gradient_sums, num_examples = sums
      batch_examples = tf.constant(0.0)
      batch_losses = tf.TensorArray(tf.float32, size=count)
      batch_gradients = [tf.TensorArray(v.dtype, size=count) for v in trainable]
      for position in tf.range(count):
        for variable, values in zip(trainable, selected):
          variable.assign(values[position])
        for variable, values in zip(model_weights.non_trainable, selected_non_trainable):
          variable.assign(values[position])
        with tf.GradientTape() as tape:
          output = model.forward_pass(batch, training=True)
        gradients = tape.gradient(output.loss, trainable)
        batch_examples = tf.cast(output.num_examples, tf.float32)
        batch_losses = batch_losses.write(position, batch_examples * tf.cast(output.loss, tf.float32))
        batch_gradients = [array.write(position, batch_examples * g) for array, g in zip(batch_gradients, gradients)]
      return (
          loss_sums + batch_losses.stack(),
          tuple(s + array.stack() for s, array in zip(gradient_sums, batch_gradients)),
          num_examples + batch_examples,
      )

    loss_sums, gradient_sums, num_examples = client_loop.fold_batches(
        add_batch, dataset, (tf.zeros([count]), tuple(tf.zeros_like(values) for values in selected), tf.constant(0.0))
    )
    return (
        tf.math.divide_no_nan(loss_sums, num_examples),
        [tf.math.divide_no_nan(s, num_examples) for s in gradient_sums],
        num_examples,
    )

  return run(list(stacked.trainable), list(stacked.non_trainable), indices, dataset)
