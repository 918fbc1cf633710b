"""Uplink channel models against their closed-form bit error and outage probabilities (MtFEEL §3.5)."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import channels

_SEED = tf.constant([20, 21], tf.int64)
_NOISY_CHANNELS = {
    'rayleigh': channels.RayleighBPSKChannel(0.0),
    'outage_drop': channels.BlockOutageChannel(0.0),
    'outage_random': channels.BlockOutageChannel(0.0, on_outage='random'),
    'bsc': channels.BinarySymmetricChannel(0.3),
}
_CHANNELS = dict(_NOISY_CHANNELS, none=channels.ErrorFreeChannel())


def _packet(shapes, seed=0):
  rng = np.random.default_rng(seed)
  return [np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32) for shape in shapes]


def _many_transmissions(channel, packet, num_transmissions):
  """(received packets stacked along a new first axis, stats stacked) of `num_transmissions` seeds."""
  seeds = tf.random.experimental.stateless_split(_SEED, num_transmissions)
  stats_signature = collections.OrderedDict(bits=tf.float32, bit_errors=tf.float32, outages=tf.float32)
  transmit_all = tf.function(lambda seeds: tf.map_fn(
      lambda seed: channel.transmit(packet, seed), seeds, parallel_iterations=64,
      fn_output_signature=([tf.float32] * len(packet), stats_signature),
  ))
  received, stats = transmit_all(seeds)
  return [r.numpy() for r in received], {name: value.numpy() for name, value in stats.items()}


def _assert_frequency(count, trials, probability):
  """count / trials is within 4 standard errors of `probability`."""
  tolerance = 4.0 * np.sqrt(probability * (1.0 - probability) / trials)
  assert abs(count / trials - probability) <= tolerance, (count / trials, probability, tolerance)


def _assert_matches_printed(values, printed, monte_carlo_trials=None):
  """Each value is its printed counterpart up to rounding (and 4 standard errors of a Monte-Carlo estimate)."""
  for value, text in zip(values, printed, strict=True):
    tolerance = 0.5 * 10.0 ** -len(text.split('.')[1])
    if monte_carlo_trials:
      tolerance += 4.0 * np.sqrt(value * (1.0 - value) / monte_carlo_trials)
    assert abs(value - float(text)) <= tolerance, (value, text)


def test_closed_forms_match_the_tables_of_the_notes():
  snr_db = np.array([-20.0, -15.0, -10.0, -5.0, 0.0, 5.0, 10.0, 15.0, 20.0, 30.0])
  snr = 10.0 ** (snr_db / 10.0)
  np.testing.assert_allclose(channels.bpsk_rayleigh_bit_error_rate(snr_db),
                             0.5 * (1.0 - np.sqrt(snr / (1.0 + snr))), rtol=1e-9)
  _assert_matches_printed(  # the notes' BER table is a Monte-Carlo estimate over 2e5 bits
      channels.bpsk_rayleigh_bit_error_rate(snr_db),
      ['0.450', '0.413', '0.349', '0.255', '0.146', '0.064', '0.023', '0.0077', '0.0025', '0.0002'],
      monte_carlo_trials=2e5,
  )
  _assert_matches_printed(channels.outage_probability([-10.0, -5.0, 0.0, 5.0, 10.0, 15.0, 20.0, 30.0], 1.0),
                          ['1.0000', '0.958', '0.632', '0.271', '0.095', '0.031', '0.010', '0.001'])
  _assert_matches_printed(channels.outage_probability([-10.0, -5.0, 0.0, 5.0, 10.0], 0.1),
                          ['0.512', '0.203', '0.069', '0.022', '0.0072'])


@pytest.mark.parametrize('snr_db', [-10.0, 0.0, 10.0, 20.0])
def test_rayleigh_bpsk_bit_error_rate_matches_the_closed_form(snr_db):
  channel = channels.RayleighBPSKChannel(snr_db)
  signs = _packet([(2**20,), (1024, 1024)])  # 2^21 bits in two tensors
  received, stats = channel.transmit(signs, _SEED)
  assert stats['bits'] == 2**21
  assert all(set(np.unique(r)) <= {-1.0, 1.0} for r in received)
  assert stats['bit_errors'] == sum(np.sum(r.numpy() != s) for r, s in zip(received, signs))
  expected = channels.bpsk_rayleigh_bit_error_rate(snr_db)
  assert channel.expected_bit_error_rate() == expected
  np.testing.assert_allclose(stats['bit_errors'] / 2**21, expected, rtol=0.05)
  assert stats['outages'] == 0


@pytest.mark.parametrize('snr_db,rate', [(0.0, 1.0), (10.0, 1.0), (-10.0, 0.1), (5.0, 2.0)])
def test_block_outage_frequency_matches_the_closed_form(snr_db, rate):
  channel = channels.BlockOutageChannel(snr_db, rate)
  _, stats = _many_transmissions(channel, _packet([(3,)]), 20000)
  assert set(np.unique(stats['outages'])) <= {0.0, 1.0}
  _assert_frequency(stats['outages'].sum(), 20000, channels.outage_probability(snr_db, rate))


def test_dropped_packets_are_all_zero_and_the_whole_packet_shares_one_outage():
  packet = _packet([(4, 3), (5,)])
  received, stats = _many_transmissions(channels.BlockOutageChannel(0.0), packet, 1000)
  lost = stats['outages'] == 1.0
  assert 0 < lost.sum() < 1000
  for r, sent in zip(received, packet):
    axes = tuple(range(1, r.ndim))
    assert np.all(np.all(r == 0.0, axis=axes) == lost)
    assert np.all(np.all(r == sent, axis=axes) == ~lost)
  np.testing.assert_array_equal(stats['bits'], 17.0)
  np.testing.assert_array_equal(stats['bit_errors'], np.where(lost, 17.0, 0.0))


def test_random_outages_receive_uniform_signs():
  packet = _packet([(40,), (6, 10)])
  channel = channels.BlockOutageChannel(-5.0, on_outage='random')
  received, stats = _many_transmissions(channel, packet, 2000)
  lost = stats['outages'] == 1.0
  assert all(set(np.unique(r)) == {-1.0, 1.0} for r in received)
  np.testing.assert_array_equal(stats['bit_errors'][~lost], 0.0)
  _assert_frequency(stats['bit_errors'][lost].sum(), 100 * lost.sum(), 0.5)
  _assert_frequency(stats['bit_errors'].sum(), 100 * 2000, channel.expected_bit_error_rate())


@pytest.mark.parametrize('flip_probability', [0.1, 0.5])
def test_bsc_flips_at_rate_p(flip_probability):
  signs = _packet([(2**19,), (2**9, 2**10)])
  received, stats = channels.BinarySymmetricChannel(flip_probability).transmit(signs, _SEED)
  assert stats['bit_errors'] == sum(np.sum(r.numpy() == -s) for r, s in zip(received, signs))
  _assert_frequency(stats['bit_errors'], 2**20, flip_probability)


@pytest.mark.parametrize('flip_probability,flip', [(0.0, 1.0), (1.0, -1.0)])
def test_bsc_edges_never_or_always_flip(flip_probability, flip):
  signs = _packet([(1000,), (30, 30)])
  received, stats = channels.BinarySymmetricChannel(flip_probability).transmit(signs, _SEED)
  for r, s in zip(received, signs):
    np.testing.assert_array_equal(r, flip * s)
  assert stats['bit_errors'] == (0.0 if flip > 0 else 1900.0)


def test_error_free_channel_returns_the_packet():
  signs = {'b': _packet([(3, 4)])[0], 'a': np.float32(-1.0)}
  received, stats = channels.ErrorFreeChannel().transmit(signs, _SEED)
  assert set(received) == {'a', 'b'}
  np.testing.assert_array_equal(received['b'], signs['b'])
  assert received['a'] == -1.0
  assert dict(stats) == dict(bits=13.0, bit_errors=0.0, outages=0.0)


@pytest.mark.parametrize('name', sorted(_CHANNELS))
def test_same_seed_same_packet_inside_and_outside_a_tff_computation(name):
  channel = _CHANNELS[name]
  signs = _packet([(3, 4), (5,)])

  @tff.tensorflow.computation(tff.to_type([(np.float32, [3, 4]), (np.float32, [5])]),
                              tff.TensorType(np.int64, [2]))
  def transmit(packet, seed):
    return channel.transmit(packet, seed)

  for seed in ([1, 2], [3, 4]):
    eager_received, eager_stats = channel.transmit(signs, tf.constant(seed, tf.int64))
    again_received, again_stats = channel.transmit(signs, tf.constant(seed, tf.int64))
    tff_received, tff_stats = transmit(signs, np.array(seed, np.int64))
    for eager, again, in_tff in zip(eager_received, again_received, tff_received):
      np.testing.assert_array_equal(eager, again)
      np.testing.assert_array_equal(eager, in_tff)
    assert dict(eager_stats) == dict(again_stats) == {k: float(v) for k, v in tff_stats.items()}


@pytest.mark.parametrize('name', sorted(_NOISY_CHANNELS))
def test_different_seeds_and_different_tensors_get_different_noise(name):
  channel = _NOISY_CHANNELS[name]
  if isinstance(channel, channels.BlockOutageChannel):
    channel = channels.BlockOutageChannel(-20.0, on_outage='random')  # outage almost surely
  ones = np.ones([1000], np.float32)
  first, _ = channel.transmit([ones, ones], tf.constant([1, 2], tf.int64))
  second, _ = channel.transmit([ones, ones], tf.constant([1, 3], tf.int64))
  assert np.any(first[0].numpy() != second[0].numpy())
  assert np.any(first[0].numpy() != first[1].numpy())  # the tensors of one packet are independent


def test_int32_seeds_work():
  received, stats = channels.BinarySymmetricChannel(0.5).transmit([np.ones([8], np.float32)],
                                                                  tf.constant([1, 2], tf.int32))
  assert received[0].shape == (8,) and stats['bits'] == 8.0


def test_create_channel_builds_every_name():
  assert channels.create_channel('none') == channels.ErrorFreeChannel()
  assert channels.create_channel('rayleigh', snr_db=-3.0) == channels.RayleighBPSKChannel(-3.0)
  assert (channels.create_channel('outage', snr_db=5.0, outage_rate=0.5, on_outage='random')
          == channels.BlockOutageChannel(5.0, 0.5, 'random'))
  assert channels.create_channel('bsc', flip_probability=0.2) == channels.BinarySymmetricChannel(0.2)
  assert channels.CHANNEL_NAMES == ('none', 'rayleigh', 'outage', 'bsc')


@pytest.mark.parametrize('make,argument', [
    (lambda: channels.RayleighBPSKChannel(float('nan')), 'snr_db'),
    (lambda: channels.BlockOutageChannel(float('inf')), 'snr_db'),
    (lambda: channels.BlockOutageChannel(10.0, rate=0.0), 'rate'),
    (lambda: channels.BlockOutageChannel(10.0, rate=-1.0), 'rate'),
    (lambda: channels.BlockOutageChannel(10.0, on_outage='x'), 'on_outage'),
    (lambda: channels.BinarySymmetricChannel(1.5), 'flip_probability'),
    (lambda: channels.BinarySymmetricChannel(-0.1), 'flip_probability'),
    (lambda: channels.create_channel('wifi'), 'channel'),
    (lambda: channels.create_channel('bsc', flip_probability=2.0), 'flip_probability'),
])
def test_bad_arguments_raise_value_errors_naming_the_argument(make, argument):
  with pytest.raises(ValueError, match=f'^{argument} must be'):
    make()


def test_unknown_channel_error_lists_the_names():
  with pytest.raises(ValueError, match=r"'none', 'rayleigh', 'outage', 'bsc'.*'wifi'"):
    channels.create_channel('wifi')
