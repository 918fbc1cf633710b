"""White-box line search on an attack's scale against the defence's own rule (ByzFL's optimal ALIE / IPM).

Every corrupted client sends b + s q, s in [0, s_max] maximising J(s) = ||F(updates with the corrupted rows
b + s q; weights; v_{t-1}) - mu|| over a fixed grid of G scales, then `refinements` golden-section steps on the
bracket around the best grid point, keeping the best scale evaluated (so J never falls below the grid's best).
F is the defence's `StackedRule` (called on float32 tensors, as the defences package defines it), v_{t-1} the
previous round's aggregate (kept in the wrapper's state). Directions, search and what the attacker knows:
`tff_robust.core.attacks.line_search` (the NumPy reference). Gathers the updates (simulation only).
"""

import math

import tensorflow as tf

from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics

GOLDEN = (math.sqrt(5) - 1) / 2


def base_and_direction(direction: str, mean, std):
  """The line's base b and direction q for `direction`: alie (mu, -sigma), ipm (0, -mu), unit_vec (mu, -mu/||mu||), sign
  (mu, -sign(mu))."""
  if direction == 'alie':
    return mean, -std
  if direction == 'ipm':
    return tf.zeros_like(mean), -mean
  if direction == 'unit_vec':
    return mean, -tf.math.divide_no_nan(mean, tf.norm(mean))
  if direction == 'sign':
    return mean, -tf.sign(mean)
  raise ValueError(f'direction must be alie, ipm, unit_vec or sign, got {direction!r}')


def maximise(objective, max_scale: float, grid: int, refinements: int):
  """The best scale (float64): `objective` on the grid, then golden-section steps around its best point."""
  scales = tf.linspace(tf.constant(0.0, tf.float64), max_scale, grid)
  values = tf.map_fn(objective, scales)
  k = tf.argmax(values, output_type=tf.int32)
  best = (scales[k], values[k])
  if refinements <= 0:
    return best[0]
  low, high = scales[tf.maximum(k - 1, 0)], scales[tf.minimum(k + 1, grid - 1)]
  x1, x2 = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
  f1, f2 = objective(x1), objective(x2)
  keep = lambda best, x, f: (tf.where(f > best[1], x, best[0]), tf.maximum(f, best[1]))
  best = keep(keep(best, x1, f1), x2, f2)

  def step(i, low, high, x1, x2, f1, f2, best_scale, best_value):
    left = f1 >= f2  # the maximum is in [low, x2]: x2 <- x1, a new x1; else in [x1, high]
    new_low, new_high = tf.where(left, low, x1), tf.where(left, x2, high)
    new_x = tf.where(left, new_high - GOLDEN * (new_high - new_low), new_low + GOLDEN * (new_high - new_low))
    new_f = objective(new_x)
    x1, f1, x2, f2 = (tf.where(left, new_x, x2), tf.where(left, new_f, f2),
                      tf.where(left, x1, new_x), tf.where(left, f1, new_f))
    best_scale, best_value = keep((best_scale, best_value), new_x, new_f)
    return i + 1, new_low, new_high, x1, x2, f1, f2, best_scale, best_value

  result = tf.while_loop(lambda i, *_: i < refinements, step, (0, low, high, x1, x2, f1, f2, *best))
  return result[-2]


class LineSearchAttack(gathered.GatheredAttack):
  """The white-box line search as a gathered attack: b + s q with the scale s that moves the defence's `stacked_rule`
  output furthest from the honest mean."""

  uses_previous_aggregate = True

  def __init__(self, stacked_rule: base.StackedRule, direction: str, max_scale: float, grid: int, refinements: int):
    if not callable(stacked_rule):
      raise ValueError(f'line_search needs the defence\'s stacked rule (a callable), got {stacked_rule!r}')
    self._rule, self._direction = stacked_rule, direction
    self._max_scale, self._grid, self._refinements = float(max_scale), int(grid), int(refinements)

  def payload(self, points, weights, corrupted, previous):
    """The corrupted update b + s* q [d]: a grid over [0, max_scale], then golden-section refinements."""
    honest = stacked_statistics.honest_mask(points, weights, corrupted)
    mean, std = stacked_statistics.mean_and_std(points, weights, honest)
    start, step = base_and_direction(self._direction, mean, std)
    weights32, previous32 = tf.cast(weights, tf.float32), tf.cast(previous, tf.float32)

    def objective(scale):
      attacked = tf.where(corrupted[:, None], start + scale * step, points)
      output = tf.cast(self._rule(tf.cast(attacked, tf.float32), weights32, previous32), tf.float64)
      return tf.norm(output - mean)

    return start + maximise(objective, self._max_scale, self._grid, self._refinements) * step
