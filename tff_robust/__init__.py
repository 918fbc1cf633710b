"""tff_robust: robust and personalized federated learning as TensorFlow Federated objects.

Subpackages and their modules load on first use (`tff_robust.processes.build_rfa_process(...)`,
`tff_robust.aggregators.privacy`), so that light entry points such as the worker launcher do not import
TensorFlow. Importing it registers an exit hook that discards TFF's import-time context before interpreter
shutdown (`_quiet_exit`): a script that imported TFF then exits without TFF's "Exception ignored ... Popen" and
without leaving TFF's worker running. It also drops TensorFlow's "Object was never used" report of the unused assert
in TFF's secure sum, about 12 lines per secure sum traced, and nothing else (`_unused_assert_log`).
"""

from tff_robust import _lazy_submodules
from tff_robust import _quiet_exit
from tff_robust import _unused_assert_log

__version__ = '0.1.0'

__getattr__ = _lazy_submodules.submodule_getattr(__name__)
_quiet_exit.register()
_unused_assert_log.register()
