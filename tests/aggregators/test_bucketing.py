"""BucketingFactory against an independent NumPy reference: the permutation of the clients' keys, the bucket
means and the geometric median over them (Karimireddy, He, Jaggi 2022, Algorithm 1)."""

import functools
import itertools

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators import bucketing
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import privacy
from tff_robust.aggregators import secure_geometric_median
from tff_robust.core import weiszfeld
from tests.aggregators import two_tensor_points

_SMOOTHING = 1e-3


def _cloud(seed, num_clients=10):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(num_clients, 5)).astype(np.float32)
  points[:2] += 8.0
  return points, rng.uniform(0.5, 3.0, size=num_clients).astype(np.float32)


def _positions(keys, tie_keys):
  """NumPy reference of the permutation: rank by key; the clients of tied keys take the tied groups' positions
  in the order of their second keys (a client's second key counts only if its key is tied)."""
  keys, tie_keys = np.asarray(keys), np.asarray(tie_keys)
  counts = np.array([np.count_nonzero(keys == key) for key in keys])
  ranks = np.array([np.count_nonzero(keys < key) for key in keys])
  tied = counts >= 2
  tied_positions = sorted(p for r, c in {(r, c) for r, c in zip(ranks[tied], counts[tied])} for p in range(r, r + c))
  return np.array([tied_positions[np.count_nonzero(tie_keys[tied] < t)] if is_tied else r
                   for r, t, is_tied in zip(ranks, tie_keys, tied)])


