"""NumPy reference of adaptive robust clipping (ARC; Allouah, Guerraoui, Gupta, Jellouli, Rizk, Stephan, 2024,
"The Vital Role of Gradient Clipping in Byzantine-Resilient Distributed Learning", arXiv:2405.14432, Algorithm 1).

Given n input vectors x_1, ..., x_n of which at most f are Byzantine, ARC clips the k = floor(2 (f/n) (n - f))
vectors of largest L2 norm to the norm of the next one: with pi sorting the norms in non-decreasing order,
||x_pi(1)|| <= ... <= ||x_pi(n)||, the threshold is C = ||x_pi(n-k)|| (the (k+1)-th largest norm) and every
vector becomes x_i min(1, C / ||x_i||). The vectors below C are unchanged, so for k = 0 (f = 0) ARC is the
identity. ARC is a pre-aggregation step: the robust rule then aggregates the clipped vectors. The paper counts
vectors, not weights: k does not depend on the clients' weights.
"""

import numpy as np


def clipped_count(num_clients: int, num_byzantine: int) -> int:
  """k = floor(2 (f/n) (n - f)), in integer arithmetic; requires n >= 1 and 0 <= f < n/2."""
  check_counts(num_clients, num_byzantine)
  return (2 * num_byzantine * (num_clients - num_byzantine)) // num_clients


def check_counts(num_clients: int, num_byzantine: int) -> None:
  """Raises ValueError unless n >= 1 and 0 <= f < n/2 (ARC's and every robust rule's breakdown point)."""
  if isinstance(num_clients, bool) or not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f'num_clients must be an integer >= 1, got {num_clients!r}')
  if (isinstance(num_byzantine, bool) or not isinstance(num_byzantine, (int, np.integer))
      or not 0 <= 2 * num_byzantine < num_clients):
    raise ValueError(f'num_byzantine must be an integer f with 0 <= f < num_clients / 2 = {num_clients / 2}, '
                     f'got {num_byzantine!r}')


def threshold(norms, num_byzantine: int) -> float:
  """C = the (k+1)-th largest of the n `norms` (k = `clipped_count(n, f)`)."""
  norms = np.sort(np.asarray(norms, np.float64).reshape(-1))
  return float(norms[len(norms) - clipped_count(len(norms), num_byzantine) - 1])


def clip_to(points, clip_norm: float) -> np.ndarray:
  """Each row x_i of `points` [n, d] scaled by min(1, clip_norm / ||x_i||) (a zero row stays zero)."""
  points = np.asarray(points, np.float64)
  norms = np.linalg.norm(points, axis=1)
  factors = np.where(norms > clip_norm, clip_norm / np.where(norms > 0, norms, 1.0), 1.0)
  return points * factors[:, None]


def adaptive_robust_clipping(points, num_byzantine: int) -> np.ndarray:
  """ARC_f(x_1, ..., x_n): the rows of `points` [n, d] clipped to `threshold` of their norms."""
  points = np.asarray(points, np.float64)
  return clip_to(points, threshold(np.linalg.norm(points, axis=1), num_byzantine))


def quantile_level(num_clients: int, num_byzantine: int) -> float:
  """The level tau = (n - k - 1/2) / n at which the 'upper' quantile of n equally weighted norms is C.

  The upper weighted tau-quantile (`core.superquantile.weighted_quantile(..., end='upper')`) of n values of
  weight 1 is the smallest sorted value whose cumulative count exceeds tau n: the (n - k)-th smallest, i.e. C,
  for any tau n in [n - k - 1, n - k); the midpoint keeps a margin of half a client on both sides.
  """
  return (num_clients - clipped_count(num_clients, num_byzantine) - 0.5) / num_clients
