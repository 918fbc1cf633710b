"""Robust-aggregation baselines of the RFA paper's Fig. 3 and of other FL frameworks, as TFF factories.

Coordinate-wise median and trimmed mean (Yin et al., 2018), multi-Krum (Blanchard et al., 2017), Bulyan
(El Mhamdi et al., 2018): gather-based, NOT secure-aggregation compatible (see `gathering`). Norm clipping
(Sun et al., 2019) clips each update before a weighted mean and is secure-compatible (see `norm_clipping`).
"""

from typing import Optional

from tff_robust.aggregators import gathering
from tff_robust.aggregators import norm_clipping
from tff_robust.aggregators import robust_rules
from tff_robust.aggregators import type_checks


def coordinate_median_factory() -> gathering.GatheringRobustFactory:
  """Per-coordinate weighted median of the client updates."""
  return gathering.GatheringRobustFactory(
      'coordinate_median', robust_rules.coordinate_median, lambda m: m >= 1, 'at least 1 client'
  )


def trimmed_mean_factory(trim_fraction: float) -> gathering.GatheringRobustFactory:
  """Per coordinate, weighted mean after dropping k = ceil(trim_fraction * m) values at each end."""
  trim_fraction = type_checks.check_number(
      'trim_fraction', trim_fraction, minimum=0.0, maximum=0.5, strict_maximum=True
  )
  return gathering.GatheringRobustFactory(
      'trimmed_mean',
      lambda points, weights: robust_rules.coordinate_trimmed_mean(points, weights, trim_fraction),
      lambda m: 2 * robust_rules.trimmed_mean_count(m, trim_fraction) < m,
      f'2 * ceil({trim_fraction} * m) < m clients',
  )


def multi_krum_factory(num_byzantine: int, num_selected: Optional[int] = None) -> gathering.GatheringRobustFactory:
  """Weighted mean of the `num_selected` (default m - num_byzantine) updates of lowest Krum score."""
  type_checks.check_integer('num_byzantine', num_byzantine, minimum=0)
  if num_selected is not None:
    type_checks.check_integer('num_selected', num_selected, minimum=1)
  minimum = 2 * num_byzantine + 3 if num_selected is None else max(2 * num_byzantine + 3, num_selected)
  return gathering.GatheringRobustFactory(
      'multi_krum',
      lambda points, weights: robust_rules.multi_krum(points, weights, num_byzantine, num_selected),
      lambda m: m >= minimum,
      f'at least {minimum} clients (2 * num_byzantine + 3, and num_selected)',
  )


def bulyan_factory(num_byzantine: int) -> gathering.GatheringRobustFactory:
  """Bulyan: repeated-Krum selection (at least one Krum neighbour, see `robust_statistics.bulyan`), then a
  per-coordinate mean of the values closest to the median."""
  type_checks.check_integer('num_byzantine', num_byzantine, minimum=0)
  minimum = 4 * num_byzantine + 3
  return gathering.GatheringRobustFactory(
      'bulyan',
      lambda points, weights: robust_rules.bulyan(points, weights, num_byzantine),
      lambda m: m >= minimum,
      f'at least 4 * num_byzantine + 3 = {minimum} clients',
  )


def norm_clipping_factory(clipping_norm: float) -> norm_clipping.NormClippingFactory:
  """Scales each update by min(1, clipping_norm / ||update||), then takes the weighted mean."""
  return norm_clipping.NormClippingFactory(clipping_norm)
