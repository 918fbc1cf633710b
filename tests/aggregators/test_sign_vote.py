"""Sign-vote factories against NumPy references: MtFEEL's α-weighted sum (eq. 9) and signSGD's majority vote."""

import collections
import functools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import channels
from tff_robust.aggregators import sign_vote

_NUM_MODELS = 4
_NUM_CLIENTS = 5
_SHAPES = [(_NUM_MODELS, 3), (_NUM_MODELS, 2, 5)]
_BITS_PER_CLIENT = 12 + 40
_SIGNS_TYPE = [(np.float32, shape) for shape in _SHAPES]
_SEED_TYPE = (np.int64, [2])
_WEIGHTED_TYPE = tff.to_type(collections.OrderedDict(
    signs=_SIGNS_TYPE, weights=(np.float32, [_NUM_MODELS]), seed=_SEED_TYPE))
_VOTE_TYPE = tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, seed=_SEED_TYPE))


@functools.lru_cache(maxsize=None)
def _weighted_process(channel, sum_factory=None):
  return sign_vote.WeightedSignVoteFactory(channel, sum_factory).create(_WEIGHTED_TYPE)


@functools.lru_cache(maxsize=None)
def _vote_process(channel, mode):
  return sign_vote.MajorityVoteFactory(channel, mode).create(_VOTE_TYPE)


def _random_signs(rng, num_clients):
  return [[np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32) for shape in _SHAPES]
          for _ in range(num_clients)]


def _random_alpha(rng):
  """A random row-stochastic α (models × clients) with entries in multiples of 1/64.

  Every product α_km s_km and every partial sum is then exact in float32, so the federated sum equals the
  NumPy reference exactly whatever order the runtime adds the clients in.
  """
  return (rng.multinomial(64, np.full(_NUM_CLIENTS, 1.0 / _NUM_CLIENTS), size=_NUM_MODELS) / 64.0).astype(np.float32)


def _seeds(num_clients):
  return [np.array([m, 2024], np.int64) for m in range(num_clients)]


def _weighted_reference(signs, alpha):
  """sum_m α_km s_km for every tensor: α column m scales row k of client m's tensors."""
  return [sum(alpha[:, m].reshape((-1,) + (1,) * (len(shape) - 1)) * signs[m][j] for m in range(len(signs)))
          for j, shape in enumerate(_SHAPES)]


def _aggregate_weighted(channel, signs, alpha, sum_factory=None):
  process = _weighted_process(channel, sum_factory)
  values = [collections.OrderedDict(signs=s, weights=alpha[:, m], seed=seed)
            for m, (s, seed) in enumerate(zip(signs, _seeds(len(signs))))]
  return process.next(process.initialize(), values)


def _aggregate_votes(channel, mode, signs):
  process = _vote_process(channel, mode)
  values = [collections.OrderedDict(signs=s, seed=seed) for s, seed in zip(signs, _seeds(len(signs)))]
  return process.next(process.initialize(), values)


def test_weighted_vote_equals_the_numpy_reference_exactly():
  rng = np.random.default_rng(0)
  signs, alpha = _random_signs(rng, _NUM_CLIENTS), _random_alpha(rng)
  output = _aggregate_weighted(channels.ErrorFreeChannel(), signs, alpha)
  assert len(output.result) == 2
  for result, reference in zip(output.result, _weighted_reference(signs, alpha)):
    np.testing.assert_array_equal(result, reference)
  assert dict(output.measurements) == dict(
      bits=_NUM_CLIENTS * _BITS_PER_CLIENT, bit_errors=0.0, outages=0.0, sum=())


def test_flipping_every_bit_negates_the_weighted_vote():
  rng = np.random.default_rng(1)
  signs, alpha = _random_signs(rng, _NUM_CLIENTS), _random_alpha(rng)
  output = _aggregate_weighted(channels.BinarySymmetricChannel(1.0), signs, alpha)
  for result, reference in zip(output.result, _weighted_reference(signs, alpha)):
    np.testing.assert_array_equal(result, -reference)
  assert output.measurements['bits'] == output.measurements['bit_errors'] == _NUM_CLIENTS * _BITS_PER_CLIENT


