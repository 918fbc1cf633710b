"""Robust aggregation factories (`tff.aggregators` style)."""

from tff_robust.aggregators.channels import BinarySymmetricChannel
from tff_robust.aggregators.channels import BlockOutageChannel
from tff_robust.aggregators.channels import Channel
from tff_robust.aggregators.channels import ErrorFreeChannel
from tff_robust.aggregators.channels import RayleighBPSKChannel
from tff_robust.aggregators.channels import create_channel
from tff_robust.aggregators.geometric_median import GeometricMedianFactory
from tff_robust.aggregators.quantile import SecureQuantileFactory
from tff_robust.aggregators.quantile import exact_quantile_factory
from tff_robust.aggregators.sign_vote import MajorityVoteFactory
from tff_robust.aggregators.sign_vote import WeightedSignVoteFactory
