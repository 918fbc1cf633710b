"""Min-max and min-sum (NumPy references): Shejwalkar & Houmansadr, "Manipulating the Byzantine: Optimizing Model
Poisoning Attacks and Defenses for Federated Learning", NDSS 2021, the AGR-agnostic attacks (the conditions below
are the paper's Min-Max and Min-Sum problems; their equation numbers were not checked: no copy of the paper's text
was at hand).

Every corrupted client sends x_m = mu + gamma p, mu the honest mean and p a perturbation direction
(`directions.perturbation`: inverse unit vector, inverse standard deviation or inverse sign), gamma the largest
value the paper's search finds with
  - min-max: max_{i honest} ||x_m - x_i|| <= max_{i, j honest} ||x_i - x_j||,
  - min-sum: sum_{i honest} ||x_m - x_i||^2 <= max_{i honest} sum_{j honest} ||x_i - x_j||^2.
The search is the paper's Algorithm 1 as its released code runs it: gamma = gamma_init, step = gamma_init; while
|gamma_succ - gamma| > tau: if the condition holds, gamma_succ = gamma and gamma += step / 2, else gamma -= step / 2;
step /= 2. gamma_succ starts at 0 (x_m = mu always satisfies both conditions), so gamma lies in [0, 2 gamma_init).
Defaults of the released code: gamma_init = 10, tau = 1e-5 (`catalog.DEFAULT_GAMMA_INIT`, `DEFAULT_GAMMA_TOLERANCE`).
(The released code's min-sum compares with the smallest honest sum; we follow the paper's Min-Sum problem, the largest.)

Knows: the round's honest updates and weights; not the defence (the attacks are aggregation-rule agnostic).
"""

from typing import Callable

import numpy as np

from tff_robust.core.attacks import directions
from tff_robust.core.attacks import honest_statistics


def halving_search(holds: Callable[[float], bool], gamma_init: float, tau: float) -> float:
  """The paper's Algorithm 1: the largest gamma it finds with `holds(gamma)`."""
  gamma, step, gamma_succ = gamma_init, gamma_init, 0.0
  while abs(gamma_succ - gamma) > tau:
    if holds(gamma):
      gamma_succ = gamma
      gamma += step / 2
    else:
      gamma -= step / 2
    step /= 2
  return gamma_succ


def _squared_distances(points, others):
  return np.sum((points[:, None, :] - others[None, :, :]) ** 2, axis=-1)


def target(updates, weights, corrupted, objective: str, direction: str, gamma_init: float, tau: float) -> np.ndarray:
  """x_m of `objective` 'min_max' or 'min_sum'; mu (zeros) with no honest client."""
  _, _, corrupted, honest, _ = honest_statistics.split(updates, weights, corrupted)
  mean, std = honest_statistics.mean_and_std(updates, weights, corrupted)
  if len(honest) == 0:
    return mean
  p = directions.perturbation(direction, mean, std)
  pairwise = _squared_distances(honest, honest)
  if objective == 'min_max':
    threshold = pairwise.max()
    holds = lambda gamma: _squared_distances((mean + gamma * p)[None], honest).max() <= threshold
  elif objective == 'min_sum':
    threshold = pairwise.sum(axis=1).max()
    holds = lambda gamma: _squared_distances((mean + gamma * p)[None], honest).sum() <= threshold
  else:
    raise ValueError(f'objective must be min_max or min_sum, got {objective!r}')
  return mean + halving_search(holds, gamma_init, tau) * p
