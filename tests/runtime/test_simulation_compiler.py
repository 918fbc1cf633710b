"""`simulation_compiler.compile_for_simulation` gives what TFF's own three-call lowering gives, reading the proto once.

TFF's pipeline (the reference): `tff.backends.test.replace_secure_intrinsics_with_bodies`, then, with Grappler,
`tff.backends.native.desugar_and_transform_to_native`, or without it `replace_intrinsics_with_bodies` and
`transform_to_native_form(grappler_config=None)`. Two lowerings of one computation never match byte for byte, not
even two by TFF itself: each draws fresh reference names (a random three-letter prefix), TensorFlow numbers the
functions it builds from a process-wide counter (which also orders a graph's function library), and the cache ids
and `comp#` labels hash the graphs. The comparison is on a canonical text that renames exactly those.
"""

import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tensorflow_federated.python.core.environments.tensorflow_backend import tensorflow_tree_transformations
from tensorflow_federated.python.core.impl.compiler import transformation_utils
from tff_robust.aggregators import geometric_median
from tff_robust.runtime import simulation_compiler

_VALUE_TYPE = tff.TensorType(np.float32, [3])
_WEIGHT_TYPE = tff.TensorType(np.float32)


def _tffs_lowering(computation, optimize_graphs):
  computation = tff.backends.test.replace_secure_intrinsics_with_bodies(computation)
  if optimize_graphs:
    return tff.backends.native.desugar_and_transform_to_native(computation)
  desugared, _ = tensorflow_tree_transformations.replace_intrinsics_with_bodies(computation.to_building_block())
  return tff.backends.native.transform_to_native_form(
      tff.framework.ConcreteComputation.from_building_block(desugared), grappler_config=None
  )


def _without_fresh_names(text):
  text = re.sub(r'\b_[a-z]{3}(\d+)', r'_ref\1', text)  # reference names: a fresh prefix per lowering
  text = re.sub(r'comp#[0-9a-f]+', 'comp#', text)  # a compiled computation's label, a hash of its graph
  return re.sub(r'_\d{3,}\b', '_uid', text)  # TensorFlow's process-wide function numbers


def _canonical(computation):
  """The tree's structure and every TensorFlow computation in it (graph, library functions sorted, bindings,
  whether it has a cache id), fresh names renamed."""
  tree = computation.to_building_block()
  graphs = []

  def collect(block):
    if isinstance(block, tff.framework.CompiledComputation):
      graph = tf.compat.v1.GraphDef.FromString(block.proto.tensorflow.graph_def.value)
      functions = sorted(_without_fresh_names(str(function)) for function in graph.library.function)
      del graph.library.function[:]
      tensorflow = block.proto.tensorflow
      bindings = f'{tensorflow.parameter} {tensorflow.result} cache key: {tensorflow.HasField("cache_key")}'
      graphs.append(_without_fresh_names(str(graph)) + ''.join(functions) + bindings)
    return block, False

  transformation_utils.transform_postorder(tree, collect)
  return _without_fresh_names(tree.compact_representation()), graphs


@pytest.fixture(scope='module')
def processes():
  # A mean of secure sums (float values quantised into `federated_secure_sum_bitwidth`), and the Weiszfeld passes.
  secure_mean = tff.aggregators.MeanFactory(
      tff.aggregators.SecureSumFactory(10.0), tff.aggregators.SecureSumFactory(100.0)
  ).create(_VALUE_TYPE, _WEIGHT_TYPE)
  median = geometric_median.GeometricMedianFactory().create(_VALUE_TYPE, _WEIGHT_TYPE)
  return {'secure_mean': secure_mean, 'geometric_median': median}


@pytest.mark.parametrize('optimize_graphs', [False, True])
@pytest.mark.parametrize('name', ['secure_mean', 'geometric_median'])
def test_the_lowering_is_tffs_own_up_to_fresh_names(processes, name, optimize_graphs):
  for computation in (processes[name].initialize, processes[name].next):
    ours = simulation_compiler.compile_for_simulation(computation, optimize_graphs=optimize_graphs)
    assert _canonical(ours) == _canonical(_tffs_lowering(computation, optimize_graphs))


def test_the_canonical_text_tells_grappler_apart(processes):
  # The comparison above could not pass by renaming too much: Grappler's rewrites show in it.
  computation = processes['geometric_median'].next
  assert _canonical(_tffs_lowering(computation, True)) != _canonical(_tffs_lowering(computation, False))


def test_secure_sums_are_lowered_to_plain_tensorflow(processes):
  lowered = simulation_compiler.compile_for_simulation(processes['secure_mean'].next, optimize_graphs=False)
  representation = lowered.to_building_block().compact_representation()
  assert 'federated_secure' not in representation
  assert 'federated_secure' in processes['secure_mean'].next.to_building_block().compact_representation()
