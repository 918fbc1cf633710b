"""Pure numeric pieces with no TFF dependency, used as references by the tests."""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the other submodules, on first use
