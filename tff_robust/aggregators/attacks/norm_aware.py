"""Norm-aware scaling: the omniscient, IPM or ALIE direction at c times the honest weighted median norm.

v = t / ||t|| * c * r (v = 0 where t = 0), t the direction's target (`stacked_statistics`: the omniscient
-(2 S_G + S_C) / A_C, IPM's -mu, ALIE's mu - z_max sigma) and r the honest updates' weighted median L2 norm. The
attacker that knows a norm filter's multiplier k sends c just below k (while the honest clients hold the
filter's median, it passes), one that knows a clipping radius sends c r at it. NumPy reference:
`tff_robust.core.attacks.norm_aware.target`. Knows: the round's honest updates and weights, and the defence's
norm bound through c. Gathers the updates (simulation only).
"""

import tensorflow as tf

from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


class NormAwareAttack(gathered.GatheredAttack):
  """Norm-aware scaling as a gathered attack: the omniscient, IPM or ALIE target rescaled to `c` times the honest
  weighted median norm."""

  def __init__(self, direction: str, c: float):
    self._direction, self._c = direction, float(c)

  def payload(self, points, weights, corrupted, previous):
    """The rescaled target t / ||t|| * c * r [d] (zeros where t = 0)."""
    honest = stacked_statistics.honest_mask(points, weights, corrupted)
    if self._direction == 'omniscient':
      target = stacked_statistics.omniscient_target(points, weights, corrupted)
    elif self._direction == 'ipm':
      target = -stacked_statistics.mean_and_std(points, weights, honest)[0]
    else:
      target = stacked_statistics.alie_target(points, weights, corrupted, honest)
    radius = self._c * stacked_statistics.median_norm(points, weights, honest)
    return tf.math.divide_no_nan(target * radius, tf.norm(target))
