"""The registry's defences against backdoors: norm bounding with weak DP (`weak_dp`, a secure rule), the robust
learning rate (`rlr`, a secure pre-aggregator) and FLAME (`flame`, a rule that gathers the updates).

Each factory is the aggregators' one (`weak_dp.norm_bounded_dp_factory`, `robust_learning_rate.
RobustLearningRateFactory`, `flame.FlameFactory`). The stacked forms, what a white-box attacker evaluates, are the
factories' computations WITHOUT their noise: the noise is drawn at the server after the updates are sent, so no
attacker can evaluate it; with noise 0 the factory computes exactly the stacked form.
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import flame
from tff_robust.aggregators import gathering
from tff_robust.aggregators import robust_learning_rate
from tff_robust.aggregators import weak_dp
from tff_robust.aggregators.defences import implementations


def _weak_dp_factory(arguments, inner, context):
  del inner
  norm_bound, bounds = arguments['m'], context.secure_bounds
  mean_factory = count_factory = None
  if bounds is not None:  # every clipped entry lies in [-M, M]
    mean_factory = implementations.secure_mean_factory(norm_bound, bounds.max_client_weight)
    count_factory = implementations.secure_count_factory()
  return weak_dp.norm_bounded_dp_factory(
      norm_bound, arguments['sigma'], seed=arguments['seed'], mean_factory=mean_factory, count_factory=count_factory)


def _stacked_weak_dp(arguments, context):
  """The weighted mean of the rows clipped to L2 norm m (the factory without its noise)."""
  del context
  return lambda points, weights, center: implementations.weighted_mean(
      implementations.clip_rows(points, arguments['m']), weights)


WEAK_DP = implementations.Implementation(_weak_dp_factory, _stacked_weak_dp)


def _check_threshold(arguments, context):
  if context.clients_per_round is not None and arguments['theta'] > context.clients_per_round:
    raise ValueError(f'rlr(theta={arguments["theta"]}): theta must be <= clients_per_round = '
                     f'{context.clients_per_round} (a larger threshold flips every coordinate of every round)')


def _rlr_factory(arguments, inner, context):
  _check_threshold(arguments, context)
  sign_sum_factory = count_factory = None
  if context.secure_bounds is not None:  # the votes are integers in [-1, 1]
    sign_sum_factory = tff.aggregators.SecureSumFactory(1, -1)
    count_factory = implementations.secure_count_factory()
  return robust_learning_rate.RobustLearningRateFactory(
      inner, arguments['theta'], sign_sum_factory=sign_sum_factory, count_factory=count_factory)


def _stacked_rlr(arguments, context):
  """Every row times s, s_i = +1 where the rows of positive weight's signs sum to at least theta in absolute value,
  else -1."""
  _check_threshold(arguments, context)
  threshold = float(arguments['theta'])

  def flipped(points, weights):
    votes = tf.reduce_sum(tf.sign(points) * tf.cast(weights > 0, points.dtype)[:, None], axis=0)
    return points * robust_learning_rate.learning_rate_signs(votes, threshold)[None], weights

  return flipped


RLR = implementations.Implementation(_rlr_factory, _stacked_rlr)


def _flame_factory(arguments, inner, context):
  del inner, context
  return flame.FlameFactory(arguments['lambda'], seed=arguments['seed'])


def _stacked_flame(arguments, context):
  """`flame.noise_free_aggregate` of the usable rows (`gathering.apply_to_usable_rows`): the factory without its
  noise."""
  del arguments, context

  def rule(points, weights, center):
    del center
    return gathering.apply_to_usable_rows(
        lambda rows, row_weights: flame.noise_free_aggregate(rows, row_weights)[0],
        lambda num_rows: num_rows >= 1, points, weights)[0]

  return rule


FLAME = implementations.Implementation(_flame_factory, _stacked_flame)
