"""NumPy reference of norm bounding with weak differential privacy (Sun, Kairouz, Suresh, McMahan, 2019, "Can You
Really Backdoor Federated Learning?", arXiv:1911.07963: its two defences, "norm thresholding of updates" and
"(weak) differential privacy", composed; equation numbers are not cited, as the paper's text could not be checked
here).

The server clips every client update Δ_k to L2 norm at most M, averages, and adds Gaussian noise to the average:

    Δ = sum_k α_k Δ_k min(1, M / ||Δ_k||) / sum_k α_k  +  N(0, σ² I).

Sun et al. average with equal weights α_k = 1 over the n clients of the round; here α_k are the clients' weights
(equal weights give theirs). The noise is added once, to the aggregate (the central model of differential
privacy), not to each update: that is the "weak" DP of the paper, noise far below what a meaningful (ε, δ)
guarantee needs, chosen to blur a backdoor's small direction rather than to protect privacy.

How σ relates to M: one client moves the equally weighted sum by at most M (its clipped update), so the mean by
at most M / n; Gaussian noise of standard deviation σ on the mean is the Gaussian mechanism with noise
multiplier z = σ n / M, the `noise_multiplier` of TFF's `DifferentiallyPrivateFactory.gaussian_fixed(z, n, M)`
and of TFF's research code for this paper (google-research/federated `targeted_attack`, whose
`GaussianAverageQuery(M, s, n)` adds N(0, s²) to the sum before dividing by n: σ = s / n).
"""

import numpy as np

from tff_robust.core import arc


def clipped_mean(points, weights, norm_bound: float) -> np.ndarray:
  """sum_k α_k clip(Δ_k, M) / sum_k α_k over the rows Δ_k of `points` [n, d] with `weights` α [n]; zeros if no
  weight is positive (a round with no client takes no step)."""
  points, weights = np.asarray(points, np.float64), np.asarray(weights, np.float64)
  total = weights.sum()
  if not total > 0:
    return np.zeros(points.shape[1])
  return weights @ arc.clip_to(points, norm_bound) / total


def aggregate(points, weights, norm_bound: float, noise_stddev: float, standard_normal) -> np.ndarray:
  """`clipped_mean` + σ z, z the given standard normal draws [d] (so that the reference is deterministic)."""
  return clipped_mean(points, weights, norm_bound) + noise_stddev * np.asarray(standard_normal, np.float64)


def noise_multiplier(noise_stddev: float, norm_bound: float, num_clients: int) -> float:
  """z = σ n / M: the Gaussian mechanism's noise multiplier of noise σ on the mean of n equally weighted
  updates clipped to M (module docstring)."""
  return noise_stddev * num_clients / norm_bound
