"""tff_robust: robust and personalized federated learning as TensorFlow Federated objects.

Subpackages and their modules load on first use (`tff_robust.processes.build_rfa_process(...)`,
`tff_robust.aggregators.privacy`), so that light entry points such as the worker launcher do not import
TensorFlow.
"""

from tff_robust import _lazy_submodules

__version__ = '0.1.0'

__getattr__ = _lazy_submodules.submodule_getattr(__name__)
