"""Moved to `tff_robust.command_line.finite_flags` (issue 34).

This old path is kept for now as the same module object, so that code importing it, patching it or reading its
state sees the one module.
"""

import sys

from tff_robust.command_line import finite_flags

sys.modules[__name__] = finite_flags