def test_each_client_transmits_its_packet_with_its_own_seed_before_weighting():
  rng = np.random.default_rng(2)
  signs, alpha = _random_signs(rng, _NUM_CLIENTS), _random_alpha(rng)
  channel = channels.BinarySymmetricChannel(0.5)
  received = [channel.transmit(s, tf.constant(seed)) for s, seed in zip(signs, _seeds(_NUM_CLIENTS))]
  output = _aggregate_weighted(channel, signs, alpha)
  reference = _weighted_reference([[r.numpy() for r in packet] for packet, _ in received], alpha)
  for result, expected in zip(output.result, reference):
    np.testing.assert_array_equal(result, expected)
  assert output.measurements['bit_errors'] == sum(stats['bit_errors'] for _, stats in received)


def test_a_dropped_packet_contributes_nothing():
  rng = np.random.default_rng(3)
  signs, alpha = _random_signs(rng, _NUM_CLIENTS), _random_alpha(rng)
  output = _aggregate_weighted(channels.BlockOutageChannel(-30.0), signs, alpha)  # P_out = 1 - e^-1000
  for result in output.result:
    np.testing.assert_array_equal(result, 0.0)
  assert output.measurements['outages'] == _NUM_CLIENTS


def test_secure_sum_inner_factory_gives_the_weighted_vote_up_to_quantisation():
  rng = np.random.default_rng(4)
  signs, alpha = _random_signs(rng, _NUM_CLIENTS), _random_alpha(rng)
  output = _aggregate_weighted(channels.ErrorFreeChannel(), signs, alpha,
                               tff.aggregators.SecureSumFactory(1.0, -1.0))
  for result, reference in zip(output.result, _weighted_reference(signs, alpha)):
    np.testing.assert_allclose(result, reference, atol=1e-6)
  assert output.measurements['bits'] == _NUM_CLIENTS * _BITS_PER_CLIENT
  assert 'secure_upper_clipped_count' in output.measurements['sum']


def test_majority_vote_equals_the_sign_of_the_sum_and_ties_give_zero():
  rng = np.random.default_rng(5)
  signs = _random_signs(rng, 4)  # an even number of clients, so some coordinates tie
  output = _aggregate_votes(channels.ErrorFreeChannel(), 'vote', signs)
  num_ties = 0
  for j, result in enumerate(output.result):
    reference = np.sign(sum(s[j] for s in signs))
    np.testing.assert_array_equal(result, reference)
    num_ties += np.sum(reference == 0)
  assert num_ties > 0
  assert dict(output.measurements) == dict(bits=4 * _BITS_PER_CLIENT, bit_errors=0.0, outages=0.0)


def test_majority_vote_of_opposite_clients_is_zero():
  signs = _random_signs(np.random.default_rng(6), 1)
  output = _aggregate_votes(channels.ErrorFreeChannel(), 'vote', [signs[0], [-s for s in signs[0]]])
  for result in output.result:
    np.testing.assert_array_equal(result, 0.0)


def test_mean_mode_equals_the_mean_of_signs():
  signs = _random_signs(np.random.default_rng(7), _NUM_CLIENTS)
  output = _aggregate_votes(channels.ErrorFreeChannel(), 'mean', signs)
  for j, result in enumerate(output.result):
    np.testing.assert_array_equal(result, sum(s[j] for s in signs) / np.float32(_NUM_CLIENTS))


def test_flipping_every_bit_negates_the_majority_vote():
  signs = _random_signs(np.random.default_rng(8), _NUM_CLIENTS)
  output = _aggregate_votes(channels.BinarySymmetricChannel(1.0), 'vote', signs)
  for j, result in enumerate(output.result):
    np.testing.assert_array_equal(result, -np.sign(sum(s[j] for s in signs)))
  assert output.measurements['bit_errors'] == _NUM_CLIENTS * _BITS_PER_CLIENT


