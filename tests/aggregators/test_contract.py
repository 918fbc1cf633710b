"""The aggregator contract (issue 25): every exported factory takes what `tff.aggregators.MeanFactory` takes.

Every factory is created for float16, float32 and float64 tensors and for an OrderedDict with unsorted keys
(holding a list holding a tuple), a list and a tuple that mix the three dtypes, and for float32, float64,
int32 and int64 weights. Each cell either returns the answer known in closed form, with the value type's
dtypes and to each leaf's dtype tolerance, or refuses at `create()` with a `TypeError` that names the type
and what is allowed; never a silent wrong value, never a TensorFlow error from inside the computation.
The inputs (entries multiples of 1/8, exact in float16; float64 tensors get 2^-30 more, so that float32
arithmetic inside shows):
  identical  seven clients send the same point x with different weights: x.
  single     one client sends x: x, or zero for the rules that need more clients (Krum, Bulyan, trimmed mean).
  symmetric  c and c +- d_1, c +- d_2, c +- d_3, equal weights: c, for the rules that commute with the
             reflection about c (Krum and Bulyan break ties by client index, so they do not).
  outlier    six clients at x and one far away, equal weights: x, for the gather-based robust rules.
  zero       every weight is 0: zero (the secure quantile keeps its initial estimate, 0).
Norm clipping, and norm bounding with weak DP at noise 0, return the weighted mean of the clipped points instead;
the robust learning rate before a mean returns that mean with its flips (`core.rlr`); FLAME at noise 0 returns
the location. The unweighted sign-vote factories,
whose value is a <signs, (weights,) seed> structure, take float32 signs only and must refuse the others.
A process is traced once per (factory, type signature) and runs all its cases (TFF tracing costs about a
second per computation): the value types run with float32 weights, the weight types with float32 values,
and float16 values also with integer weights.
"""

import collections
from typing import Callable, NamedTuple

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import bucketing
from tff_robust.aggregators import centered_clipping
from tff_robust.aggregators import channels
from tff_robust.aggregators import delta_median
from tff_robust.aggregators import flame
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import nearest_neighbor_mixing
from tff_robust.aggregators import norm_filter
from tff_robust.aggregators import quantile
from tff_robust.aggregators import robust_learning_rate
from tff_robust.aggregators import sign_vote
from tff_robust.aggregators import update_corruption
from tff_robust.aggregators import weak_dp
from tff_robust.core import rlr

_TENSOR_SHAPE = [3]
_VALUE_TYPES = {
    'float16': tff.TensorType(np.float16, _TENSOR_SHAPE),
    'float32': tff.TensorType(np.float32, _TENSOR_SHAPE),
    'float64': tff.TensorType(np.float64, _TENSOR_SHAPE),
    'odict': tff.to_type(collections.OrderedDict(
        z=(np.float64, [2]), a=[(np.float16, [1, 2]), ((np.float32, [2]), (np.float16, []))]
    )),
    'list': tff.to_type([(np.float32, [2]), (np.float16, [1]), (np.float64, [])]),
    'tuple': tff.to_type(((np.float64, [1, 2]), (np.float32, [1]))),
}
_SCALAR_TYPES = {name: tff.TensorType(np.dtype(name)) for name in ('float16', 'float32', 'float64')}
_WEIGHT_DTYPES = ('float32', 'float64', 'int32', 'int64')
# (value type, weight dtype) signatures: every value type with float32 weights, every weight type with
# float32 values, and float16 values with integer weights (the combination furthest from float32).
_SIGNATURES = (
    [(value, 'float32') for value in _VALUE_TYPES]
    + [('float32', weight) for weight in _WEIGHT_DTYPES if weight != 'float32']
    + [('float16', 'int32'), ('float16', 'int64')]
)
_ALL_CASES = ('identical', 'single', 'symmetric', 'outlier', 'zero')


class _Spec(NamedTuple):
  """An exported factory, the closed-form cases it is run on, and how its answer differs from a location's."""

  build: Callable[[], tff.aggregators.WeightedAggregationFactory]
  cases: tuple
  minimum_clients: int = 1  # fewer usable clients give zero (an insufficient round)
  scalar: bool = False  # only scalar values (the quantiles); structures must be refused
  expected: Callable = None  # (case, points, weights, location) -> flat answer; default: the location
  slack: float = 0.0  # extra absolute tolerance, as a fraction of the largest |entry|


