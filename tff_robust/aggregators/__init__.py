"""Robust aggregation factories (`tff.aggregators` style).

The names below and every submodule load on first use, so that TensorFlow-free modules of this package (the
defence registry, `defences.registry`) can be imported by a runner before it loads TensorFlow.
"""

import importlib

from tff_robust import _lazy_submodules

_NAMES = {
    'BinarySymmetricChannel': 'channels', 'BlockOutageChannel': 'channels', 'Channel': 'channels',
    'ErrorFreeChannel': 'channels', 'RayleighBPSKChannel': 'channels', 'create_channel': 'channels',
    'GeometricMedianFactory': 'geometric_median', 'SecureHistogramQuantileFactory': 'histogram_quantile',
    'SecureQuantileFactory': 'quantile', 'SecureGeometricMedianFactory': 'secure_geometric_median',
    'exact_quantile_factory': 'quantile', 'MajorityVoteFactory': 'sign_vote',
    'WeightedSignVoteFactory': 'sign_vote',
}
_submodule = _lazy_submodules.submodule_getattr(__name__)


def __getattr__(name):  # pylint: disable=invalid-name
  if name in _NAMES:
    return getattr(importlib.import_module(f'{__name__}.{_NAMES[name]}'), name)
  return _submodule(name)


def __dir__():
  return sorted(set(globals()) | set(_NAMES))
