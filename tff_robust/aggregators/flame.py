"""FLAME (Nguyen et al., USENIX Security 2022, "FLAME: Taming Backdoors in Federated Learning", Algorithm 1) as a
`tff.aggregators` factory. It gathers every client update at the server: NOT secure-aggregation compatible
(`gathering`; `privacy.non_secure_intrinsics` flags its `federated_aggregate`).

Of the round's m usable updates (finite, weight > 0; `gathering.usable_rows`), as `tff_robust.core.flame` (the
NumPy reference) states the paper: keep the majority cluster of HDBSCAN on the pairwise cosine distances with
minimum cluster size m//2 + 1; S = the median of all m norms; each kept update clipped to S; their weighted mean;
plus N(0, (λ S)² I) drawn at the server from a seed kept in the state (`gaussian_noise.noise_generator`).

The clustering runs inside the TensorFlow computation, where scikit-learn cannot (TFF's C++ worker runs the
graph, with no Python to call back into). With a minimum cluster size above m/2 HDBSCAN's answer has a closed
form, computed here by `majority_cluster` and tested against scikit-learn's `HDBSCAN`:
  - min_samples = 1 or 2 (scikit-learn counts the point itself) make the mutual reachability distance the cosine
    distance itself (an edge of the tree is never shorter than its ends' nearest-neighbour distances), so the
    hierarchy is single linkage;
  - two clusters of size >= m//2 + 1 cannot coexist, so the condensed tree is its root alone, which
    `allow_single_cluster=True` selects, and its members are the points that leave it last: those of the first
    component of single linkage to reach m//2 + 1 points, at the level d* where it forms (with every point joined
    to it at that same level);
  - with u_ij the single-linkage (minimax path) distance and l_i the (m//2 + 1)-th smallest of u_i1..u_im (u_ii =
    0 included), d* = min_i l_i and the kept points are those with l_i = d*.
u is the minimax closure of the distances, m rounds of u <- min(u, max(u[:, k], u[k, :])) (O(m³)).

Distances are computed in float64 (the Gram matrix of the gathered rows, m² d operations), norms and the mean in
the rows' dtype (`gathering.FlatRows`: float32, float64 for float64 values or weights).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import gathering
from tff_robust.aggregators import gaussian_noise
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening
from tff_robust.aggregators.defences import implementations

DEFAULT_NOISE_SCALE = 0.001  # λ, the paper's for image classification (the digits task is one)


def cosine_distances(rows):
  """TensorFlow: [m, m] float64 1 - cos(x_i, x_j) clipped into [0, 2], 1 against a zero row, 0 on the diagonal."""
  rows = tf.cast(rows, tf.float64)
  norms = tf.norm(rows, axis=1)
  similarity = tf.math.divide_no_nan(tf.matmul(rows, rows, transpose_b=True), norms[:, None] * norms[None, :])
  distances = tf.clip_by_value(1.0 - similarity, 0.0, 2.0)
  return tf.linalg.set_diag(distances, tf.zeros_like(norms))


def majority_cluster(distances):
  """TensorFlow: bool [m], HDBSCAN's cluster with minimum size m//2 + 1 on `distances` [m, m] (module docstring)."""
  size = tf.shape(distances)[0]

  def join_through(k, minimax):
    return k + 1, tf.minimum(minimax, tf.maximum(minimax[:, k:k + 1], minimax[k:k + 1, :]))

  _, minimax = tf.while_loop(lambda k, _: k < size, join_through, (tf.constant(0), distances))
  levels = tf.sort(minimax, axis=1)[:, size // 2]  # the (m//2 + 1)-th smallest
  return levels <= tf.reduce_min(levels)


def median(values):
  """TensorFlow: the median of a non-empty vector, the mean of the two middle values for an even length."""
  ordered, size = tf.sort(values), tf.shape(values)[0]
  return (ordered[(size - 1) // 2] + ordered[size // 2]) / 2


def noise_free_aggregate(rows, weights):
  """TensorFlow: (the weighted mean of the kept rows clipped to S, S = the median norm, the kept mask) of
  `rows` [m, d], m >= 1, and positive `weights` [m]: FLAME without its noise."""
  kept = majority_cluster(cosine_distances(rows))
  norms = implementations.row_norms(rows)
  threshold = median(norms)
  clipped = implementations.clip_rows(tf.boolean_mask(rows, kept), threshold)
  return implementations.weighted_mean(clipped, tf.boolean_mask(weights, kept)), threshold, kept


class FlameFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` for FLAME with noise scale λ = `noise_scale` (module docstring). Gathers.

  A round without usable clients returns zeros (no noise). State: the noise generator's state (seed pair,
  stddev 1). Measurements: `num_nonfinite_clients` (rows dropped as non-finite or of weight <= 0),
  `num_clients_used` (m), `num_admitted_clients` (the majority cluster), `median_norm` (S).
  """

  def __init__(self, noise_scale: float = DEFAULT_NOISE_SCALE, seed: int = 0):
    """Initializes the factory.

    Args:
      noise_scale: λ >= 0; the noise's standard deviation is λ S (0: no noise).
      seed: an integer >= 0; the first round's noise is drawn from the seed pair (seed, seed).

    Raises:
      ValueError: if `noise_scale` is not a finite number >= 0 (NaN included) or `seed` not an integer >= 0.
    """
    self._noise_scale = type_checks.check_number('noise_scale', noise_scale, minimum=0.0)
    self._seed = type_checks.check_integer('seed', seed, minimum=0)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. It gathers every client's row (not secure)."""
    type_checks.check_value_type(value_type)
    type_checks.check_weight_type(weight_type)
    rows = gathering.FlatRows(value_type, weight_type)
    generator = gaussian_noise.noise_generator([tff.TensorType(np.float32, [rows.dimension])], 1.0, self._seed)
    initial_noise_state = tff.tensorflow.computation(lambda: tuple(generator.initialize()))
    noise_scale = self._noise_scale

    @tff.tensorflow.computation(rows.gathered_type, initial_noise_state.type_signature.result)
    def flame(gathered, noise_state):
      points, weights = gathered
      usable = gathering.usable_rows(points, weights)
      points, weights = tf.boolean_mask(points, usable), tf.boolean_mask(weights, usable)
      num_used = tf.shape(points)[0]
      mean, threshold, kept = tf.cond(
          num_used > 0,
          lambda: noise_free_aggregate(points, weights),
          lambda: (tf.zeros([rows.dimension], points.dtype), tf.zeros([], points.dtype), tf.zeros([0], tf.bool)),
      )
      [noise], next_state = generator.next(generator.make_state(*noise_state))
      vector = mean + tf.cast(noise_scale * threshold, points.dtype) * tf.cast(noise, points.dtype)
      leaves = [tf.where(tf.math.is_finite(leaf), leaf, tf.zeros_like(leaf))
                for leaf in widening.leaves(rows.unflatten(vector), value_type)]
      measurements = collections.OrderedDict(
          num_nonfinite_clients=tf.reduce_sum(tf.cast(tf.logical_not(usable), tf.int32)),
          num_clients_used=num_used,
          num_admitted_clients=tf.reduce_sum(tf.cast(kept, tf.int32)),
          median_norm=threshold,
      )
      return widening.pack(value_type, iter(leaves)), tuple(next_state), measurements

    @tff.federated_computation()
    def init_fn():
      return tff.federated_eval(initial_noise_state, tff.SERVER)

    @widening.weighted_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight):
      result, next_state, measurements = tff.federated_map(flame, (rows.gather(value, weight), state))
      return tff.templates.MeasuredProcessOutput(state=next_state, result=result, measurements=measurements)

    return tff.templates.AggregationProcess(init_fn, next_fn)
