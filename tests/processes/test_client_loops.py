"""The client-side loops over a dataset run as iterator loops, with no scan and no reduce dataset (issues 23, 36).

An autograph `for batch in dataset` loop in a `tf.function` becomes `ScanDataset` -> `ReduceDataset` whose
scan function is the whole loop body; tf.data rewrites that dataset graph, body included, at every call, and
TFF's worker calls each client's graph once per round: it made Fed+, local-only, personalized RFA, MtFEEL
and signSGD rounds 3-4 times FedAvg's (benchmarks/results.md, section 1). A `dataset.reduce` loop still
instantiates its reduce function (the training step) at every call; an iterator loop (`client_loop`) is a
`While` op whose body stays instantiated across calls (issue 36: 2.6x less CPU for FedAvg on Shakespeare).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import local_training
from tff_robust.processes import stacked_models
from tests.processes import small_model


def _op_types(computation) -> set:
  """Every op type of a `tff.tensorflow.computation`'s graph and of the functions in its library."""
  graph = tf.compat.v1.GraphDef()
  computation.get_proto(computation).tensorflow.graph_def.Unpack(graph)
  return {node.op for node in graph.node} | {
      node.op for function in graph.library.function for node in function.node_def
  }


def _types():
  model = small_model.model_fn()
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
  weights = tff.learning.models.ModelWeights.from_model(model)
  weights_type = tff.types.tensorflow_to_type(tff.learning.models.ModelWeights(
      trainable=[tf.TensorSpec(v.shape, v.dtype) for v in weights.trainable],
      non_trainable=[tf.TensorSpec(v.shape, v.dtype) for v in weights.non_trainable],
  ))
  return weights_type, data_type


def _assert_iterator_loop(ops: set) -> None:
  assert 'IteratorGetNextAsOptional' in ops and ops & {'While', 'StatelessWhile'}
  assert 'ReduceDataset' not in ops
  assert 'ScanDataset' not in ops


def test_local_training_loops_over_an_iterator_without_scan_or_reduce():
  weights_type, data_type = _types()
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.1)

  @tff.tensorflow.computation(weights_type, data_type)
  def train(weights, dataset):
    return local_training.train_locally(small_model.model_fn(), optimizer, weights, dataset)

  _assert_iterator_loop(_op_types(train))


def test_stacked_losses_and_gradients_loop_over_an_iterator_without_scan_or_reduce():
  weights_type, data_type = _types()
  stacked_type = stacked_models.stacked_type(weights_type, 2)

  @tff.tensorflow.computation(stacked_type, data_type)
  def losses_and_gradients(stacked, dataset):
    return stacked_models.losses_and_gradients(small_model.model_fn(), stacked, tf.constant([0, 1]), dataset)

  _assert_iterator_loop(_op_types(losses_and_gradients))


def test_local_training_still_steps_once_per_batch():
  """Two batches of SGD on the linear classifier from zero weights, against NumPy (the loop keeps the
  order of the steps and the optimizer state across batches)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, small_model.NUM_FEATURES)).astype(np.float32)
  y = np.array([0, 1, 1, 0, 1, 0], np.int32)
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(3)
  weights_type, data_type = _types()
  learning_rate = 0.5

  @tff.tensorflow.computation(weights_type, data_type)
  def train(weights, dataset):
    return local_training.train_locally(
        small_model.model_fn(), tff.learning.optimizers.build_sgdm(learning_rate=learning_rate), weights,
        dataset,
    )[:2]

  zeros = tff.learning.models.ModelWeights(
      trainable=[np.zeros((small_model.NUM_FEATURES, 2), np.float32), np.zeros(2, np.float32)], non_trainable=[]
  )
  (kernel, bias), num_examples = train(zeros, dataset)
  expected_kernel, expected_bias = np.zeros((small_model.NUM_FEATURES, 2)), np.zeros(2)
  for start in (0, 3):
    xb, yb = x[start:start + 3], y[start:start + 3]
    logits = xb @ expected_kernel + expected_bias
    probabilities = np.exp(logits - logits.max(1, keepdims=True))
    probabilities /= probabilities.sum(1, keepdims=True)
    error = (probabilities - np.eye(2)[yb]) / len(yb)  # gradient of the mean cross-entropy wrt the logits
    expected_kernel -= learning_rate * xb.T @ error
    expected_bias -= learning_rate * error.sum(0)
  assert num_examples == 6
  np.testing.assert_allclose(kernel, expected_kernel, atol=1e-5)
  np.testing.assert_allclose(bias, expected_bias, atol=1e-5)
