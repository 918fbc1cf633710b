"""Moved to `tff_robust.runtime.composing_context` (issue 34).

This old path is kept for now as the same module object, so that code importing it, patching it or reading its
state sees the one module.
"""

import sys

from tff_robust.runtime import composing_context

sys.modules[__name__] = composing_context
