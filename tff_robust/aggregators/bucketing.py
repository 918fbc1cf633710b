"""Bucketing (Karimireddy, He, Jaggi, ICLR 2022, "Byzantine-robust learning on heterogeneous datasets via
bucketing"), with each bucket's mean one secure average and any robust rule over the bucket means.

Algorithm 1 of the paper: draw a random permutation pi of the n clients, form ceil(n/s) buckets
B_b = {pi((b-1)s+1), ..., pi(min(bs, n))}, take each bucket's mean, and run the robust rule over the means.
Averaging s clients divides the spread between honest clients by about sqrt(s) (the heterogeneity a robust
rule mistakes for an attack), while a fraction delta of attackers spoils at most a fraction s delta of buckets.

Here, in TFF's federated language with anonymous clients and no per-client value at the server:
  1. Permutation. Each client draws a key k_i uniform on {0, ..., H-1} (H = `key_bins`). One secure sum of
     the one-hot keys gives the key histogram c; the server broadcasts it and client i takes rank
     r_i = sum_{k < k_i} c_k, bucket b_i = r_i // s. Sorting by random keys is a uniform random permutation
     when no two keys are equal; ties (probability about n^2 / 2H per round: 1.2% for 10 clients, 70% for 100)
     are broken by a second draw: every tied client (c_{k_i} >= 2) draws a second key t_i, one more secure sum
     gives their histogram d, and the j-th tied client in the order of t (j = sum_{t < t_i} d_t) takes the j-th
     of the positions that the tied groups occupy (the ranks r_k, ..., r_k + c_k - 1 of every key k with
     c_k >= 2, in increasing order); its bucket is that position // s. Tied clients of different groups may
     trade positions: the permutation stays uniform, since every step treats the clients alike. Clients whose
     second keys tie too (probability about t^2 / 2H for t tied clients) share a position.
     `keys='random'` (the default) draws k_i from the client's own randomness (an unseeded
     `tf.random.uniform`): independent of the values, as the paper's server-side permutation is, but not
     reproducible from a seed. `keys='hashed'` draws it from the stateless seed (`seed`, round) folded with
     a hash of the client's value (`tf.fingerprint`), and the second key from the same folded once more:
     reproducible, which tests use to check against a fixed permutation, but clients with equal values share
     both keys and one bucket, so attackers that all send
     the same update (the omniscient attack) would spoil one bucket only: never use it to measure
     robustness. The round counter is the aggregator's state.
  2. Bucket means. Each client one-hot places (alpha_i w_i, alpha_i) and 1 into row b_i of
     [K, ...] stacked values, K = ceil(`max_clients` / s); two secure sums give every bucket's weighted sum
     S_b, weight A_b and size. The server divides: m_b = S_b / A_b (0 for an empty bucket).
  3. The robust rule. The server broadcasts the K means; client i passes m_{b_i} with its own weight alpha_i
     to `inner_factory`. Bucket b's point m_b then appears |B_b| times with weights summing to A_b, so a rule
     of the weighted empirical distribution (the geometric median, `GeometricMedianFactory`, and every
     mean) computes exactly the rule over the bucket means with weights A_b (equal weights with uniform
     client weighting and full buckets, as in the paper). Rules that count clients (Krum, trimmed mean)
     see every bucket mean |B_b| times.

What the server learns: the two key histograms (random keys, no identities), and every bucket's size,
weight and weighted mean of s clients; with an inner rule of secure sums (`SecureGeometricMedianFactory`)
nothing else. A bucket of one client reveals that client's update all the same (its secure "mean" is the update):
with s = 1, or in the last bucket when the cohort size n has n mod s = 1 (n = 10, s = 3: sizes 3, 3, 3, 1), and
where ties leave a bucket short. Choose s >= 2 dividing the cohort size where that matters (s = 1 with a secure
`sum_factory` is refused). So with `sum_factory`
and `count_factory` secure sums (`SecureSumFactory`) every client value reaches the server through a secure sum
(`privacy.assert_client_values_aggregated_securely`). A deployment
would instead let the server assign clients to buckets and run one secure aggregation per bucket; here
clients choose their bucket, so a Byzantine client that deviates from the protocol
could pick its bucket (the simulated attacks, `UpdateCorruptionFactory`, do not).

Composition: `BucketingFactory(GeometricMedianFactory())` is RFA over bucket means (`bucketing_rfa` in the
runner); as the `model_aggregator` of Delta-FL (`tff_robust.processes.delta_fl`) it buckets after the filter:
a client the filter drops sends a zero update with weight 0, which adds nothing to its bucket's sums but takes
a place in the ranking, so buckets hold s clients of which some may be dropped ones (fewer than s kept
clients); bucket weights are the kept clients' weights, and a bucket of dropped clients only has weight 0.
"""

