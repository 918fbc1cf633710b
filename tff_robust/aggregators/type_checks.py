"""Argument checks shared by the aggregation factories, with errors that name the argument."""

from typing import Optional

import numpy as np
import tensorflow_federated as tff


def check_value_type(value_type) -> None:
  """value_type must be an unplaced tensor or structure of tensors, all of floating dtype."""
  if not isinstance(value_type, (tff.TensorType, tff.StructType)):
    raise TypeError(f'value_type must be a tff.TensorType or tff.StructType, got {value_type!r}')
  if not tff.types.is_structure_of_floats(value_type):
    raise TypeError(f'every tensor of value_type must have a floating dtype, got {value_type}')


def check_float_scalar(name: str, type_spec) -> None:
  """The type named `name` must be a floating scalar tff.TensorType."""
  if not (
      isinstance(type_spec, tff.TensorType)
      and np.issubdtype(type_spec.dtype, np.floating)
      and tuple(type_spec.shape) == ()
  ):
    raise TypeError(f'{name} must be a scalar tff.TensorType of a floating dtype, got {type_spec}')


def _is_real(value) -> bool:
  """Whether `value` is a real number: an int, a float or a NumPy integer or floating scalar, not a bool."""
  return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def check_real_type(name: str, value) -> None:
  """Raises TypeError naming `name` unless `value` is a real number (`_is_real`)."""
  if not _is_real(value):
    raise TypeError(f'{name} must be a number, got {value!r}')


def check_number(name: str, value, *, minimum: Optional[float] = None, strict: bool = False,
                 maximum: Optional[float] = None, strict_maximum: bool = False) -> float:
  """`value` as a float, if it is a finite real number >= `minimum` (> if `strict`) and <= `maximum` (< if
  `strict_maximum`); an unset bound is no bound. The one check of every float hyperparameter of the builders
  and factories: NaN fails it, where a bare `value < minimum` would let NaN through.

  Raises:
    ValueError: naming `name` and the allowed range, for a bool, a non-number, NaN/Inf or a value outside.
  """
  if (not _is_real(value) or not np.isfinite(value)
      or (minimum is not None and (value < minimum or (strict and value == minimum)))
      or (maximum is not None and (value > maximum or (strict_maximum and value == maximum)))):
    raise ValueError(f'{name} must be a finite number{_range(minimum, strict, maximum, strict_maximum)}, '
                     f'got {value!r}')
  return float(value)


def _range(minimum, strict, maximum, strict_maximum) -> str:
  """' >= 0', ' in (0, 1]', ' < 0.5', or '' (no bound), as `check_number`'s message says it."""
  if minimum is not None and maximum is not None:
    return f' in {"(" if strict else "["}{minimum:g}, {maximum:g}{")" if strict_maximum else "]"}'
  if minimum is not None:
    return f' {">" if strict else ">="} {minimum:g}'
  if maximum is not None:
    return f' {"<" if strict_maximum else "<="} {maximum:g}'
  return ''


def check_integer(name: str, value, *, minimum: int) -> int:
  """`value`, if it is an integer (not a bool) >= `minimum`.

  Raises:
    ValueError: naming `name` and the allowed range.
  """
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f'{name} must be an integer >= {minimum}, got {value!r}')
  return int(value)


def check_weight_type(weight_type) -> None:
  """weight_type must be a real scalar: a floating or integer dtype, as `tff.aggregators.MeanFactory` takes.

  Raises:
    TypeError: naming `weight_type` and what is allowed.
  """
  if not (
      isinstance(weight_type, tff.TensorType)
      and (np.issubdtype(weight_type.dtype, np.floating) or np.issubdtype(weight_type.dtype, np.integer))
      and tuple(weight_type.shape) == ()
  ):
    raise TypeError(
        f'weight_type must be a scalar tff.TensorType of a floating or integer dtype, got {weight_type}'
    )


def sum_factory_or_default(sum_factory, name: str = 'sum_factory'):
  """`sum_factory`, or `tff.aggregators.SumFactory()` (exact federated sum).

  Raises:
    TypeError: if `sum_factory` is not a `tff.aggregators.UnweightedAggregationFactory` (the message names the
      argument as `name`).
  """
  if sum_factory is None:
    return tff.aggregators.SumFactory()
  if not isinstance(sum_factory, tff.aggregators.UnweightedAggregationFactory):
    raise TypeError(f'{name} must be a tff.aggregators.UnweightedAggregationFactory, got {type(sum_factory)}')
  return sum_factory


def weighted_factory(name: str, factory):
  """`factory`, if it is a `tff.aggregators.WeightedAggregationFactory`; else TypeError naming `name`."""
  if not isinstance(factory, tff.aggregators.WeightedAggregationFactory):
    raise TypeError(f'{name} must be a tff.aggregators.WeightedAggregationFactory, got {factory!r}')
  return factory


def mean_factory_or_default(mean_factory):
  """`mean_factory`, or an exact weighted mean that returns 0 (not NaN) when no weight is positive.

  Raises:
    TypeError: if `mean_factory` is not a `tff.aggregators.WeightedAggregationFactory`.
  """
  if mean_factory is None:
    return tff.aggregators.MeanFactory(no_nan_division=True)
  if not isinstance(mean_factory, tff.aggregators.WeightedAggregationFactory):
    raise TypeError(
        f'mean_factory must be a tff.aggregators.WeightedAggregationFactory, got {type(mean_factory)}'
    )
  return mean_factory
