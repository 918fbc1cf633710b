"""Norm-aware scaling (NumPy reference): an attack's direction at a chosen multiple of the honest median norm.

v = t / ||t|| * c * r, t the target of the omniscient attack, IPM or ALIE (`directions`) and r the honest
updates' weighted median norm (`honest_statistics.median_norm`); v = 0 where t = 0. It is the attacker that knows a
norm filter's multiplier k (c just below k passes a filter whose median the honest clients set) or a clipping
radius (c r at the radius). Knows: the round's honest updates and weights, and the defence's k or radius
through c.
"""

import numpy as np

from tff_robust.core.attacks import directions
from tff_robust.core.attacks import honest_statistics


def target(updates, weights, corrupted, direction: str, c: float) -> np.ndarray:
  """The `direction`'s target rescaled to `c` times the honest weighted median norm (zeros where the target is 0)."""
  if direction == 'omniscient':
    t = directions.omniscient_target(updates, weights, corrupted)
  elif direction == 'ipm':
    t = directions.ipm_target(updates, weights, corrupted, 1.0)
  elif direction == 'alie':
    t = directions.alie_target(updates, weights, corrupted)
  else:
    raise ValueError(f'direction must be omniscient, ipm or alie, got {direction!r}')
  norm = np.linalg.norm(t)
  radius = c * honest_statistics.median_norm(updates, weights, corrupted)
  return t * (radius / norm) if norm > 0 else np.zeros_like(t)
