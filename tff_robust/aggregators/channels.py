"""Wireless uplink models for one device's packet of ±1 sign bits in one round (MtFEEL §II-A, §VI).

MtFEEL (Mahara et al., arXiv:2108.02517) devices upload sign(gradient) bits over a SISO Rayleigh flat-fading
uplink, eq. (5): y = h x + z, h ~ CN(0, 1), z ~ CN(0, σ^2), SNR = P / σ^2 (bandwidth B absorbed). The paper
does not say how bits were corrupted in its experiments, so three models are offered:
  - `RayleighBPSKChannel`: every bit in its own slot with its own fade, coherent BPSK detection (Fig. 4a);
  - `BlockOutageChannel`: one fade per packet and the outage event of Theorem 3 / App. E;
  - `BinarySymmetricChannel`: every bit flipped independently with probability p (Fig. 4b).

Every channel is pure TensorFlow driven by a stateless seed, so the same seed gives the same packet, inside
or outside a `tff.tensorflow.computation`.
"""

import abc
import collections
import dataclasses

import numpy as np
import tensorflow as tf

from tff_robust.aggregators import type_checks

CHANNEL_NAMES = ('none', 'rayleigh', 'outage', 'bsc')
OUTAGE_ACTIONS = ('drop', 'random')


def _linear(snr_db):
  """SNR = 10^(SNR_dB / 10), in float64."""
  return np.power(10.0, np.asarray(snr_db, np.float64) / 10.0)


def bpsk_rayleigh_bit_error_rate(snr_db):
  """P_b = ½(1 − √(SNR/(1+SNR))) of coherent BPSK over Rayleigh fading (MtFEEL notes §3.5 (B)).

  Computed as ½ / ((1 + SNR)(1 + √(SNR/(1+SNR)))), the same value without the cancellation at high SNR.
  """
  snr = _linear(snr_db)
  return 0.5 / ((1.0 + snr) * (1.0 + np.sqrt(snr / (1.0 + snr))))


def outage_probability(snr_db, rate):
  """P_out = P[log2(1 + |h|^2 SNR) < r] = 1 − exp(−(2^r − 1)/SNR) for |h|^2 ~ Exp(1) (Theorem 3, App. E).

  r = d/B is the rate in bits per channel use.
  """
  return -np.expm1(-np.expm1(np.asarray(rate, np.float64) * np.log(2.0)) / _linear(snr_db))


class Channel(abc.ABC):
  """One device's uplink for one round: sends a packet of ±1 signs, returns what the base station decodes."""

  def transmit(self, signs, seed):
    """Sends `signs` over the channel.

    Args:
      signs: a tensor or a structure (list, tuple, dict) of float32 tensors with entries in {−1, +1}: one
        device's packet for one round.
      seed: an int32 or int64 tensor of shape [2], the stateless RNG seed of this transmission. Every tensor
        of the structure draws from its own seed (the position folded in), so the tensors are independent.

    Returns:
      (received, stats): `received` has the structure of `signs` with entries ±1, or 0 for bits dropped in
      an outage; `stats` is an OrderedDict of float32 scalars: `bits` (bits sent), `bit_errors` (received
      entries != sent ones) and `outages` (1. if the packet was lost in an outage, else 0.). The counts
      are exact up to 2^24.
    """
    sent = [tf.convert_to_tensor(tensor, tf.float32) for tensor in tf.nest.flatten(signs)]
    received, outage = self._receive(sent, tf.convert_to_tensor(seed))
    zero = tf.zeros([], tf.float32)
    bits = sum((tf.cast(tf.size(s, out_type=tf.int64), tf.float32) for s in sent), zero)
    errors = sum((tf.reduce_sum(tf.cast(tf.not_equal(r, s), tf.float32)) for r, s in zip(received, sent)), zero)
    stats = collections.OrderedDict(bits=bits, bit_errors=errors, outages=tf.cast(outage, tf.float32))
    return tf.nest.pack_sequence_as(signs, received), stats

  @abc.abstractmethod
  def expected_bit_error_rate(self) -> float:
    """The probability that a received entry differs from the sent one (closed form)."""

  @abc.abstractmethod
  def _receive(self, sent, seed):
    """(received tensors, scalar bool outage) for the flat list of `sent` tensors."""


