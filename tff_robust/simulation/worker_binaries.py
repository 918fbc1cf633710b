"""Moved to `tff_robust.runtime.worker_binaries` (issue 34).

This old path is kept for now as the same module object, so that code importing it, patching it or reading its
state sees the one module.
"""

import sys

from tff_robust.runtime import worker_binaries

sys.modules[__name__] = worker_binaries