import collections
import math
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import call_counts
from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening

DEFAULT_KEY_BINS = 4096
KEYS = ('random', 'hashed')


class BucketingFactory(tff.aggregators.WeightedAggregationFactory):
  """`WeightedAggregationFactory` running `inner_factory` over the means of random buckets of `bucket_size`.

  Client values that contain NaN or Inf (or carry a non-finite or negative weight) get weight 0 and are counted; they
  still take a place in a bucket. A cohort larger than `max_clients` puts the clients of rank beyond
  K s - 1 into the last bucket (K = ceil(max_clients / bucket_size)).

  Types: what `tff.aggregators.MeanFactory` takes; the bucket sums are computed in float32 or wider
  (`widening`), and `inner_factory` is created for the value's own types.

  Measurements:
    - `secure_average_calls`: 1 (the bucket means) plus the inner process's (1 if it reports none); the
      two key histograms, bucket sizes and non-finite count are sums of 0/1 flags and not counted.
    - `num_buckets`: buckets with a positive weight.
    - `bucket_sizes`: int32 [K], clients per bucket.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative.
    - `inner`: the measurements of `inner_factory`'s process (absent when empty, as TFF's `MeanFactory`'s are).

  State: <the inner process's state, the round counter>.
  """

  def __init__(
      self,
      inner_factory: tff.aggregators.WeightedAggregationFactory,
      *,
      bucket_size: int,
      max_clients: int,
      keys: str = 'random',
      seed: int = 0,
      key_bins: int = DEFAULT_KEY_BINS,
      sum_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      inner_factory: a `tff.aggregators.WeightedAggregationFactory`, the robust rule over the bucket means.
      bucket_size: s, clients per bucket, an integer >= 1 (1: no bucketing, the inner rule over the clients'
        own values, exactly, also when two clients' keys tie twice; `bucket_sizes` then shows one bucket of 2);
        >= 2 with a `SecureSumFactory` as `sum_factory`, where 1 would reveal every client's update.
      max_clients: the largest cohort, an integer >= 1; the stacked sums have ceil(max_clients / s) rows.
      keys: 'random' or 'hashed', how clients draw their keys (module docstring).
      seed: an integer >= 0 seeding the permutations of `keys='hashed'` (one per round).
      key_bins: H, the number of distinct keys, an integer >= 2.
      sum_factory: a `tff.aggregators.UnweightedAggregationFactory` for the stacked <alpha w, alpha> (in
        the values' wide dtype, `widening.value_dtype`); defaults to `tff.aggregators.SumFactory()`.
        Secure: a `SecureSumFactory` bounded by max(W V, W) for entries |w_ij| <= V and weights alpha_i <= W.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing int32 0/1 (the one-hot keys of
        both draws, the one-hot buckets and the non-finite flags); defaults to `tff.aggregators.SumFactory()`. Secure:
        `tff.aggregators.SecureSumFactory(1, 0)`.

    Raises:
      ValueError: if an integer argument is outside its range, or `bucket_size` is 1 with a secure `sum_factory`.
      TypeError: if a factory has the wrong type.
    """
    if not isinstance(inner_factory, tff.aggregators.WeightedAggregationFactory):
      raise TypeError(f'inner_factory must be a tff.aggregators.WeightedAggregationFactory, got {inner_factory!r}')
    self._inner_factory = inner_factory
    self._bucket_size = type_checks.check_integer('bucket_size', bucket_size, minimum=1)
    self._max_clients = type_checks.check_integer('max_clients', max_clients, minimum=1)
    if keys not in KEYS:
      raise ValueError(f'keys must be one of {KEYS}, got {keys!r}')
    self._keys = keys
    self._seed = type_checks.check_integer('seed', seed, minimum=0)
    self._key_bins = type_checks.check_integer('key_bins', key_bins, minimum=2)
    self._sum_factory = type_checks.sum_factory_or_default(sum_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')
    if self._bucket_size == 1 and isinstance(self._sum_factory, tff.aggregators.SecureSumFactory):
      raise ValueError(
          'bucket_size (bucketing\'s s) must be >= 2 with a secure sum_factory: with 1 every bucket holds one client, '
          'so its secure sum reveals that client\'s update to the server'
      )

  @property
  def num_buckets(self) -> int:
    """K = ceil(max_clients / bucket_size), the rows of the stacked sums."""
    return math.ceil(self._max_clients / self._bucket_size)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes."""
    wide_type, wide_weight_type = widening.checked_wide_types(value_type, weight_type)
    weight_dtype = wide_weight_type.dtype
    inner_process = self._inner_factory.create(value_type, weight_type)
    num_buckets, bucket_size, key_bins, seed = self.num_buckets, self._bucket_size, self._key_bins, self._seed
    draw_key = hashed_key if self._keys == 'hashed' else random_key
    stacked_type = tff.StructWithPythonType([
        ('values', _stacked(wide_type, num_buckets)),
        ('weights', tff.TensorType(widening.value_dtype(value_type), [num_buckets])),
    ], collections.OrderedDict)
    sum_process = self._sum_factory.create(stacked_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    sizes_process = self._count_factory.create(tff.TensorType(np.int32, [num_buckets]))
    keys_process = self._count_factory.create(tff.TensorType(np.int32, [key_bins]))

    key_type = tff.TensorType(np.int32, [key_bins])

    @tff.tensorflow.computation(wide_type, np.int32)
    def one_hot_key(value, round_num):
      return tf.one_hot(draw_key(value, seed, round_num, key_bins), key_bins, dtype=tf.int32)

    @tff.tensorflow.computation(wide_type, np.int32, key_type, key_type)
    def one_hot_tie_key(value, round_num, one_hot, histogram):
      tied = tf.reduce_sum(histogram * one_hot) >= 2
      second = tf.one_hot(draw_key(value, seed, round_num, key_bins, draw=1), key_bins, dtype=tf.int32)
      return second * tf.cast(tied, tf.int32)

    @tff.tensorflow.computation(key_type, key_type, key_type, key_type)
    def bucket_of(one_hot, tie_one_hot, histogram, tie_histogram):
      return bucket_from_rank(position(one_hot, tie_one_hot, histogram, tie_histogram), bucket_size, num_buckets)

    @tff.tensorflow.computation(wide_type, tff.TensorType(weight_dtype), np.int32)
    def place(value, weight, bucket):
      row = tf.one_hot(bucket, num_buckets, dtype=weight_dtype) * weight
      values = widening.pack(stacked_type.values, iter([
          tf.reshape(tf.cast(row, t.dtype), [num_buckets] + [1] * t.shape.rank) * t[tf.newaxis]
          for t in widening.leaves(value, wide_type)
      ]))
      weights = tf.cast(row, stacked_type.weights.dtype)
      return collections.OrderedDict(values=values, weights=weights), tf.one_hot(bucket, num_buckets, dtype=tf.int32)

    @tff.tensorflow.computation(stacked_type)
    def bucket_means(sums):
      def divide(total):
        weights = tf.reshape(tf.cast(sums['weights'], total.dtype), [num_buckets] + [1] * (total.shape.rank - 1))
        return tf.math.divide_no_nan(total, weights)
      totals = widening.leaves(sums['values'], stacked_type.values)
      means = widening.pack(stacked_type.values, iter([divide(total) for total in totals]))
      return means, tf.math.count_nonzero(sums['weights'] > 0, dtype=tf.int32)

    @tff.tensorflow.computation(stacked_type.values, np.int32, tff.TensorType(weight_dtype))
    def own_bucket_mean(means, bucket, weight):
      mean = widening.pack(wide_type, iter([t[bucket] for t in widening.leaves(means, stacked_type.values)]))
      return widening.narrow(mean, value_type), tf.cast(weight, weight_type.dtype)

    @tff.tensorflow.computation(wide_type, tff.TensorType(weight_dtype))
    def own_value(value, weight):
      return widening.narrow(value, value_type), tf.cast(weight, weight_type.dtype)

    increment = tff.tensorflow.computation(lambda round_num: round_num + 1, np.int32)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip((inner_process.initialize(), tff.federated_value(np.int32(0), tff.SERVER)))

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      nonfinite = count_process.next(count_process.initialize(), nonfinite)
      round_num = state[1]
      keys = tff.federated_map(one_hot_key, (value, tff.federated_broadcast(round_num)))
      histogram = tff.federated_broadcast(keys_process.next(keys_process.initialize(), keys).result)
      tie_keys = tff.federated_map(one_hot_tie_key, (value, tff.federated_broadcast(round_num), keys, histogram))
      tie_histogram = tff.federated_broadcast(keys_process.next(keys_process.initialize(), tie_keys).result)
      bucket = tff.federated_map(bucket_of, (keys, tie_keys, histogram, tie_histogram))
      placed = tff.federated_map(place, (value, weight, bucket))
      sums = sum_process.next(sum_process.initialize(), placed[0])
      sizes = sizes_process.next(sizes_process.initialize(), placed[1])
      means, num_nonempty = tff.federated_map(bucket_means, sums.result)
      if bucket_size == 1:  # each client is its own bucket, also when two clients' keys tie twice
        own = tff.federated_map(own_value, (value, weight))
      else:
        own = tff.federated_map(own_bucket_mean, (tff.federated_broadcast(means), bucket, weight))
      inner = inner_process.next(state[0], own[0], own[1])
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=call_counts.total_calls((inner.measurements, inner_process), extra=1),
          num_buckets=num_nonempty,
          bucket_sizes=sizes.result,
          num_nonfinite_clients=nonfinite.result,
      ), 'inner', inner.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip((inner.state, tff.federated_map(increment, round_num))),
          result=inner.result,
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)


def random_key(value, seed: int, round_num, key_bins: int, draw: int = 0) -> tf.Tensor:
  """TensorFlow: a key uniform on {0, ..., key_bins - 1} from the client's own randomness (not seeded), a
  fresh one for every call (`draw` names the draw for `hashed_key`'s sake)."""
  del value, seed, round_num, draw
  return tf.random.uniform([], minval=0, maxval=key_bins, dtype=tf.int32)


def hashed_key(value, seed: int, round_num, key_bins: int, draw: int = 0) -> tf.Tensor:
  """TensorFlow: the client's key in {0, ..., key_bins - 1}, uniform from the seed (seed, round_num) folded
  with the fingerprint (`tf.fingerprint`, FarmHash) of the value's bytes, and with `draw` unless it is 0
  (draw 1: the tie-breaking key)."""
  flat = tf.concat([tf.reshape(tf.bitcast(t, tf.uint8), [-1]) for t in tf.nest.flatten(value)], 0)
  digest = tf.bitcast(tf.fingerprint(flat[tf.newaxis])[0], tf.int64)
  round_seed = tf.stack([tf.constant(seed, tf.int64), tf.cast(round_num, tf.int64)])
  key_seed = tf.random.experimental.stateless_fold_in(round_seed, digest)
  if draw:
    key_seed = tf.random.experimental.stateless_fold_in(key_seed, draw)
  return tf.random.stateless_uniform([], key_seed, minval=0, maxval=key_bins, dtype=tf.int32)


def position(one_hot, tie_one_hot, histogram, tie_histogram) -> tf.Tensor:
  """TensorFlow: the client's position in the permutation (module docstring, step 1).

  Args:
    one_hot: int32 [H], the client's key k_i one-hot.
    tie_one_hot: int32 [H], its second key t_i one-hot if its key is tied (c_{k_i} >= 2), else zeros.
    histogram: int32 [H], c, the sum of every client's `one_hot`.
    tie_histogram: int32 [H], d, the sum of every client's `tie_one_hot`.

  Returns:
    r_i = sum_{k < k_i} c_k if c_{k_i} = 1; else the j-th (from 0) of the tied groups' positions in increasing
    order, j = sum_{t < t_i} d_t.
  """
  rank = tf.reduce_sum(tf.cumsum(histogram, exclusive=True) * one_hot)
  tied = tf.reduce_sum(histogram * one_hot) >= 2
  tie_index = tf.reduce_sum(tf.cumsum(tie_histogram, exclusive=True) * tie_one_hot)
  tied_positions = tf.cast(tf.where(tf.repeat(histogram >= 2, histogram))[:, 0], tf.int32)
  padded = tf.concat([tied_positions, [0]], 0)  # a client that is not tied gathers index 0 of a maybe empty list
  return tf.where(tied, tf.gather(padded, tie_index), rank)


def bucket_from_rank(rank, bucket_size: int, num_buckets: int) -> tf.Tensor:
  """TensorFlow: the bucket of the client of rank `rank` in the permutation: min(rank // s, K - 1)."""
  return tf.minimum(rank // bucket_size, num_buckets - 1)


def _stacked(wide_type, num_buckets):
  """`wide_type` with a leading dimension of `num_buckets` on every tensor."""
  leaves = [tff.TensorType(t.dtype, [num_buckets, *t.shape]) for t in widening.leaf_types(wide_type)]
  return _rebuilt(wide_type, iter(leaves))


def _rebuilt(type_spec, leaves):
  if isinstance(type_spec, tff.TensorType):
    return next(leaves)
  return tff.StructWithPythonType(
      [(name, _rebuilt(element, leaves)) for name, element in tff.structure.iter_elements(type_spec)],
      type_spec.python_container,
  )
