"""NumPy references of the simulated update attacks (one module per attack) and their catalog of names and
parameters (`catalog`), with no TensorFlow: the runner checks an attack's spelling before it loads TensorFlow."""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the submodules, on first use
