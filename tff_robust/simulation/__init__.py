"""Simulation support: the training loop, checkpoints, client pipelines and the client-state store (tasks:
`tff_robust.tasks`; execution: `tff_robust.runtime`)."""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the other submodules, on first use
