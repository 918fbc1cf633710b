"""tff_robust: robust and personalized federated learning as TensorFlow Federated objects.

Subpackages load on first use (`tff_robust.processes.build_rfa_process(...)`), so that light entry points
such as the worker launcher do not import TensorFlow.
"""

import importlib

__version__ = '0.1.0'

_SUBPACKAGES = ('aggregators', 'core', 'processes', 'simulation')


def __getattr__(name):
  if name in _SUBPACKAGES:
    return importlib.import_module(f'tff_robust.{name}')
  raise AttributeError(f'module tff_robust has no attribute {name!r}')
