"""The dtypes the factories compute in: float32 or wider whatever the value's dtype, results cast back.

Every weighted factory takes what `tff.aggregators.MeanFactory` takes: a value that is a floating tensor or a
structure of floating tensors of any width (mixed widths too) and a real scalar weight (floating or integer).
Inside, arithmetic happens where it cannot overflow for the documented ranges:
  - every value tensor is computed in `value_dtype`: float64 if one of them is float64, else float32
    (`wide_value_type`), so a weight alpha / nu = 1e6 times a float16 value stays finite, and the tensors
    of a mixed structure, which share per-client weights, are all as precise as its widest one;
  - weights, norms, distances and the per-client weights derived from them are scalars of `scalar_dtype`:
    float64 if the values or the weight are float64, else float32 (integer weights are cast to it);
and the aggregate is cast back to the value's own dtypes (`narrow`).

Structures are walked in the order of their type's elements (`leaves`, `pack`): `tf.nest` would sort the
keys of a mapping, and a `tff.StructType` without a Python container is a `tff.structure.Struct` in
TensorFlow code, which `tf.nest` cannot walk. The wide types always carry Python containers.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import nonfinite
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks

def leaf_types(type_spec) -> list:
  """The tensor types of a tensor type or (nested) struct type, in the order of its elements."""
  if isinstance(type_spec, tff.TensorType):
    return [type_spec]
  return [leaf for _, element in tff.structure.iter_elements(type_spec) for leaf in leaf_types(element)]


def leaves(value, type_spec) -> list:
  """The tensors of `value` (Python containers or a `Struct` of type `type_spec`), ordered as `leaf_types`."""
  if isinstance(type_spec, tff.TensorType):
    return [value]
  return [
      leaf
      for index, (name, element) in enumerate(tff.structure.iter_elements(type_spec))
      for leaf in leaves(value[name] if isinstance(value, collections.abc.Mapping) else value[index], element)
  ]


def pack(type_spec, tensors):
  """`type_spec`'s nesting, names and Python containers rebuilt from an iterator over its leaf tensors."""
  if isinstance(type_spec, tff.TensorType):
    return next(tensors)
  struct = tff.structure.Struct(
      [(name, pack(element, tensors)) for name, element in tff.structure.iter_elements(type_spec)]
  )
  return tff.types.type_to_py_container(struct, type_spec)


def value_dtype(value_type) -> np.dtype:
  """float64 if a tensor of `value_type` is float64, else float32."""
  dtypes = [np.dtype(leaf.dtype) for leaf in leaf_types(value_type)]
  return np.dtype(np.float64) if np.dtype(np.float64) in dtypes else np.dtype(np.float32)


def wide_value_type(value_type):
  """`value_type` with every tensor of `value_dtype`, as Python containers (see the module docstring)."""
  return with_dtype(value_type, value_dtype(value_type))


def with_dtype(value_type, dtype):
  """`value_type` with every tensor of `dtype`, its shapes and names kept, as Python containers."""
  if isinstance(value_type, tff.TensorType):
    return tff.TensorType(dtype, value_type.shape)
  elements = [(name, with_dtype(element, dtype)) for name, element in tff.structure.iter_elements(value_type)]
  names = [name for name, _ in elements]
  container = getattr(value_type, 'python_container', None)
  if container is None and all(names):
    container = collections.OrderedDict
  elif container is None and not any(names):
    container = list
  if container is None:
    return tff.StructType(elements)
  return tff.StructWithPythonType(elements, container)


def checked_wide_types(value_type, weight_type):
  """(`wide_value_type(value_type)`, the scalar `scalar_dtype` weight type) after checking both types.

  Raises TypeError (`type_checks`) unless `value_type` is a floating tensor or structure of them and
  `weight_type` a real scalar: the types `tff.aggregators.MeanFactory` takes.
  """
  type_checks.check_value_type(value_type)
  type_checks.check_weight_type(weight_type)
  return wide_value_type(value_type), tff.TensorType(scalar_dtype(value_type, weight_type))