class _BitwiseChannel(Channel):
  """A memoryless channel: every bit is corrupted independently and the packet is never lost."""

  def _receive(self, sent, seed):
    received = [self._corrupt(tensor, _tensor_seed(seed, position)) for position, tensor in enumerate(sent)]
    return received, tf.constant(False)

  @abc.abstractmethod
  def _corrupt(self, signs, seed):
    """The received version of the float32 ±1 tensor `signs`."""


@dataclasses.dataclass(frozen=True)
class ErrorFreeChannel(_BitwiseChannel):
  """The ideal uplink: received = sent."""

  def _corrupt(self, signs, seed):
    return signs

  def expected_bit_error_rate(self) -> float:
    """0: every bit arrives as sent."""
    return 0.0


@dataclasses.dataclass(frozen=True)
class RayleighBPSKChannel(_BitwiseChannel):
  """Per-symbol BPSK over i.i.d. Rayleigh fading with coherent detection, simulated symbol by symbol.

  Each bit b ∈ {±1} is sent as x = b (unit power) in its own slot, eq. (5): y = h x + z with its own
  h ~ CN(0, 1) and z ~ CN(0, 1/SNR), SNR = 10^(snr_db/10). The receiver knows h and decides
  b̂ = sign(Re(conj(h) y)) (a tie decides +1). Bit error probability ½(1 − √(SNR/(1+SNR))).
  """

  snr_db: float

  def __post_init__(self):
    object.__setattr__(self, 'snr_db', type_checks.check_number('snr_db', self.snr_db))

  def _corrupt(self, signs, seed):
    # Re and Im of h and of z / σ, each N(0, 1/2), so that h and z / σ are CN(0, 1).
    parts = tf.unstack(
        tf.random.stateless_normal(tf.concat([[4], tf.shape(signs)], 0), seed, stddev=np.sqrt(0.5)), num=4
    )
    noise_std = np.float32(1.0 / np.sqrt(_linear(self.snr_db)))
    fade = tf.complex(parts[0], parts[1])
    noise = tf.complex(noise_std * parts[2], noise_std * parts[3])
    received = fade * tf.complex(signs, tf.zeros_like(signs)) + noise
    statistic = tf.math.real(tf.math.conj(fade) * received)
    return tf.where(statistic >= 0.0, tf.ones_like(signs), -tf.ones_like(signs))

  def expected_bit_error_rate(self) -> float:
    """BPSK's bit error rate over Rayleigh fading at this SNR, (1 - sqrt(g / (1 + g))) / 2 with g the linear SNR
    (`bpsk_rayleigh_bit_error_rate`)."""
    return float(bpsk_rayleigh_bit_error_rate(self.snr_db))