def _clipped_mean(case, points, weights, location):
  """norm_clipping_factory(1): the weighted mean of p_i min(1, 1 / ||p_i||)."""
  del case, location
  norms = np.maximum(np.linalg.norm(points, axis=1), 1e-300)
  return np.average(points * np.minimum(1.0, 1.0 / norms)[:, None], axis=0, weights=weights)


def _centered_clipping(case, points, weights, location):
  """CenteredClippingFactory(1, 3) in its first round: v <- v + mean_i clip(p_i - v, 1), three times from 0."""
  del case, location
  center = np.zeros(points.shape[1])
  for _ in range(3):
    residuals = points - center
    factors = np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(residuals, axis=1), 1e-300))
    center = center + np.average(residuals * factors[:, None], axis=0, weights=weights)
  return center


def _rlr_mean(case, points, weights, location):
  """RobustLearningRateFactory(mean, theta=4): the weighted mean with the coordinates fewer than 4 clients agree on
  flipped (`core.rlr`): the single client's own update flipped, the others' as they come."""
  del case, location
  return rlr.aggregate(points, weights, 4)


_GATHERED_CASES = ('identical', 'single', 'outlier', 'zero')
_SPECS = {
    'geometric_median_mean': _Spec(
        lambda: geometric_median.GeometricMedianFactory(init='mean'),
        ('identical', 'single', 'symmetric', 'zero'),
    ),
    'geometric_median_zero': _Spec(
        lambda: geometric_median.GeometricMedianFactory(init='zero'), ('identical', 'single', 'zero')
    ),
    **{
        f'delta_median_{norm}_{solver}': _Spec(
            lambda norm=norm, solver=solver: delta_median.DeltaMedianFactory(
                norm, 0.5, solver=solver, max_iterations=3
            ),
            ('identical', 'single', 'symmetric', 'zero'),
        )
        for norm in delta_median.NORMS for solver in delta_median.SOLVERS
    },
    # Identical values share a key and so a bucket; bucket means of the other cases are not the location.
    'bucketing_geometric_median': _Spec(
        lambda: bucketing.BucketingFactory(geometric_median.GeometricMedianFactory(), bucket_size=2, max_clients=8),
        ('identical', 'single', 'zero'),
    ),
    'centered_clipping': _Spec(
        lambda: centered_clipping.CenteredClippingFactory(1.0, 3), ('identical', 'single', 'symmetric', 'zero'),
        expected=_centered_clipping,
    ),
    # No point of these cases is twice the median norm: the filter keeps them all.
    'norm_filter_centered_clipping': _Spec(
        lambda: norm_filter.NormFilterFactory(centered_clipping.CenteredClippingFactory(1.0, 3), 2.0),
        ('identical', 'single', 'symmetric', 'zero'), expected=_centered_clipping,
    ),
    'coordinate_median': _Spec(baselines.coordinate_median_factory, _ALL_CASES),
    'trimmed_mean': _Spec(lambda: baselines.trimmed_mean_factory(0.2), _ALL_CASES, minimum_clients=3),
    'multi_krum': _Spec(lambda: baselines.multi_krum_factory(1), _GATHERED_CASES, minimum_clients=5),
    'bulyan': _Spec(lambda: baselines.bulyan_factory(1), _GATHERED_CASES, minimum_clients=7),
    'nnm_coordinate_median': _Spec(
        lambda: nearest_neighbor_mixing.nearest_neighbor_mixing_factory(1, baselines.coordinate_median_factory()),
        _GATHERED_CASES, minimum_clients=2,
    ),
    'norm_clipping': _Spec(
        lambda: baselines.norm_clipping_factory(1.0), ('identical', 'single', 'symmetric', 'zero'),
        expected=_clipped_mean,
    ),
    # The noise of the defences against backdoors at 0 (their noise is tested against its distribution).
    'weak_dp': _Spec(
        lambda: weak_dp.norm_bounded_dp_factory(1.0, 0.0), ('identical', 'single', 'symmetric', 'zero'),
        expected=_clipped_mean,
    ),
    'rlr_mean': _Spec(
        lambda: robust_learning_rate.RobustLearningRateFactory(tff.aggregators.MeanFactory(no_nan_division=True), 4),
        ('identical', 'single', 'symmetric', 'zero'), expected=_rlr_mean,
    ),
    'flame': _Spec(lambda: flame.FlameFactory(0.0), _GATHERED_CASES),
    'exact_quantile': _Spec(lambda: quantile.exact_quantile_factory(0.5), _ALL_CASES),  # per coordinate
    'secure_quantile': _Spec(
        lambda: quantile.SecureQuantileFactory(0.5, num_passes=10),
        ('identical', 'single', 'symmetric', 'zero'),
        scalar=True,
        slack=0.01,  # the smoothed MM fixed point lies within nu = 1e-2 max(|c|, d) of c
    ),
    'secure_histogram_quantile': _Spec(
        lambda: histogram_quantile.SecureHistogramQuantileFactory(0.5),
        ('identical', 'single', 'symmetric', 'zero'),
        scalar=True,
        slack=0.03,  # the lower edge of a bin of width 2T / 256^2 in asinh(x) (T = 710 for float64) below c
    ),
    'update_corruption_omniscient': _Spec(
        lambda: update_corruption.UpdateCorruptionFactory(
            'omniscient', tff.aggregators.MeanFactory(no_nan_division=True)
        ),
        ('identical', 'single', 'symmetric', 'zero'),
    ),
}