def scalar_dtype(value_type, weight_type) -> np.dtype:
  """float64 if a tensor of `value_type` or the weight is float64, else float32."""
  if np.dtype(weight_type.dtype) == np.float64:
    return np.dtype(np.float64)
  return value_dtype(value_type)


def narrow(wide_value, value_type):
  """TensorFlow: a value of `wide_value_type(value_type)` cast back to `value_type`'s dtypes and containers."""
  wide_type = wide_value_type(value_type)
  return pack(value_type, iter([
      tf.cast(tensor, leaf.dtype) for tensor, leaf in zip(leaves(wide_value, wide_type), leaf_types(value_type))
  ]))


def narrow_or_zeros_if_nonfinite(wide_value, value_type):
  """TensorFlow: `narrow(wide_value, value_type)`, or zeros of `value_type` if that has a NaN or Inf entry.

  The factories' last step: an aggregate that overflowed the value's dtype is replaced by zeros (no step).
  """
  value = narrow(wide_value, value_type)
  return structure_math.zeros_where(tf.logical_not(structure_math.all_finite(value)), value)


def build_widen_and_drop_nonfinite(value_type, weight_type) -> tff.tensorflow.computation:
  """A TensorFlow computation (value, weight) -> (wide value, weight as `scalar_dtype`, nonfinite flag).

  The value becomes `wide_value_type(value_type)` and the weight a `scalar_dtype` scalar; then
  (`nonfinite.leave_out_if_nonfinite`) a client whose value has a NaN or Inf entry or whose weight is not
  finite (or negative) gets value 0, weight 0 and flag 1 (sum the flags to count them); any other has flag 0.
  """
  wide_type = wide_value_type(value_type)
  weight_dtype = scalar_dtype(value_type, weight_type)

  @tff.tensorflow.computation(value_type, weight_type)
  def widen_and_drop_nonfinite(value, weight):
    wide = pack(wide_type, iter([
        tf.cast(tensor, leaf.dtype) for tensor, leaf in zip(leaves(value, value_type), leaf_types(wide_type))
    ]))
    wide, weight, left_out = nonfinite.leave_out_if_nonfinite(wide, tf.cast(weight, weight_dtype))
    return wide, weight, tf.cast(left_out, tf.int32)

  return widen_and_drop_nonfinite


def weighted_next_computation(init_fn, value_type, weight_type):
  """The decorator of a weighted factory's `next_fn`: a federated computation of
  (state of `init_fn`'s result type, `value_type`@CLIENTS, `weight_type`@CLIENTS), as in TFF's `MeanFactory`."""
  return tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(value_type, tff.CLIENTS),
      tff.FederatedType(weight_type, tff.CLIENTS),
  )


def sanitized_next_computation(init_fn, value_type, weight_type):
  """The decorator of a weighted factory's `next_fn` body `(state, wide_value, weight, nonfinite)`: the factory's
  `next_fn` (`weighted_next_computation`) first widens each client's value and drops a non-finite one
  (`widen_and_drop_nonfinite_at_clients`), then calls the body with the three client-placed parts."""

  def decorate(body):
    @weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      return body(state, *widen_and_drop_nonfinite_at_clients(value, weight))

    return next_fn

  return decorate


def widen_and_drop_nonfinite_at_clients(value, weight):
  """Federated: the prologue of every weighted factory's `next_fn`, on client-placed `value` and `weight`.

  Maps `build_widen_and_drop_nonfinite` of their member types over the clients and returns the three parts at
  the clients: (wide value, weight as `scalar_dtype`, int32 0/1 non-finite flag).
  """
  widen = build_widen_and_drop_nonfinite(value.type_signature.member, weight.type_signature.member)
  sanitized = tff.federated_map(widen, (value, weight))
  return sanitized[0], sanitized[1], sanitized[2]


def narrow_or_zeros_if_nonfinite_at_server(wide_value, value_type):
  """Federated: `narrow_or_zeros_if_nonfinite` of a server-placed wide value, the factories' last step."""
  narrow_at_server = tff.tensorflow.computation(
      lambda wide: narrow_or_zeros_if_nonfinite(wide, value_type), wide_value.type_signature.member
  )
  return tff.federated_map(narrow_at_server, wide_value)
