"""Choosing the corrupted clients (RFA paper, Sec. 5.1); the attacks' NumPy references are `core.attacks`.

The corruption level rho of eq. (5) is a share of the total data *weight*, not of the client count:
rho = sum_{i in C} alpha_i / sum_i alpha_i. App. D.2.1: add uniformly random clients to C until their weight
first reaches rho; C is fixed for the whole run. `AttackWindow` limits the rounds in which C attacks (the
durability of a backdoor after its attackers stop: Bagdasaryan et al. 2020, Sec. 5; Zhang et al. 2022).
"""

import dataclasses
from typing import Optional, Sequence

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



@dataclasses.dataclass(frozen=True)
class AttackWindow:
  """The rounds `start`..`end` (1-based, both included; `end` None: to the last round) in which the corrupted
  clients attack; in the other rounds they behave as honest clients (their clean data, their own updates).

  Raises:
    ValueError: naming `start_round` or `end_round`: a start below 1, an end below the start (or below 1).
  """

  start: int = 1
  end: Optional[int] = None

  def __post_init__(self):
    if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 1:
      raise ValueError(f'start_round must be an integer >= 1, got {self.start!r}')
    if self.end is not None and (isinstance(self.end, bool) or not isinstance(self.end, int) or self.end < self.start):
      raise ValueError(f'end_round must be an integer >= start_round ({self.start}), or unset, got {self.end!r}')

  @property
  def whole_run(self) -> bool:
    """Whether the corrupted clients attack in every round."""
    return self.start == 1 and self.end is None

  def active(self, round_num: int) -> bool:
    """Whether the corrupted clients attack in round `round_num`."""
    return self.start <= round_num and (self.end is None or round_num <= self.end)
