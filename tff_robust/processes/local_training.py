"""Local minibatch training of a `VariableModel` from given weights, optionally pulled toward an anchor."""

import collections
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import client_loop


def learning_rate_of(optimizer: tff.learning.optimizers.Optimizer) -> float:
  """The `learning_rate` hyperparameter of a TFF optimizer (Fed+'s eta in kappa = 1 / (1 + eta sigma)).

  Raises:
    ValueError: if the optimizer has no `learning_rate` hyperparameter.
  """
  hparams = optimizer.get_hparams(optimizer.initialize(tf.TensorSpec([], tf.float32)))
  if 'learning_rate' not in hparams:
    raise ValueError(
        f'client_optimizer_fn must have a learning_rate hyperparameter, got hyperparameters {list(hparams)}'
    )
  return float(hparams['learning_rate'])


def train_locally(
    model: tff.learning.models.VariableModel,
    optimizer: tff.learning.optimizers.Optimizer,
    start: tff.learning.models.ModelWeights,
    dataset: tf.data.Dataset,
    *,
    anchor=None,
    kappa: Optional[float] = None,
    proximal_strength=None,
    loss_weight=None,
):
  """One optimizer step per batch of `dataset`, from `start`; returns (trainable weights, examples, metrics).

  `anchor` (a structure like the trainable weights) comes with exactly one of
    - `kappa`: every step is Fed+'s two-step rule, eq. (14),
          w <- kappa * step(w) + (1 - kappa) * anchor,
      which for SGD with learning rate eta and kappa = 1 / (1 + eta sigma) is gradient descent with step
      eta kappa on f_k(w) + (sigma / 2)||w - anchor||^2 (Prop. 1);
    - `proximal_strength` mu: the optimizer steps on the gradient of f_k(w) + (mu / 2)||w - anchor||^2,
          grad f_k(w) + mu (w - anchor)                                    (FedProx, Li et al. 2020, eq. (2)).
  `loss_weight` c (None: 1) scales the loss's gradient: the optimizer steps on c grad f_k(w) (+ mu (w - anchor)),
  the gradient of c f_k(w) + (mu / 2)||w - anchor||^2 (constrain-and-scale's attacker objective). `proximal_strength`
  and `loss_weight` may be scalar tensors (e.g. chosen per client inside a client computation).
  The optimizer starts from its initial state.
  `metrics` are the model's unfinalized metrics, accumulated on top of what the model already holds.

  Weights are assigned, the batches run and the metrics read inside one `tf.function`, so that the
  assignments are ordered before the forward passes in graph mode. The batches run in an iterator loop
  (`client_loop.fold_batches`), whose step stays instantiated across client calls in TFF's worker; a
  `dataset.reduce` instantiates it again at every call, and an autograph `for batch in dataset` loop is a scan
  dataset that tf.data rewrites at every call (~25 ms per client, issue 23).

  Raises:
    ValueError: unless `anchor` comes with exactly one of `kappa` and `proximal_strength`, or none is given.
  """
  if (anchor is None) != (kappa is None and proximal_strength is None) or (
      kappa is not None and proximal_strength is not None):
    raise ValueError(
        'train_locally needs an anchor with exactly one of kappa and proximal_strength, or none of the three'
    )

  @tf.function
  def run(start, dataset, anchor):
    model_weights = tff.learning.models.ModelWeights.from_model(model)
    tf.nest.map_structure(lambda variable, value: variable.assign(value), model_weights, start)
    trainable = model_weights.trainable

    def train_on_batch(loop_state, batch):
      num_examples, optimizer_state = loop_state
      with tf.GradientTape() as tape:
        output = model.forward_pass(batch, training=True)
      gradients = tape.gradient(output.loss, trainable)
      if loss_weight is not None:
        gradients = [loss_weight * g for g in gradients]
      if proximal_strength is not None:
        gradients = [g + proximal_strength * (w - a) for g, w, a in zip(gradients, trainable, anchor)]
      optimizer_state, stepped = optimizer.next(optimizer_state, tuple(trainable), tuple(gradients))
      if kappa is not None:
        stepped = tf.nest.map_structure(lambda w, a: kappa * w + (1.0 - kappa) * a, list(stepped), list(anchor))
      tf.nest.map_structure(lambda variable, value: variable.assign(value), list(trainable), list(stepped))
      return num_examples + tf.cast(output.num_examples, tf.int64), optimizer_state

    optimizer_state = optimizer.initialize(tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable))
    num_examples, _ = client_loop.fold_batches(train_on_batch, dataset, (tf.constant(0, tf.int64), optimizer_state))
    return (
        tuple(tf.identity(v) for v in trainable),
        num_examples,
        collections.OrderedDict(model.report_local_unfinalized_metrics()),
    )

  return run(start, dataset, anchor)
