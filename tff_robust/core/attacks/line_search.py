"""White-box line search on an attack's scale (NumPy reference), ByzFL's "optimal" ALIE and IPM (Allouah et al.,
"Fixing by mixing", AISTATS 2023, used them; ByzFL's `Optimal_ALittleIsEnough`, `Optimal_InnerProductManipulation`).

Every corrupted client sends x(s) = b + s q for the scale s in [0, s_max] that maximises
  J(s) = || F(x_1, ..., x(s), ..., x(s); alpha; v_{t-1}) - mu ||,
F the defence's stacked rule (`StackedRule`: the round's updates with the corrupted rows replaced, the clients'
weights and the previous aggregate), mu the honest weighted mean. Directions (b, q): 'alie' (mu, -sigma), so s
is ALIE's z; 'ipm' (0, -mu), s is IPM's epsilon; 'unit_vec' (mu, -mu / ||mu||); 'sign' (mu, -sign(mu)).

Search: J on the fixed grid s_k = k s_max / (G - 1), k = 0..G-1 (G = `grid`), then `refinements` steps of a
golden-section search for a maximum on [s_{k*-1}, s_{k*+1}] around the best grid point k*; the result is the best
s evaluated, so J(result) >= max_k J(s_k). (ByzFL instead expands a step from s = 0 while J grows, then
contracts it by 0.8 for its remaining evaluations, 20 in all; a fixed grid does not stop at the first local
maximum.) Defaults s_max = 10, G = 11, 12 refinements: 11 + 2 + 12 = 25 evaluations of F a round.

Knows: the round's honest updates and weights, the previous aggregate and the defence (its rule and parameters).
"""

import math
from typing import Callable

import numpy as np

from tff_robust.core.attacks import honest_statistics

GOLDEN = (math.sqrt(5) - 1) / 2


def base_and_direction(direction: str, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The line's base b and direction q: alie (mu, -sigma), ipm (0, -mu), unit_vec (mu, -mu/||mu||), sign (mu,
  -sign(mu))."""
  if direction == 'alie':
    return mean, -std
  if direction == 'ipm':
    return np.zeros_like(mean), -mean
  if direction == 'unit_vec':
    norm = np.linalg.norm(mean)
    return mean, (-mean / norm if norm > 0 else np.zeros_like(mean))
  if direction == 'sign':
    return mean, -np.sign(mean)
  raise ValueError(f'direction must be alie, ipm, unit_vec or sign, got {direction!r}')


def maximise(objective: Callable[[float], float], max_scale: float, grid: int, refinements: int) -> float:
  """The best scale found: grid, then golden-section steps on the bracket around the best grid point."""
  scales = np.linspace(0.0, max_scale, int(grid))
  values = [objective(s) for s in scales]
  k = int(np.argmax(values))
  best_scale, best_value = scales[k], values[k]
  if refinements <= 0:
    return float(best_scale)
  low, high = scales[max(k - 1, 0)], scales[min(k + 1, len(scales) - 1)]
  x1, x2 = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
  f1, f2 = objective(x1), objective(x2)
  for x, f in ((x1, f1), (x2, f2)):
    if f > best_value:
      best_scale, best_value = x, f
  for _ in range(int(refinements)):
    if f1 >= f2:
      high, x2, f2 = x2, x1, f1
      x1 = high - GOLDEN * (high - low)
      x, f1 = x1, objective(x1)
      f = f1
    else:
      low, x1, f1 = x1, x2, f2
      x2 = low + GOLDEN * (high - low)
      x, f2 = x2, objective(x2)
      f = f2
    if f > best_value:
      best_scale, best_value = x, f
  return float(best_scale)


def objective_fn(updates, weights, corrupted, previous, rule: Callable, base, step):
  """J(s) of the module docstring for the rule `rule(points, weights, center) -> [d]` (NumPy arrays)."""
  updates, weights, corrupted, _, _ = honest_statistics.split(updates, weights, corrupted)
  mean, _ = honest_statistics.mean_and_std(updates, weights, corrupted)

  def objective(scale):
    attacked = updates.copy()
    attacked[corrupted] = base + scale * step
    return float(np.linalg.norm(np.asarray(rule(attacked, weights, previous), np.float64) - mean))

  return objective


def target(updates, weights, corrupted, previous, rule: Callable, direction: str, max_scale: float, grid: int,
           refinements: int) -> np.ndarray:
  """The corrupted update b + s* q, s* maximising the distance of `rule`'s output from the honest mean (grid, then
  golden-section refinements)."""
  mean, std = honest_statistics.mean_and_std(updates, weights, corrupted)
  base, step = base_and_direction(direction, mean, std)
  objective = objective_fn(updates, weights, corrupted, previous, rule, base, step)
  return base + maximise(objective, max_scale, grid, refinements) * step
