"""Aggregation of gradient signs sent over a simulated uplink: MtFEEL's α-weighted sum and signSGD's vote.

Each client value carries the stateless seed of its own uplink transmission (clients are anonymous in TFF,
so the client work derives a distinct seed per device and round and sends it along). The channel acts on
the device's whole packet of ±1 signs before anything else is done with them.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import channels
from tff_robust.aggregators import type_checks

VOTE_MODES = ('vote', 'mean')


class WeightedSignVoteFactory(tff.aggregators.UnweightedAggregationFactory):
  """The α-weighted soft vote of MtFEEL eq. (9): for every personal model k, sum_m α_km s̃_km.

  Device m sends s_km = sign(∇_{w_k} L̂(w_k, S_m)) for every model k = 1..N over its uplink and the base
  station receives s̃_km; the result is sum_m α_km s̃_km per model k, the sum part of eq. (9)
  (G_k = λ_k sum_m α_km s̃_km + γ_k sign(w_k); λ_k and γ_k are the caller's). There is no outer sign():
  each coordinate is a soft vote in [−sum_m α_km, +sum_m α_km].

  `value_type` is a `tff.StructType` with fields, in this order:
    - `signs`: a float32 tensor or structure of float32 tensors, each with leading dimension N (row k holds
      device m's s_km), entries ±1;
    - `weights`: float32 [N], device m's α column (α_1m, ..., α_Nm);
    - `seed`: int64 (or int32) [2], the seed of device m's transmission this round.
  Each client applies the channel to its whole packet, then scales row k of every tensor by α_km.

  The sum is linear in the client values, so the inner `sum_factory` may be a secure sum: with α in the
  simplex every entry lies in [−1, 1], e.g. `tff.aggregators.SecureSumFactory(1.0, -1.0)`, which sums the
  weighted signs in fixed point (α quantised accordingly).

  The state is the inner sum's state. Measurements: `bits`, `bit_errors` and `outages` of the channel
  (float32, summed over clients; see `channels.Channel.transmit`) and `sum`, the inner sum's measurements.
  """

  def __init__(
      self,
      channel: channels.Channel = channels.ErrorFreeChannel(),
      sum_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      channel: the uplink, a `channels.Channel`.
      sum_factory: a `tff.aggregators.UnweightedAggregationFactory` for the sum over clients; defaults to
        `tff.aggregators.SumFactory()`.

    Raises:
      TypeError: if an argument has the wrong type.
    """
    _check_channel(channel)
    sum_factory = type_checks.sum_factory_or_default(sum_factory)
    self._channel = channel
    self._sum_factory = sum_factory

  def create(self, value_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type` (TFF's `create`): the computation, state
    and measurements the class docstring describes. `value_type` is <signs, weights, seed>."""
    _check_value_type(value_type, ('signs', 'weights', 'seed'))
    num_models = _num_models(value_type)
    signs_type = value_type.signs
    channel = self._channel

    @tff.tensorflow.computation(value_type)
    def transmit_and_weight(value):
      """Client m: (α_km s̃_km for every k, channel stats)."""
      signs = tff.types.type_to_py_container(value['signs'], signs_type)
      received, stats = channel.transmit(signs, value['seed'])
      alpha = value['weights']
      weighted = tf.nest.map_structure(
          lambda tensor: tf.reshape(alpha, [num_models] + [1] * (tensor.shape.rank - 1)) * tensor, received
      )
      return weighted, stats

    sum_process = self._sum_factory.create(transmit_and_weight.type_signature.result[0])

    @tff.federated_computation()
    def init_fn():
      return sum_process.initialize()

    @tff.federated_computation(init_fn.type_signature.result, tff.FederatedType(value_type, tff.CLIENTS))
    def next_fn(state, value):
      weighted, stats = tff.federated_map(transmit_and_weight, value)
      output = sum_process.next(state, weighted)
      return tff.templates.MeasuredProcessOutput(
          state=output.state,
          result=output.result,
          measurements=_measurements(stats, sum=output.measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)


class MajorityVoteFactory(tff.aggregators.UnweightedAggregationFactory):
  """signSGD's aggregation of sign(gradient) (Bernstein et al., the 'sign FedSGD' baseline of MtFEEL §VII).

  Every client m sends its signs s_m over the channel and the server receives s̃_m; the result is
    - `mode='vote'`: the majority vote sign(sum_m s̃_m) (a tie, or nothing received, gives 0);
    - `mode='mean'`: the mean of signs (1/M) sum_m s̃_m over the M clients (0 for M = 0).

  `value_type` is a `tff.StructType` with fields `signs` (a float32 tensor or structure of float32 tensors,
  any shapes, entries ±1) and `seed` (int64 or int32 [2], the seed of this client's transmission), in
  this order. There is no state. Measurements: `bits`, `bit_errors` and `outages` of the channel (float32,
  summed over clients; see `channels.Channel.transmit`).
  """

  def __init__(self, channel: channels.Channel = channels.ErrorFreeChannel(), mode: str = 'vote'):
    """Initializes the factory.

    Args:
      channel: the uplink, a `channels.Channel`.
      mode: 'vote' or 'mean', see the class docstring.

    Raises:
      TypeError: if `channel` is not a `channels.Channel`.
      ValueError: if `mode` is not in `VOTE_MODES`.
    """
    _check_channel(channel)
    if mode not in VOTE_MODES:
      raise ValueError(f'mode must be one of {VOTE_MODES}, got {mode!r}')
    self._channel = channel
    self._mode = mode

  def create(self, value_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type` (TFF's `create`): the computation, state
    and measurements the class docstring describes. `value_type` is <signs, seed>."""
    _check_value_type(value_type, ('signs', 'seed'))
    signs_type = value_type.signs
    channel = self._channel

    @tff.tensorflow.computation(value_type)
    def transmit(value):
      """Client m: (s̃_m, channel stats)."""
      return channel.transmit(tff.types.type_to_py_container(value['signs'], signs_type), value['seed'])

    received_type = transmit.type_signature.result[0]

    @tff.tensorflow.computation(received_type)
    def majority(total):
      return tf.nest.map_structure(tf.sign, tff.types.type_to_py_container(total, signs_type))

    @tff.tensorflow.computation(received_type, tff.TensorType(np.float32))
    def mean(total, count):
      total = tff.types.type_to_py_container(total, signs_type)
      return tf.nest.map_structure(lambda t: tf.math.divide_no_nan(t, count), total)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(init_fn.type_signature.result, tff.FederatedType(value_type, tff.CLIENTS))
    def next_fn(state, value):
      received, stats = tff.federated_map(transmit, value)
      total = tff.federated_sum(received)
      if self._mode == 'vote':
        result = tff.federated_map(majority, total)
      else:
        count = tff.federated_sum(tff.federated_value(np.float32(1.0), tff.CLIENTS))
        result = tff.federated_map(mean, (total, count))
      return tff.templates.MeasuredProcessOutput(state=state, result=result, measurements=_measurements(stats))

    return tff.templates.AggregationProcess(init_fn, next_fn)


def _check_channel(channel) -> None:
  if not isinstance(channel, channels.Channel):
    raise TypeError(f'channel must be a channels.Channel, got {channel!r}')


def _check_value_type(value_type, field_names) -> None:
  """value_type must be a StructType with exactly `field_names`: float32 `signs`, an int [2] `seed`.

  Raises:
    TypeError: naming `value_type` and what it must be.
  """
  if not (isinstance(value_type, tff.StructType)
          and tff.structure.name_list_with_nones(value_type) == list(field_names)):
    raise TypeError(f'value_type must be a tff.StructType with fields {field_names} in this order, '
                    f'got {value_type!r}')
  signs_type = value_type.signs
  if not (isinstance(signs_type, (tff.TensorType, tff.StructType))
          and all(isinstance(t, tff.TensorType) and t.dtype == np.float32 for t in _leaves(signs_type))):
    raise TypeError(f'value_type.signs must be a float32 tensor or structure of float32 tensors, '
                    f'got {signs_type}')
  seed_type = value_type.seed
  if not (isinstance(seed_type, tff.TensorType) and seed_type.dtype in (np.int32, np.int64)
          and seed_type.shape == (2,)):
    raise TypeError(f'value_type.seed must be an int64 or int32 tensor of shape [2], got {seed_type}')


def _num_models(value_type) -> int:
  """N, if value_type.weights is float32 [N] and every tensor of value_type.signs has leading dimension N.

  Raises:
    TypeError: naming `value_type` and what it must be.
  """
  weights_type = value_type.weights
  if not (isinstance(weights_type, tff.TensorType) and weights_type.dtype == np.float32
          and weights_type.shape is not None and len(weights_type.shape) == 1
          and weights_type.shape[0] is not None):
    raise TypeError(f'value_type.weights must be a float32 tensor of shape [N], N known, got {weights_type}')
  num_models = weights_type.shape[0]
  if not all(t.shape and t.shape[0] == num_models for t in _leaves(value_type.signs)):
    raise TypeError(f'every tensor of value_type.signs must have leading dimension N = {num_models} (the '
                    f'length of value_type.weights), got {value_type.signs}')
  return num_models


def _leaves(type_spec):
  """The tensor types of a tensor type or (nested) struct type."""
  if isinstance(type_spec, tff.StructType):
    return [leaf for _, member in tff.structure.iter_elements(type_spec) for leaf in _leaves(member)]
  return [type_spec]


def _measurements(stats_at_clients, **extra_at_server):
  """The channel stats summed over clients, and the server-placed `extra_at_server`, zipped at the server."""
  totals = tff.federated_sum(stats_at_clients)
  return tff.federated_zip(collections.OrderedDict(
      bits=totals.bits, bit_errors=totals.bit_errors, outages=totals.outages, **extra_at_server
  ))
