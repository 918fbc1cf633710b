"""Choosing the corrupted clients (RFA paper, Sec. 5.1); the attacks' NumPy references are `core.attacks`.

The corruption level rho of eq. (5) is a share of the total data *weight*, not of the client count:
rho = sum_{i in C} alpha_i / sum_i alpha_i. App. D.2.1: add uniformly random clients to C until their weight
first reaches rho; C is fixed for the whole run.
"""

from typing import Sequence

import numpy as np


def select_corrupted_clients(
    client_ids: Sequence[str], client_weights: Sequence[float], fraction: float, seed: int
) -> frozenset[str]:
  """The shortest prefix of a seeded random order of `client_ids` whose weight share reaches `fraction`."""
  if not 0 <= fraction <= 1:
    raise ValueError(f'corruption fraction must be in [0, 1], got {fraction}')
  if len(client_ids) != len(client_weights):
    raise ValueError(f'{len(client_ids)} client ids but {len(client_weights)} weights')
  weights = np.asarray(client_weights, np.float64)
  if fraction == 0:
    return frozenset()
  order = np.random.default_rng(seed).permutation(len(client_ids))
  shares = np.cumsum(weights[order]) / weights.sum()
  count = int(np.searchsorted(shares, fraction * (1 - 1e-12))) + 1
  return frozenset(client_ids[i] for i in order[:count])

