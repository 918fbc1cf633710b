"""Robust aggregation factories (`tff.aggregators` style)."""

from tff_robust.aggregators.geometric_median import GeometricMedianFactory
