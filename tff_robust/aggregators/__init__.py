"""Robust aggregation factories (`tff.aggregators` style)."""

from tff_robust.aggregators.geometric_median import GeometricMedianFactory
from tff_robust.aggregators.quantile import SecureQuantileFactory
from tff_robust.aggregators.quantile import exact_quantile_factory
