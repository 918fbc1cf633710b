"""NumPy reference of the robust learning rate (RLR; Özdayi, Kantarcioglu, Gel, AAAI 2021, "Defending against
Backdoors in Federated Learning with Robust Learning Rate", arXiv:2007.03767: the robust learning rate η_θ and the
server update with it; as the authors' code computes it, TinfoilHat0/Defending-Against-Backdoors-with-Robust-
Learning-Rate, `src/aggregation.py`, read, not copied).

With n client updates Δ_k and learning threshold θ, the server's learning rate for coordinate i is

    η_θ,i = +η  if |sum_k sgn(Δ_k,i)| >= θ,   -η  otherwise,                                    (RLR)

and the model moves by η_θ ⊙ (sum_k α_k Δ_k / sum_k α_k): where too few clients agree on a coordinate's sign
the step is taken backwards, against the direction a minority (e.g. backdoor attackers) pushes. The sign sum
counts clients, not weights (sgn(0) = 0; a client of weight 0 takes no part and does not vote); the mean uses
the clients' weights α_k (the paper's code weighs by local data size). Here the aggregate is the sign vector
s ⊙ mean, s_i = η_θ,i / η in {+1, -1}: the server optimizer's learning rate η multiplies it, so the server
steps by η_θ ⊙ mean as in the paper. θ = 0 never flips (FedAvg); θ > n always flips.
"""

import numpy as np


def sign_votes(points, weights) -> np.ndarray:
  """sum_k sgn(Δ_k,i) per coordinate i over the rows of `points` [n, d] whose weight is positive."""
  points, weights = np.asarray(points, np.float64), np.asarray(weights, np.float64)
  return np.sign(points[weights > 0]).sum(axis=0)


def learning_rate_signs(points, weights, threshold: int) -> np.ndarray:
  """s_i = +1 where |sign_votes_i| >= θ, else -1 (η_θ,i / η)."""
  return np.where(np.abs(sign_votes(points, weights)) >= threshold, 1.0, -1.0)


def aggregate(points, weights, threshold: int) -> np.ndarray:
  """s ⊙ sum_k α_k Δ_k / sum_k α_k (zeros if no weight is positive)."""
  points, weights = np.asarray(points, np.float64), np.asarray(weights, np.float64)
  total = weights.sum()
  mean = weights @ points / total if total > 0 else np.zeros(points.shape[1])
  return learning_rate_signs(points, weights, threshold) * mean
