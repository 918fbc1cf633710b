"""The `StackedRule` of a runner aggregator, for the white-box attacks (line_search), where one is at hand.

The seam for the defences package: there every defence chain has `defences.stacked_rule(spec, ...)`; until the
runner builds its aggregators from those chains, this gives the rule of the aggregators whose stacked form
already exists: the weighted mean (`tff.aggregators.MeanFactory`, FedAvg) and the gather-based rules
(`gathering.GatheringRobustFactory.rule`: coordinate median, trimmed mean, multi-Krum, Bulyan), which ignore the
center. Other aggregators give None (the runner then refuses a white-box attack).
"""

from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import gathering
from tff_robust.aggregators.attacks import base


def _weighted_mean(points, weights, center):
  del center
  return tf.math.divide_no_nan(tf.linalg.matvec(points, weights, transpose_a=True), tf.reduce_sum(weights))


def stacked_rule(aggregator) -> Optional[base.StackedRule]:
  if isinstance(aggregator, gathering.GatheringRobustFactory):
    rule = aggregator.rule
    return lambda points, weights, center: rule(points, weights)
  if isinstance(aggregator, tff.aggregators.MeanFactory):
    return _weighted_mean
  return None
