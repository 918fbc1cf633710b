"""The command line of the package's binaries (the runner, sweeps, tables, benchmarks, `worker_service`):
`finite_flags` parses it with absl and refuses NaN and infinite float flags; `seeds` bounds seeds to what NumPy
takes.

The bottom layer: it imports no other `tff_robust` package and no TensorFlow, so every layer and every binary,
`tff_robust.runtime.worker_service` included, may use it.
"""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)
