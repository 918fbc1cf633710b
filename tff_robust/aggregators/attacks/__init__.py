"""Simulated update attacks, one module per attack, chosen by name through `registry`.

Simulation only: each attack is an adversary at the server that sees the round's updates (several gather them)
and replaces the corrupted clients' updates before the defence aggregates them
(`tff_robust.aggregators.update_corruption.UpdateCorruptionFactory`). Never a deployment component.
"""

from tff_robust import _lazy_submodules

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the submodules, on first use
