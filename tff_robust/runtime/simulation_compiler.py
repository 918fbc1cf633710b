"""Lowering a computation to what TFF's C++ workers run: the compiler of every context `execution_context` installs.

TFF's own pipeline for a simulation with secure sums is three calls, each one a full pass from the computation's
proto to building blocks and back (`tff.backends.test.replace_secure_intrinsics_with_bodies`, then
`tff.backends.native.desugar_and_transform_to_native`, whose `transform_to_native_form` reads the proto the desugaring
wrote). Reading and writing the protos cost more than the passes themselves (type deserialisation and interning
in `building_blocks.*.from_proto`): a profile of the aggregator contract tests, which compile one process per type
signature, spent about half of the compile time in those conversions. `compile_for_simulation` runs the same
transformations, in the same order and with the same Grappler settings, on one tree read once and written once;
`tests/runtime/test_simulation_compiler.py` checks that the result is TFF's own up to the names each lowering draws
afresh. The secure-sum pass is TFF 0.87's private `_replace_secure_intrinsics_with_insecure_bodies`, the body of its
public `replace_secure_intrinsics_with_bodies` (setup.py pins TFF 0.87; that test compares with the public calls, so
a TFF that changes either fails there).
"""

from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

# TFF 0.87 exposes these passes publicly only as whole-proto calls (`tff.backends.test`, `tff.backends.native`).
from tensorflow_federated.python.core.backends.test import compiler as tff_test_compiler
from tensorflow_federated.python.core.environments.tensorflow_backend import compiled_computation_transformations
from tensorflow_federated.python.core.environments.tensorflow_backend import tensorflow_tree_transformations
from tensorflow_federated.python.core.impl.compiler import transformations


def grappler_config() -> tf.compat.v1.ConfigProto:
  """The Grappler settings of TFF's native lowering (`desugar_and_transform_to_native`): memory, constant folding,
  arithmetic, loop and function optimisation, all aggressive. Function inlining keeps a dataset placeholder off a GPU,
  which has no kernel for it (TFF's comment in its compiler)."""
  config = tf.compat.v1.ConfigProto()
  rewrite_options = config.graph_options.rewrite_options
  aggressive = rewrite_options.AGGRESSIVE
  rewrite_options.memory_optimization = aggressive
  rewrite_options.constant_folding = aggressive
  rewrite_options.arithmetic_optimization = aggressive
  rewrite_options.loop_optimization = aggressive
  rewrite_options.function_optimization = aggressive
  return config


def compile_for_simulation(computation: tff.Computation, *, optimize_graphs: bool = True) -> tff.Computation:
  """`computation` as the workers run it: secure sums replaced by their insecure bodies (the same clipping and
  quantisation), the other intrinsics by their TensorFlow bodies, then TFF's native form (call-dominant, Grappler
  off inside each graph's function calls, cache ids).

  `optimize_graphs`: TFF's lowering runs Grappler (`grappler_config`) on every TensorFlow computation it compiles;
  False skips it. Compiling is a one-off per computation, so a training run keeps the default; the test session,
  which compiles thousands of small computations and runs each a few times, turns it off (measured 2026-11-28 on a
  loaded 2-core machine: the `recommended_secure` chain's create, compile and five rounds took 3.4-4.7 s without
  Grappler and 10.2-11.4 s with it). Without Grappler's function inlining a dataset placeholder could land on a GPU:
  use it on CPU workers only.

  As in TFF's `transform_to_native_form`, a computation whose native form fails with a `ValueError` is returned
  desugared but not in native form.
  """
  tree = computation.to_building_block()
  tree, _ = tff_test_compiler._replace_secure_intrinsics_with_insecure_bodies(tree)  # pylint: disable=protected-access
  tree, _ = tensorflow_tree_transformations.replace_intrinsics_with_bodies(tree)
  try:
    native = _native_form(tree, grappler_config() if optimize_graphs else None)
  except ValueError:
    native = tree
  return tff.framework.ConcreteComputation.from_building_block(native)


def _native_form(tree, config: Optional[tf.compat.v1.ConfigProto]):
  """TFF's `transform_to_native_form` on a tree instead of a proto: call-dominant form, Grappler where `config` is
  given, Grappler turned off in the graphs' function-call ops, and a cache id on every TensorFlow computation."""
  tree = transformations.to_call_dominant(tree)
  if config is not None:
    tree, _ = compiled_computation_transformations.optimize_tensorflow_graphs(tree, config)
  tree, _ = compiled_computation_transformations.transform_tf_call_ops_to_disable_grappler(tree)
  tree, _ = compiled_computation_transformations.transform_tf_add_ids(tree)
  return tree
