"""Moved to `tff_robust.runtime.execution_context` (issue 34).

This old path is kept for now as the same module object, so that code importing it, patching it or reading its
state sees the one module.
"""

import sys

from tff_robust.runtime import execution_context

sys.modules[__name__] = execution_context