def _buckets(points, round_num, bucket_size, num_buckets, seed=0, key_bins=bucketing.DEFAULT_KEY_BINS):
  """The fixed permutation of `keys='hashed'`: both keys from `bucketing.hashed_key`, ranked here in NumPy."""
  values = two_tensor_points.client_values(points)
  keys, tie_keys = ([int(bucketing.hashed_key(value, seed, round_num, key_bins, draw=draw)) for value in values]
                    for draw in (0, 1))
  return np.minimum(_positions(keys, tie_keys) // bucket_size, num_buckets - 1)


def _reference(points, weights, buckets, num_passes, smoothing=_SMOOTHING):
  """Weighted bucket means m_b = sum_{i in b} a_i w_i / A_b, then the smoothed-Weiszfeld median with weights A_b."""
  used = np.unique(buckets)
  bucket_weights = np.array([weights[buckets == b].sum() for b in used], np.float64)
  means = np.stack([np.average(points[buckets == b], axis=0, weights=weights[buckets == b]) for b in used])
  return weiszfeld.smoothed_weiszfeld(means, bucket_weights, num_passes=num_passes, smoothing=smoothing,
                                      init='mean').iterates[-1]


@functools.lru_cache(maxsize=None)
def _process(bucket_size, max_clients=10):
  return bucketing.BucketingFactory(
      geometric_median.GeometricMedianFactory(num_passes=4, smoothing=_SMOOTHING),
      bucket_size=bucket_size, max_clients=max_clients, keys='hashed',
  ).create(*two_tensor_points.TYPES)


def test_two_rounds_match_the_numpy_reference_with_each_rounds_permutation():
  process, state = _process(2), _process(2).initialize()
  assignments = []
  for round_num, seed in enumerate((1, 2)):
    points, weights = _cloud(seed)
    output = process.next(state, two_tensor_points.client_values(points), list(weights))
    state = output.state
    buckets = _buckets(points, round_num, 2, 5)
    assignments.append(buckets)
    expected = _reference(points, weights, buckets, num_passes=4)
    np.testing.assert_allclose(np.concatenate(output.result), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(output.measurements['bucket_sizes'], np.bincount(buckets, minlength=5))
    np.testing.assert_array_equal(output.measurements['bucket_sizes'], [2] * 5)  # a permutation: full buckets
    assert output.measurements['num_buckets'] == 5
    assert output.measurements['secure_average_calls'] == 5  # the bucket means + 4 Weiszfeld passes
  assert not np.array_equal(assignments[0], assignments[1])


def test_bucket_size_one_is_the_inner_rule_over_the_clients():
  points, weights = _cloud(3)
  process = _process(1)
  output = process.next(process.initialize(), two_tensor_points.client_values(points), list(weights))
  expected = weiszfeld.smoothed_weiszfeld(points.astype(np.float64), weights.astype(np.float64), num_passes=4,
                                          smoothing=_SMOOTHING, init='mean').iterates[-1]
  np.testing.assert_allclose(np.concatenate(output.result), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('keys', bucketing.KEYS)
def test_bucket_size_one_stays_the_inner_rule_when_keys_tie(keys):
  """Two key bins for 10 clients: both keys must tie, and clients whose second keys tie share a position; each
  is still its own bucket."""
  points, weights = _cloud(5)
  process = bucketing.BucketingFactory(
      geometric_median.GeometricMedianFactory(num_passes=4, smoothing=_SMOOTHING),
      bucket_size=1, max_clients=10, keys=keys, key_bins=2,
  ).create(*two_tensor_points.TYPES)
  output = process.next(process.initialize(), two_tensor_points.client_values(points), list(weights))
  expected = weiszfeld.smoothed_weiszfeld(points.astype(np.float64), weights.astype(np.float64), num_passes=4,
                                          smoothing=_SMOOTHING, init='mean').iterates[-1]
  np.testing.assert_allclose(np.concatenate(output.result), expected, rtol=1e-5, atol=1e-5)
  assert output.measurements['num_buckets'] <= 3  # positions: an untied key's rank, one per second key


def test_tied_keys_still_fill_every_bucket_and_match_the_reference():
  """16 key bins for 10 clients: their keys tie so that ranks alone would fill the buckets 4, 0, 2, 2, 2
  (checked); the second draw breaks the ties and the buckets stay full, as in the paper's permutation; the
  result is the reference's over the same buckets."""
  points, weights = _cloud(8)
  values = two_tensor_points.client_values(points)
  keys = np.array([int(bucketing.hashed_key(value, 0, 0, 16)) for value in values])
  ranks = np.array([np.count_nonzero(keys < key) for key in keys])
  np.testing.assert_array_equal(np.bincount(ranks // 2, minlength=5), [4, 0, 2, 2, 2])
  process = bucketing.BucketingFactory(
      geometric_median.GeometricMedianFactory(num_passes=4, smoothing=_SMOOTHING),
      bucket_size=2, max_clients=10, keys='hashed', key_bins=16,
  ).create(*two_tensor_points.TYPES)
  output = process.next(process.initialize(), values, list(weights))
  buckets = _buckets(points, 0, 2, 5, key_bins=16)
  np.testing.assert_array_equal(output.measurements['bucket_sizes'], [2] * 5)
  np.testing.assert_array_equal(np.bincount(buckets, minlength=5), [2] * 5)
  np.testing.assert_allclose(np.concatenate(output.result), _reference(points, weights, buckets, num_passes=4),
                             rtol=1e-5, atol=1e-5)


def test_position_matches_the_numpy_reference_on_ties_of_every_kind():
  """Random keys over 6 bins for 7 clients (ties within and across groups, second keys tying too)."""
  rng = np.random.default_rng(0)
  for _ in range(30):
    keys, tie_keys = rng.integers(0, 6, size=7), rng.integers(0, 6, size=7)
    one_hot, second = np.eye(6, dtype=np.int32)[keys], np.eye(6, dtype=np.int32)[tie_keys]
    histogram = one_hot.sum(axis=0, dtype=np.int32)
    tied = histogram[keys] >= 2
    second[~tied] = 0
    positions = [int(bucketing.position(one_hot[i], second[i], histogram, second.sum(axis=0, dtype=np.int32))) for i in range(7)]
    np.testing.assert_array_equal(positions, _positions(keys, tie_keys))


def test_tie_breaking_keeps_the_permutation_uniform():
  """Three clients, two key bins (a tie in every draw): over the draws whose second keys do not tie, each of the
  3! permutations appears with frequency 1/6 (chi-square with 5 degrees of freedom below 20.5, p = 0.001)."""
  rng = np.random.default_rng(1)
  counts = {}
  for _ in range(6000):
    keys, tie_keys = rng.integers(0, 2, size=3), rng.integers(0, 1 << 20, size=3)
    order = tuple(_positions(keys, tie_keys))
    counts[order] = counts.get(order, 0) + 1
  assert sorted(counts) == sorted(itertools.permutations(range(3)))
  expected = 6000 / 6
  assert sum((c - expected) ** 2 / expected for c in counts.values()) < 20.5


def test_over_a_mean_it_is_the_weighted_mean_and_a_smaller_cohort_leaves_buckets_empty():
  points, weights = _cloud(4, num_clients=7)
  process = bucketing.BucketingFactory(
      tff.aggregators.MeanFactory(), bucket_size=3, max_clients=12).create(*two_tensor_points.TYPES)
  output = process.next(process.initialize(), two_tensor_points.client_values(points), list(weights))
  np.testing.assert_allclose(np.concatenate(output.result), np.average(points, axis=0, weights=weights), rtol=1e-5)
  np.testing.assert_array_equal(output.measurements['bucket_sizes'], [3, 3, 1, 0])
  assert output.measurements['num_buckets'] == 3


def test_nonfinite_clients_are_counted_and_weigh_nothing():
  points, weights = _cloud(5)
  points[4, 0] = np.nan
  process = _process(2)
  output = process.next(process.initialize(), two_tensor_points.client_values(points), list(weights))
  cleaned, kept = points.copy(), weights.copy()
  cleaned[4], kept[4] = 0.0, 0.0  # what the factory keys, buckets and sums: zeros with weight 0
  buckets = _buckets(cleaned, 0, 2, 5)
  used = np.array([b for b in range(5) if kept[buckets == b].sum() > 0])
  means = np.stack([np.average(cleaned[buckets == b], axis=0, weights=kept[buckets == b]) for b in used])
  bucket_weights = np.array([kept[buckets == b].sum() for b in used], np.float64)
  expected = weiszfeld.smoothed_weiszfeld(means, bucket_weights, num_passes=4, smoothing=_SMOOTHING,
                                          init='mean').iterates[-1]
  assert output.measurements['num_nonfinite_clients'] == 1
  np.testing.assert_allclose(np.concatenate(output.result), expected, rtol=1e-5, atol=1e-5)


def test_over_the_secure_geometric_median_every_client_value_is_securely_summed_and_it_matches():
  smoothing = 1e-2
  factory = bucketing.BucketingFactory(
      secure_geometric_median.SecureGeometricMedianFactory(value_bound=20.0, max_client_weight=3.0,
                                                           smoothing=smoothing, num_passes=4),
      bucket_size=2, max_clients=10, keys='hashed', sum_factory=tff.aggregators.SecureSumFactory(60.0),  # W V
      count_factory=tff.aggregators.SecureSumFactory(1, 0),
  )
  process = factory.create(*two_tensor_points.TYPES)
  assert privacy.non_secure_intrinsics(process.next) == frozenset()
  privacy.assert_client_values_aggregated_securely(process.next)
  points, weights = _cloud(6)
  output = process.next(process.initialize(), two_tensor_points.client_values(points), list(weights))
  buckets = _buckets(points, 0, 2, 5)
  expected = _reference(points, weights, buckets, num_passes=4, smoothing=smoothing)
  np.testing.assert_allclose(np.concatenate(output.result), expected, atol=1e-4)  # 32-bit quantisation
  assert output.measurements['inner']['num_clients_beyond_bounds'] == 0


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(bucket_size=0), r'bucket_size must be an integer >= 1, got 0'),
        (dict(bucket_size=2.5), r'bucket_size must be an integer >= 1'),
        (dict(max_clients=0), r'max_clients must be an integer >= 1'),
        (dict(key_bins=1), r'key_bins must be an integer >= 2'),
        (dict(seed=-1), r'seed must be an integer >= 0'),
        (dict(keys='fixed'), r"keys must be one of \('random', 'hashed'\), got 'fixed'"),
        (dict(bucket_size=1, sum_factory=tff.aggregators.SecureSumFactory(10.0)),
         r"bucket_size \(bucketing's s\) must be >= 2 with a secure sum_factory"),
    ],
)
def test_bad_arguments_name_the_argument_and_range(kwargs, message):
  arguments = dict(bucket_size=2, max_clients=10) | kwargs
  with pytest.raises(ValueError, match=message):
    bucketing.BucketingFactory(tff.aggregators.MeanFactory(), **arguments)


@pytest.mark.parametrize('keys', bucketing.KEYS)
def test_identical_updates_fill_random_buckets_but_share_one_hashed_key(keys):
  """Ten clients sending the same update (as omniscient attackers do): random keys spread them over the five
  buckets (two clients per bucket unless two keys collide), hashed keys put all ten into one bucket."""
  process = bucketing.BucketingFactory(
      tff.aggregators.MeanFactory(), bucket_size=2, max_clients=10, keys=keys).create(*two_tensor_points.TYPES)
  x = np.arange(5, dtype=np.float32)
  output = process.next(process.initialize(), two_tensor_points.client_values([x] * 10), [np.float32(1.0)] * 10)
  np.testing.assert_allclose(np.concatenate(output.result), x)
  sizes = output.measurements['bucket_sizes']
  assert sizes.sum() == 10
  if keys == 'random':
    assert sizes.max() <= 3 and output.measurements['num_buckets'] >= 4
  else:
    np.testing.assert_array_equal(sizes, [10, 0, 0, 0, 0])


def test_inner_factory_must_be_weighted():
  with pytest.raises(TypeError, match='inner_factory'):
    bucketing.BucketingFactory(tff.aggregators.SumFactory(), bucket_size=2, max_clients=10)