@dataclasses.dataclass(frozen=True)
class BlockOutageChannel(Channel):
  """The block-fading outage channel of Theorem 3 / App. E: the whole packet gets through or none of it.

  One |h|^2 ~ Exp(1) per transmission (the whole packet); outage iff log2(1 + |h|^2 SNR) < rate, with
  SNR = 10^(snr_db/10) and `rate` = d/B bits per channel use, so P_out = 1 − exp(−(2^rate − 1)/SNR). The
  paper's printed event O is the success event (notes §6 item 12). What the base station makes of a lost
  packet is not specified: `on_outage='drop'` receives all zeros (the device contributes nothing),
  `'random'` receives i.i.d. uniform ±1.
  """

  snr_db: float
  rate: float = 1.0
  on_outage: str = 'drop'

  def __post_init__(self):
    object.__setattr__(self, 'snr_db', type_checks.check_number('snr_db', self.snr_db))
    object.__setattr__(self, 'rate', type_checks.check_number('rate', self.rate, minimum=0.0, strict=True))
    if self.on_outage not in OUTAGE_ACTIONS:
      raise ValueError(f'on_outage must be one of {OUTAGE_ACTIONS}, got {self.on_outage!r}')

  def _receive(self, sent, seed):
    fade_seed, bits_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    gain = -tf.math.log1p(-tf.random.stateless_uniform([], fade_seed))  # |h|^2 ~ Exp(1)
    capacity = tf.math.log1p(gain * np.float32(_linear(self.snr_db))) / np.log(2.0)
    outage = capacity < self.rate
    return tf.cond(outage, lambda: self._lost_packet(sent, bits_seed), lambda: sent), outage

  def _lost_packet(self, sent, seed):
    """What the base station decodes from a packet lost in an outage: zeros, or uniform ±1 garbage."""
    if self.on_outage == 'drop':
      return [tf.zeros_like(tensor) for tensor in sent]
    return [_uniform_signs(tensor, _tensor_seed(seed, position)) for position, tensor in enumerate(sent)]

  def expected_bit_error_rate(self) -> float:
    """P_out for 'drop' (a dropped entry 0 never equals the sent ±1), P_out / 2 for 'random'."""
    return float(outage_probability(self.snr_db, self.rate)) * (1.0 if self.on_outage == 'drop' else 0.5)


@dataclasses.dataclass(frozen=True)
class BinarySymmetricChannel(_BitwiseChannel):
  """BSC(p): every bit is flipped independently with probability p (the paper's bit-flip model, Fig. 4b)."""

  flip_probability: float

  def __post_init__(self):
    object.__setattr__(self, 'flip_probability', type_checks.check_number(
        'flip_probability', self.flip_probability, minimum=0.0, maximum=1.0))

  def _corrupt(self, signs, seed):
    flips = tf.random.stateless_uniform(tf.shape(signs), seed) < self.flip_probability
    return tf.where(flips, -signs, signs)

  def expected_bit_error_rate(self) -> float:
    """The flip probability p: each bit is flipped independently with probability p."""
    return self.flip_probability


def _tensor_seed(seed, position):
  """The seed of the packet's tensor number `position`: `seed` with the position folded in."""
  return tf.random.experimental.stateless_fold_in(seed, position)


def _uniform_signs(like, seed):
  """I.i.d. uniform ±1 float32 entries in the shape of `like`."""
  return tf.where(tf.random.stateless_uniform(tf.shape(like), seed) < 0.5, -tf.ones_like(like), tf.ones_like(like))


def create_channel(
    name: str, *, snr_db: float = 10.0, flip_probability: float = 0.0, outage_rate: float = 1.0,
    on_outage: str = 'drop',
) -> Channel:
  """The channel called `name` (one of `CHANNEL_NAMES`), taking only the keyword arguments it uses.

  'none' -> ErrorFreeChannel(); 'rayleigh' -> RayleighBPSKChannel(snr_db);
  'outage' -> BlockOutageChannel(snr_db, outage_rate, on_outage); 'bsc' -> BinarySymmetricChannel(flip_probability).

  Raises:
    ValueError: for an unknown `name`, a non-finite number (used by the chosen channel or not), or an argument
      of the chosen channel outside its range.
  """
  for argument, value in (('snr_db', snr_db), ('flip_probability', flip_probability), ('outage_rate', outage_rate)):
    type_checks.check_number(argument, value)
  if name == 'none':
    return ErrorFreeChannel()
  if name == 'rayleigh':
    return RayleighBPSKChannel(snr_db)
  if name == 'outage':
    return BlockOutageChannel(snr_db, outage_rate, on_outage)
  if name == 'bsc':
    return BinarySymmetricChannel(flip_probability)
  raise ValueError(f'channel must be one of {CHANNEL_NAMES}, got {name!r}')