def _value_type(name, value_key):
  if _SPECS[name].scalar:
    return _SCALAR_TYPES.get(value_key, _VALUE_TYPES[value_key])
  return _VALUE_TYPES[value_key]


def _wrapped(name, value_type):
  """The type the factory's `create` receives: UpdateCorruptionFactory takes <update, is_corrupted>."""
  if name.startswith('update_corruption'):
    return tff.StructType([value_type, tff.TensorType(np.bool_)])
  return value_type


def _leaf_types(type_spec):
  if isinstance(type_spec, tff.TensorType):
    return [type_spec]
  return [leaf for _, element in tff.structure.iter_elements(type_spec) for leaf in _leaf_types(element)]


def _described(type_spec):
  """Names, dtypes and shapes of a type, in its own order, ignoring the Python containers."""
  if isinstance(type_spec, tff.TensorType):
    return (np.dtype(type_spec.dtype).name, tuple(type_spec.shape))
  return tuple((name, _described(element)) for name, element in tff.structure.iter_elements(type_spec))


def _client_value(value_type, row):
  """`row` (float64, one entry per scalar of the type) as the Python value of `value_type`."""
  leaves, start = [], 0
  for leaf in _leaf_types(value_type):
    size = int(np.prod(leaf.shape, dtype=np.int64))
    leaves.append(np.asarray(row[start:start + size], leaf.dtype).reshape(leaf.shape))
    start += size
  return tff.types.type_to_py_container(_structured(value_type, iter(leaves)), value_type)


def _structured(type_spec, leaves):
  if isinstance(type_spec, tff.TensorType):
    return next(leaves)
  return tff.structure.Struct(
      [(name, _structured(element, leaves)) for name, element in tff.structure.iter_elements(type_spec)]
  )


def _flat_result(result, value_type):
  """The leaves of a returned value in the order of `value_type`, with their dtypes."""
  if isinstance(value_type, tff.TensorType):
    return [np.asarray(result)]
  leaves = []
  for index, (name, element) in enumerate(tff.structure.iter_elements(value_type)):
    part = result[name] if isinstance(result, dict) else result[index]
    leaves.extend(_flat_result(part, element))
  return leaves


def _dimension(value_type):
  return sum(int(np.prod(leaf.shape, dtype=np.int64)) for leaf in _leaf_types(value_type))


