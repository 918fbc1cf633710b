"""The robust learning rate (RLR; Özdayi, Kantarcioglu, Gel, AAAI 2021, "Defending against Backdoors in Federated
Learning with Robust Learning Rate", arXiv:2007.03767) before any rule, secure-aggregation compatible.

The paper sets the server's learning rate per coordinate i to η_θ,i = +η where at least θ clients agree on the
sign of their update, |sum_k sgn(Δ_k,i)| >= θ, and to -η elsewhere, and steps by η_θ ⊙ (the mean update)
(`tff_robust.core.rlr` is the NumPy reference). Here each round:
  1. every client with a positive weight sends sgn(Δ_k) (int32 entries in {-1, 0, 1}) to `sign_sum_factory`:
     the server learns only the sign sums V_i (the votes); a client of weight 0 votes 0;
  2. the server broadcasts s_i = +1 if |V_i| >= θ else -1, and each client sends s ⊙ Δ_k, with its own weight,
     to `inner_factory`;
  3. the aggregate is the inner rule's. With `inner_factory` a weighted mean it is s ⊙ mean, and the server
     optimizer's learning rate η makes the step η_θ ⊙ mean, the paper's. The inner rule may be any rule that
     commutes with flipping coordinates' signs (the geometric median, the coordinate-wise median and trimmed mean,
     Krum: reflections keep distances), then it is that rule's aggregate with the flips applied after it; centered
     clipping does not (its centre, the previous aggregate, is not flipped).

Secure aggregation: the votes are a sum of integers in [-1, 1], exact in a `SecureSumFactory(1, -1)`; with a
secure `inner_factory` (entries of s ⊙ Δ_k are bounded as those of Δ_k) and `count_factory` every client value
reaches the server through a secure sum (`privacy.assert_client_values_aggregated_securely`).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import call_counts
from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


def learning_rate_signs(votes, threshold):
  """TensorFlow: s = +1 where |votes| >= threshold, else -1, in the dtype of `votes` (floating sign sums)."""
  return tf.where(tf.abs(votes) >= threshold, tf.ones_like(votes), -tf.ones_like(votes))


class RobustLearningRateFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory`: RLR's per-coordinate sign flips with threshold θ, then `inner_factory`.

  Clients with a non-finite value or weight get weight 0 (they neither vote nor count in the inner rule) and are
  counted. Types: what `tff.aggregators.MeanFactory` takes; the inner factory is created for the widened types
  (`widening`), the result has the value's dtypes.

  State: <the sign sum's state, the inner process's state>. Measurements:
    - `secure_average_calls`: the inner process's plus 1 (the vote, one model-sized secure sum);
    - `num_flipped_coordinates`: the coordinates whose learning rate was -η (|V_i| < θ);
    - `num_nonfinite_clients`: summed by `count_factory`;
    - `inner`: the inner process's measurements (absent when empty).
  """

  def __init__(
      self,
      inner_factory: tff.aggregators.WeightedAggregationFactory,
      threshold: int,
      sign_sum_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      inner_factory: a `tff.aggregators.WeightedAggregationFactory` over the flipped updates (e.g. a mean).
      threshold: θ, an integer >= 0, the number of clients that must agree on a coordinate's sign for it to keep
        the learning rate +η (0: never flip, the inner rule alone).
      sign_sum_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 signs; defaults to
        `tff.aggregators.SumFactory()`. Secure: `tff.aggregators.SecureSumFactory(1, -1)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 0/1 flags; defaults to
        `tff.aggregators.SumFactory()`. Secure: `tff.aggregators.SecureSumFactory(1, 0)`.

    Raises:
      ValueError: if `threshold` is not an integer >= 0.
      TypeError: if a factory has the wrong type.
    """
    self._inner_factory = type_checks.weighted_factory('inner_factory', inner_factory)
    self._threshold = type_checks.check_integer('threshold', threshold, minimum=0)
    self._sign_sum_factory = type_checks.sum_factory_or_default(sign_sum_factory, 'sign_sum_factory')
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  @property
  def threshold(self) -> int:
    """θ."""
    return self._threshold

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    sign_type = widening.with_dtype(wide_type, np.int32)
    inner_process = self._inner_factory.create(wide_type, wide_weight_type)
    sign_process = self._sign_sum_factory.create(sign_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    threshold = self._threshold

    @tff.tensorflow.computation(wide_type, wide_weight_type)
    def vote(value, weight):
      """sgn(Δ_k) as int32, zeros for a client of weight 0."""
      takes_part = tf.cast(weight > 0, tf.int32)
      return widening.pack(sign_type, iter([
          tf.cast(tf.sign(tensor), tf.int32) * takes_part for tensor in widening.leaves(value, wide_type)
      ]))

    @tff.tensorflow.computation(sign_type)
    def signs_and_flips(votes):
      """(s in the wide dtypes, the number of coordinates with s = -1)."""
      signs = [tf.cast(learning_rate_signs(tf.cast(v, tf.float32), float(threshold)), leaf.dtype)
               for v, leaf in zip(widening.leaves(votes, sign_type), widening.leaf_types(wide_type))]
      flips = tf.add_n([tf.reduce_sum(tf.cast(s < 0, tf.int32)) for s in signs] + [tf.constant(0)])
      return widening.pack(wide_type, iter(signs)), flips

    @tff.tensorflow.computation(wide_type, wide_type)
    def flip(value, signs):
      return widening.pack(wide_type, iter([
          v * s for v, s in zip(widening.leaves(value, wide_type), widening.leaves(signs, wide_type))
      ]))

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip((sign_process.initialize(), inner_process.initialize()))

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      votes = sign_process.next(state[0], tff.federated_map(vote, (value, weight)))
      signs, flips = tff.federated_map(signs_and_flips, votes.result)
      flipped = tff.federated_map(flip, (value, tff.federated_broadcast(signs)))
      inner = inner_process.next(state[1], flipped, weight)
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=call_counts.total_calls((inner.measurements, inner_process), extra=1),
          num_flipped_coordinates=flips,
          num_nonfinite_clients=count_process.next(count_process.initialize(), nonfinite).result,
      ), 'inner', inner.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip((votes.state, inner.state)),
          result=widening.narrow_or_zeros_if_nonfinite_at_server(inner.result, value_type),
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
