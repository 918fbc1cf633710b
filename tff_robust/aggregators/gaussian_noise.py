"""Gaussian noise added by the server to an inner factory's aggregate, drawn from a seed kept in the state.

The aggregate a of `inner_factory` becomes a + N(0, σ² I), σ = `noise_stddev`, every entry of every tensor an
independent draw; this is the central model of differential privacy (noise once, on the aggregate, not on each
client's value), as in Sun et al.'s weak DP (`weak_dp`). The noise comes from tensorflow_privacy's
`tree_aggregation.GaussianNoiseGenerator` (stateless normal draws from a seed pair): its state, the seed pair,
is part of this factory's state and advances every round, so a run is reproducible from `seed` and every round
draws new noise. TFF's `DifferentiallyPrivateFactory.gaussian_fixed` is not used here: its query,
tensorflow_privacy's `GaussianSumQuery`, draws unseeded noise (`tf.random_normal_initializer()`), which no seed
reproduces, and it is unweighted (noise on a sum divided by a fixed expected cohort size).

The noise is drawn in float32 and added in float32 (float64 for float64 values, `widening`); the result has the
value's dtypes. With σ = 0 it adds zeros: the inner factory's aggregate exactly.
"""

import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_privacy.privacy.dp_query import tree_aggregation

from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening


def noise_generator(leaf_types, noise_stddev: float, seed: int) -> tree_aggregation.GaussianNoiseGenerator:
  """tensorflow_privacy's seeded generator of N(0, noise_stddev²) float32 draws shaped as `leaf_types` (a list of
  `tff.TensorType`s, in `widening.leaf_types` order); ValueError naming `noise_stddev` or `seed` out of range."""
  noise_stddev = type_checks.check_number('noise_stddev', noise_stddev, minimum=0.0)
  seed = type_checks.check_integer('seed', seed, minimum=0)
  specs = [tf.TensorSpec(leaf.shape, tf.float32) for leaf in leaf_types]
  return tree_aggregation.GaussianNoiseGenerator(noise_stddev, specs, seed)


class GaussianNoiseFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory`: `inner_factory`'s aggregate plus N(0, noise_stddev² I) (module docstring).

  State: <the inner process's state, the noise generator's state (seed pair, stddev)>. Measurements: those of
  the inner process, unchanged.
  """

  def __init__(
      self,
      inner_factory: tff.aggregators.WeightedAggregationFactory,
      noise_stddev: float,
      seed: int = 0,
  ):
    """Initializes the factory.

    Args:
      inner_factory: a `tff.aggregators.WeightedAggregationFactory` whose aggregate is noised.
      noise_stddev: σ >= 0, the standard deviation of each entry's noise.
      seed: an integer >= 0; the first round's noise is drawn from the seed pair (seed, seed).

    Raises:
      ValueError: if `noise_stddev` is not a finite number >= 0 (NaN included) or `seed` is not an integer >= 0.
      TypeError: if `inner_factory` has the wrong type.
    """
    self._inner_factory = type_checks.weighted_factory('inner_factory', inner_factory)
    self._noise_stddev = type_checks.check_number('noise_stddev', noise_stddev, minimum=0.0)
    self._seed = type_checks.check_integer('seed', seed, minimum=0)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    wide_type, _ = widening.checked_wide_types(value_type, weight_type)
    inner_process = self._inner_factory.create(value_type, weight_type)
    generator = noise_generator(widening.leaf_types(value_type), self._noise_stddev, self._seed)
    initial_noise_state = tff.tensorflow.computation(lambda: tuple(generator.initialize()))
    noise_state_type = initial_noise_state.type_signature.result

    @tff.tensorflow.computation(inner_process.next.type_signature.result.result.member, noise_state_type)
    def add_noise(aggregate, noise_state):
      """(aggregate + noise, the generator's next state), noised in the wide dtypes."""
      noise, next_state = generator.next(generator.make_state(*noise_state))
      noised = [
          tf.cast(tensor, leaf.dtype) + tf.cast(draw, leaf.dtype)
          for tensor, draw, leaf in zip(widening.leaves(aggregate, value_type), noise, widening.leaf_types(wide_type))
      ]
      noised = widening.narrow_or_zeros_if_nonfinite(widening.pack(wide_type, iter(noised)), value_type)
      return noised, tuple(next_state)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip((inner_process.initialize(), tff.federated_eval(initial_noise_state, tff.SERVER)))

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      inner = inner_process.next(state[0], value, weight)
      result, noise_state = tff.federated_map(add_noise, (inner.result, state[1]))
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip((inner.state, noise_state)), result=result, measurements=inner.measurements,
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