def _case(case, value_type, weight_dtype):
  """(points [m, d], weights [m], location): the closed-form input `case` and its location answer."""
  dimension = _dimension(value_type)
  fine = np.concatenate([np.full(int(np.prod(leaf.shape, dtype=np.int64)), leaf.dtype == np.float64)
                         for leaf in _leaf_types(value_type)])
  x = np.resize([1.5, -0.75, 2.25, 0.5, -1.125], dimension) + fine * np.resize([1, -3, 5], dimension) * 2.0**-30
  integer = np.issubdtype(np.dtype(weight_dtype), np.integer)
  if case == 'identical':
    weights = np.array([1, 3, 2, 5, 1, 4, 2]) if integer else np.array([0.5, 3.25, 1.0, 7.5, 0.25, 2.0, 1.5])
    return np.tile(x, (7, 1)), weights, x
  if case == 'single':
    return x[None], np.array([3]), x
  if case == 'symmetric':
    offsets = np.resize([0.25, -0.5, 0.125, 1.0, -0.375, 0.75, 0.5], (3, dimension)) * [[1], [2], [4]]
    return x + np.concatenate([np.zeros((1, dimension)), offsets, -offsets]), np.full(7, 2), x
  if case == 'outlier':
    points = np.tile(x, (7, 1))
    points[3] += 64.0
    return points, np.full(7, 2), x
  if case == 'zero':
    return np.stack([x, -x, 2 * x]), np.zeros(3), np.zeros(dimension)
  raise ValueError(case)


def _expected(name, case, points, weights, location):
  spec = _SPECS[name]
  if case == 'zero':
    return location
  if np.count_nonzero(weights) < spec.minimum_clients:
    return np.zeros_like(location)
  if spec.expected is not None:
    return spec.expected(case, points, weights, location)
  return location


def _refusal_reason(name, value_type):
  """Why `name` refuses `value_type`, or None: only the quantiles refuse (non-scalar values)."""
  if _SPECS[name].scalar and not (isinstance(value_type, tff.TensorType) and tuple(value_type.shape) == ()):
    return 'value_type'
  return None


def _check_cell(name, value_key, weight_dtype):
  value_type = _value_type(name, value_key)
  weight_type = tff.TensorType(np.dtype(weight_dtype))
  factory = _SPECS[name].build()
  refusal = _refusal_reason(name, value_type)
  if refusal is not None:
    with pytest.raises(TypeError, match=refusal) as error:
      factory.create(_wrapped(name, value_type), weight_type)
    assert 'must' in str(error.value)
    return
  process = factory.create(_wrapped(name, value_type), weight_type)
  assert _described(process.next.type_signature.result.result.member) == _described(value_type)
  initial_state = process.initialize()  # every case starts from it
  for case in _SPECS[name].cases:
    points, weights, location = _case(case, value_type, weight_dtype)
    values = [_client_value(value_type, row) for row in points]
    if name.startswith('update_corruption'):
      values = [[value, False] for value in values]
    output = process.next(initial_state, values, [np.dtype(weight_dtype).type(w) for w in weights])
    expected = _expected(name, case, points, weights, location)
    start, spread = 0, float(np.max(np.abs(points)))
    for leaf_type, leaf in zip(_leaf_types(value_type), _flat_result(output.result, value_type)):
      size = int(np.prod(leaf_type.shape, dtype=np.int64))
      assert leaf.dtype == leaf_type.dtype and leaf.shape == tuple(leaf_type.shape), (case, leaf_type, leaf)
      tolerance = 8 * np.finfo(leaf_type.dtype).eps
      np.testing.assert_allclose(
          leaf.ravel().astype(np.float64), expected[start:start + size], rtol=tolerance,
          atol=(tolerance + _SPECS[name].slack) * spread, err_msg=f'{name} {value_key} {weight_dtype} {case}',
      )
      start += size


@pytest.mark.parametrize('value_key, weight_dtype', _SIGNATURES)
@pytest.mark.parametrize('name', sorted(_SPECS))
def test_every_factory_gives_the_closed_form_answer_or_refuses_at_create(name, value_key, weight_dtype):
  _check_cell(name, value_key, weight_dtype)


@pytest.mark.parametrize('name', sorted(_SPECS))
def test_integer_values_are_refused_at_create_naming_the_type(name):
  value_type = tff.TensorType(np.int32, [] if _SPECS[name].scalar else _TENSOR_SHAPE)
  with pytest.raises(TypeError, match='value_type') as error:
    _SPECS[name].build().create(_wrapped(name, value_type), tff.TensorType(np.float32))
  assert 'int32' in str(error.value) and 'float' in str(error.value)


