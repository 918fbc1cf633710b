"""Where computations run: TFF execution contexts on a local worker this process owns or on remote workers
(`execution_context`, `composing_context`), the worker's launcher (network isolation, death with its parent),
`worker_service`, and which worker binary runs client computations where (`worker_binaries`, `gpu_placement`).

This package imports no `tff_robust` layer but
`command_line` (`worker_service` parses its flags with `finite_flags`), and imports nothing up front: the launcher
and `worker_service` run without TensorFlow.
"""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)
