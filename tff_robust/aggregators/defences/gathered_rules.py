"""The gather-based rules of the registry (NOT secure-aggregation compatible): coordinate median, trimmed mean,
Krum / multi-Krum, Bulyan.

Each factory is the `baselines` one (`gathering.GatheringRobustFactory`); each stacked form is that factory's
own TensorFlow rule applied as the factory applies it (`gathering.apply_to_usable_rows`: rows that are not
finite or have weight 0 are dropped, and too few rows give zeros), so the two agree by construction.
"""

import tensorflow as tf

from tff_robust.aggregators import baselines
from tff_robust.aggregators import gathering
from tff_robust.aggregators.defences import implementations


def _stacked_from(build):
  """The stacked form of the `GatheringRobustFactory` that `build(arguments, None, context)` returns."""

  def stacked(arguments, context):
    factory = build(arguments, None, context)

    def rule(points, weights, center):
      del center
      vector = gathering.apply_to_usable_rows(factory.rule, factory.accepts_num_clients, points, weights)[0]
      return tf.where(tf.math.is_finite(vector), vector, tf.zeros_like(vector))

    return rule

  return stacked


def _gathered(build):
  return implementations.Implementation(build, _stacked_from(build))


MEDIAN = _gathered(lambda arguments, inner, context: baselines.coordinate_median_factory())
TRIMMED_MEAN = _gathered(lambda arguments, inner, context: baselines.trimmed_mean_factory(arguments['beta']))
KRUM = _gathered(lambda arguments, inner, context: baselines.multi_krum_factory(
    arguments['f'], arguments['select'] or None))
BULYAN = _gathered(lambda arguments, inner, context: baselines.bulyan_factory(arguments['f']))