@pytest.mark.parametrize('name', sorted(_SPECS))
@pytest.mark.parametrize('weight_type', [tff.TensorType(np.bool_), tff.TensorType(np.float32, [2])],
                         ids=['bool', 'vector'])
def test_weights_that_are_not_real_scalars_are_refused_at_create_naming_the_type(name, weight_type):
  value_type = _value_type(name, 'float32')
  with pytest.raises(TypeError, match='weight_type') as error:
    _SPECS[name].build().create(_wrapped(name, value_type), weight_type)
  assert str(weight_type) in str(error.value) and 'scalar' in str(error.value)


# ---------------------------------------------------------------------------------------------------
# The unweighted sign-vote factories take a <signs, (weights,) seed> structure: float32 signs only.

_NUM_MODELS = 2
_SIGN_TYPES = {
    'float16': tff.TensorType(np.float16, [_NUM_MODELS, 3]),
    'float32': tff.TensorType(np.float32, [_NUM_MODELS, 3]),
    'float64': tff.TensorType(np.float64, [_NUM_MODELS, 3]),
    'odict': tff.to_type(collections.OrderedDict(
        z=(np.float32, [_NUM_MODELS]), a=[(np.float32, [_NUM_MODELS, 2]), ((np.float32, [_NUM_MODELS, 1]),)]
    )),
    'list': tff.to_type([(np.float32, [_NUM_MODELS, 2]), (np.float32, [_NUM_MODELS])]),
    'tuple': tff.to_type(((np.float32, [_NUM_MODELS, 1]), (np.float32, [_NUM_MODELS, 2]))),
    'mixed': tff.to_type([(np.float32, [_NUM_MODELS, 2]), (np.float64, [_NUM_MODELS])]),
}


def _sign_vote_type(kind, signs_type):
  fields = [('signs', signs_type)]
  if kind == 'weighted':
    fields.append(('weights', tff.TensorType(np.float32, [_NUM_MODELS])))
  return tff.StructType(fields + [('seed', tff.TensorType(np.int64, [2]))])


@pytest.mark.parametrize('signs_key', sorted(_SIGN_TYPES))
@pytest.mark.parametrize('kind', ['weighted', 'vote'])
def test_sign_vote_factories_sum_identical_float32_signs_or_refuse_other_dtypes_at_create(kind, signs_key):
  signs_type = _SIGN_TYPES[signs_key]
  value_type = _sign_vote_type(kind, signs_type)
  if kind == 'weighted':
    factory = sign_vote.WeightedSignVoteFactory(channels.ErrorFreeChannel())
  else:
    factory = sign_vote.MajorityVoteFactory(channels.ErrorFreeChannel())
  if any(leaf.dtype != np.float32 for leaf in _leaf_types(signs_type)):
    with pytest.raises(TypeError, match='signs must be a float32') as error:
      factory.create(value_type)
    assert str(signs_type) in str(error.value)
    return
  process = factory.create(value_type)
  assert _described(process.next.type_signature.result.result.member) == _described(signs_type)
  dimension = _dimension(signs_type)
  signs = np.resize([1.0, -1.0, -1.0], dimension)
  alphas = np.array([[0.25, 0.5], [0.125, 0.25], [0.625, 0.25]])  # three clients, a column per model
  values = []
  for client, alpha in enumerate(alphas):
    value = collections.OrderedDict(signs=_client_value(signs_type, signs))
    if kind == 'weighted':
      value['weights'] = alpha.astype(np.float32)
    value['seed'] = np.array([client, 7], np.int64)
    values.append(value)
  output = process.next(process.initialize(), values)
  start = 0
  for leaf_type, leaf in zip(_leaf_types(signs_type), _flat_result(output.result, signs_type)):
    size = int(np.prod(leaf_type.shape, dtype=np.int64))
    sent = signs[start:start + size].reshape(leaf_type.shape)
    if kind == 'weighted':  # row k of every tensor scaled by sum_m alpha_km
      expected = alphas.sum(axis=0).reshape([_NUM_MODELS] + [1] * (len(leaf_type.shape) - 1)) * sent
    else:
      expected = sent
    assert leaf.dtype == np.float32
    np.testing.assert_array_equal(leaf, expected)
    start += size
