"""Robust aggregation factories (`tff.aggregators` style)."""

from tff_robust import _lazy_submodules
from tff_robust.aggregators.channels import BinarySymmetricChannel
from tff_robust.aggregators.channels import BlockOutageChannel
from tff_robust.aggregators.channels import Channel
from tff_robust.aggregators.channels import ErrorFreeChannel
from tff_robust.aggregators.channels import RayleighBPSKChannel
from tff_robust.aggregators.channels import create_channel
from tff_robust.aggregators.geometric_median import GeometricMedianFactory
from tff_robust.aggregators.histogram_quantile import SecureHistogramQuantileFactory
from tff_robust.aggregators.quantile import SecureQuantileFactory
from tff_robust.aggregators.secure_geometric_median import SecureGeometricMedianFactory
from tff_robust.aggregators.quantile import exact_quantile_factory
from tff_robust.aggregators.sign_vote import MajorityVoteFactory
from tff_robust.aggregators.sign_vote import WeightedSignVoteFactory

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the other submodules, on first use
