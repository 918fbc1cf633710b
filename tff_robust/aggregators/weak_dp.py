"""Norm bounding with weak differential privacy (Sun, Kairouz, Suresh, McMahan, 2019, "Can You Really Backdoor
Federated Learning?", arXiv:1911.07963), secure-aggregation compatible.

    Δ = sum_k α_k Δ_k min(1, M / ||Δ_k||) / sum_k α_k  +  N(0, σ² I)

(`tff_robust.core.weak_dp` is the NumPy reference). Each client clips its own update to L2 norm M
(`norm_clipping.NormClippingFactory`, the norm over the whole update); the clipped updates are averaged by
`mean_factory`; the server adds the noise to the average (`gaussian_noise.GaussianNoiseFactory`), once per round,
seeded by the state. Noise on the aggregate, far below a meaningful (ε, δ) guarantee, is the paper's "weak" DP.
σ and M: one client moves the mean of n equally weighted clipped updates by at most M / n, so σ is the Gaussian
mechanism with noise multiplier z = σ n / M (`core.weak_dp.noise_multiplier`; TFF's
`DifferentiallyPrivateFactory.gaussian_fixed(z, n, M)` adds the same noise to equally weighted updates, unseeded).

Secure aggregation: every clipped entry lies in [-M, M], so with `mean_factory` of `SecureSumFactory`s bounded by
W M (`centered_clipping.secure_mean_factory(M, W)`, W the largest client weight) and
`count_factory=tff.aggregators.SecureSumFactory(1, 0)` every client value reaches the server through a secure
sum (`privacy.assert_client_values_aggregated_securely`); the noise is drawn at the server, after the sum.
"""

from typing import Optional

import tensorflow_federated as tff

from tff_robust.aggregators import gaussian_noise
from tff_robust.aggregators import norm_clipping
from tff_robust.aggregators import type_checks


def norm_bounded_dp_factory(
    norm_bound: float,
    noise_stddev: float,
    *,
    seed: int = 0,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> gaussian_noise.GaussianNoiseFactory:
  """The weighted mean of updates clipped to L2 norm `norm_bound` (M), plus N(0, noise_stddev² I) (σ).

  Args:
    norm_bound: M > 0, the bound on each client update's L2 norm.
    noise_stddev: σ >= 0, the standard deviation of the noise on each entry of the mean (0: the clipped mean).
    seed: an integer >= 0 seeding the noise (`gaussian_noise.GaussianNoiseFactory`).
    mean_factory: `NormClippingFactory`'s mean of the clipped updates (module docstring for secure sums).
    count_factory: `NormClippingFactory`'s sum of its 0/1 counts.

  Returns:
    A `GaussianNoiseFactory` around a `NormClippingFactory`; its measurements are the clipping's
    (`clipped_count`, `num_nonfinite_clients`, `secure_average_calls`, `mean`).

  Raises:
    ValueError: naming the argument, for a bound or standard deviation that is NaN, infinite or out of range.
  """
  norm_bound = type_checks.check_number('norm_bound', norm_bound, minimum=0.0, strict=True)
  clipped_mean = norm_clipping.NormClippingFactory(norm_bound, mean_factory=mean_factory, count_factory=count_factory)
  return gaussian_noise.GaussianNoiseFactory(clipped_mean, noise_stddev, seed=seed)