def test_signs_may_be_a_single_tensor_or_a_struct_without_python_container():
  signs_type = tff.StructType([('b', (np.float32, [_NUM_MODELS, 3])), ('a', (np.float32, [_NUM_MODELS]))])
  value_type = tff.StructType([('signs', signs_type), ('weights', (np.float32, [_NUM_MODELS])),
                               ('seed', (np.int32, [2]))])
  process = sign_vote.WeightedSignVoteFactory().create(value_type)
  signs = collections.OrderedDict(b=np.ones([_NUM_MODELS, 3], np.float32), a=-np.ones([_NUM_MODELS], np.float32))
  alpha = np.array([0.5, 0.25, 0.0, 1.0], np.float32)
  value = collections.OrderedDict(signs=signs, weights=alpha, seed=np.array([1, 2], np.int32))
  output = process.next(process.initialize(), [value, value])
  np.testing.assert_array_equal(output.result['b'], np.tile(2.0 * alpha[:, None], (1, 3)))
  np.testing.assert_array_equal(output.result['a'], -2.0 * alpha)

  process = sign_vote.MajorityVoteFactory().create(tff.to_type(
      collections.OrderedDict(signs=(np.float32, [3]), seed=_SEED_TYPE)))
  values = [collections.OrderedDict(signs=np.array(s, np.float32), seed=np.array([m, 0], np.int64))
            for m, s in enumerate([[1, 1, -1], [1, -1, -1], [-1, -1, 1]])]
  np.testing.assert_array_equal(process.next(process.initialize(), values).result, [1.0, -1.0, -1.0])


@pytest.mark.parametrize('value_type', [
    tff.TensorType(np.float32, [_NUM_MODELS, 3]),
    tff.to_type(collections.OrderedDict(weights=(np.float32, [_NUM_MODELS]), signs=_SIGNS_TYPE, seed=_SEED_TYPE)),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, weights=(np.float32, [_NUM_MODELS]))),
    tff.to_type(collections.OrderedDict(signs=[(np.float64, [_NUM_MODELS, 3])], weights=(np.float32, [_NUM_MODELS]),
                                        seed=_SEED_TYPE)),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, weights=(np.float32, [_NUM_MODELS]),
                                        seed=(np.float32, [2]))),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, weights=(np.float32, [_NUM_MODELS]),
                                        seed=(np.int64, [3]))),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, weights=(np.float32, [3]), seed=_SEED_TYPE)),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, weights=(np.float32, [None]), seed=_SEED_TYPE)),
    tff.to_type(collections.OrderedDict(signs=[(np.float32, [])], weights=(np.float32, [1]), seed=_SEED_TYPE)),
    _VOTE_TYPE,
])
def test_weighted_vote_rejects_wrong_value_types(value_type):
  with pytest.raises(TypeError, match='value_type'):
    sign_vote.WeightedSignVoteFactory().create(value_type)


@pytest.mark.parametrize('value_type', [
    tff.TensorType(np.float32, [3]),
    _WEIGHTED_TYPE,
    tff.to_type(collections.OrderedDict(seed=_SEED_TYPE, signs=_SIGNS_TYPE)),
    tff.to_type(collections.OrderedDict(signs=[(np.int32, [3])], seed=_SEED_TYPE)),
    tff.to_type(collections.OrderedDict(signs=_SIGNS_TYPE, seed=(np.int64, [2, 1]))),
])
def test_majority_vote_rejects_wrong_value_types(value_type):
  with pytest.raises(TypeError, match='value_type'):
    sign_vote.MajorityVoteFactory().create(value_type)


def test_bad_constructor_arguments():
  with pytest.raises(ValueError, match="mode must be one of \\('vote', 'mean'\\), got 'median'"):
    sign_vote.MajorityVoteFactory(mode='median')
  with pytest.raises(TypeError, match='channel must be a channels.Channel'):
    sign_vote.MajorityVoteFactory(channel='bsc')
  with pytest.raises(TypeError, match='channel must be a channels.Channel'):
    sign_vote.WeightedSignVoteFactory(channel=None)
  with pytest.raises(TypeError, match='sum_factory'):
    sign_vote.WeightedSignVoteFactory(sum_factory=tff.aggregators.MeanFactory())
