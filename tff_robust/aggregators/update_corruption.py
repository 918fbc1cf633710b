"""Simulation-only update poisoning of the RFA paper (Sec. 5.1, App. D.2.1) as an aggregation wrapper.

The wrapped process takes `<update, is_corrupted>` from each client (see
`tff_robust.simulation.update_corruption_process`), replaces the updates of corrupted clients, then runs
the inner aggregator (mean, geometric median, a baseline) on all updates with the clients' weights:
  - 'gaussian': the update becomes sigma * N(0, I) ('replace', App. D.2.1 and the authors' code) or gets
    sigma * N(0, I) added ('add', the main text), sigma = the std of the update's own components.
  - 'omniscient': every corrupted client sends -(2 S_G + S_C) / A_C, with S_G and S_C the weighted sums of
    the honest and corrupted clients' updates and A_C the corrupted weight, so that the cohort's weighted
    mean becomes the negative of what it would have been. The attacker's sums use `tff.federated_sum`
    (it is omniscient); this wrapper is a simulation of an adversary, never a deployment component.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import type_checks

ATTACKS = ('gaussian', 'omniscient')
GAUSSIAN_MODES = ('replace', 'add')


class UpdateCorruptionFactory(tff.aggregators.WeightedAggregationFactory):
  """Corrupts flagged clients' updates, then aggregates with `inner_factory`.

  Measurements: those of the inner aggregator, plus `num_corrupted_clients` in the cohort.
  """

  def __init__(self, attack: str, inner_factory: tff.aggregators.WeightedAggregationFactory,
               gaussian_mode: str = 'replace', seed: int = 0):
    if attack not in ATTACKS:
      raise ValueError(f'attack must be one of {ATTACKS}, got {attack!r}')
    if gaussian_mode not in GAUSSIAN_MODES:
      raise ValueError(f'gaussian_mode must be one of {GAUSSIAN_MODES}, got {gaussian_mode!r}')
    if not isinstance(inner_factory, tff.aggregators.WeightedAggregationFactory):
      raise TypeError(f'inner_factory must be a tff.aggregators.WeightedAggregationFactory, got {inner_factory!r}')
    self._attack = attack
    self._inner_factory = inner_factory
    self._gaussian_mode = gaussian_mode
    self._seed = int(seed)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    if not (isinstance(value_type, tff.StructType) and len(value_type) == 2
            and value_type[1] == tff.TensorType(np.bool_)):
      raise TypeError(f'value_type must be <update, bool is_corrupted>, got {value_type}')
    update_type = value_type[0]
    type_checks.check_value_type(update_type)
    type_checks.check_weight_type(weight_type)
    inner = self._inner_factory.create(update_type, weight_type)
    inner_measurement_names = tff.structure.name_list(inner.next.type_signature.result.measurements.member)
    gaussian_mode, seed = self._gaussian_mode, self._seed

    @tff.tensorflow.computation(update_type, np.bool_, np.int32)
    def gaussian_attack(update, corrupted, round_num):
      def attacked():
        leaves = tf.nest.flatten(update)
        flat = tf.concat([tf.reshape(tf.cast(t, tf.float32), [-1]) for t in leaves], 0)
        sigma = tf.math.reduce_std(flat)
        # Deterministic per (seed, round, update): the fingerprint tells clients apart without identities.
        fingerprint = tf.reduce_sum(tf.cast(tf.bitcast(flat, tf.int32), tf.int64)) % 2147483647
        seed_base = tf.stack([seed + round_num, tf.cast(fingerprint, tf.int32)])
        noises = tf.nest.pack_sequence_as(update, [
            tf.cast(sigma * tf.random.stateless_normal(tf.shape(t), seed=seed_base + [0, i]), t.dtype)
            for i, t in enumerate(leaves)
        ])
        if gaussian_mode == 'replace':
          return noises
        return tf.nest.map_structure(tf.add, update, noises)
      return tf.cond(corrupted, attacked, lambda: update)

    @tff.tensorflow.computation(update_type, np.bool_, weight_type)
    def split_by_honesty(update, corrupted, weight):
      honest_weight = tf.where(corrupted, tf.zeros_like(weight), weight)
      corrupted_weight = weight - honest_weight
      scale = lambda w: tf.nest.map_structure(lambda t: t * tf.cast(w, t.dtype), update)
      return scale(honest_weight), scale(corrupted_weight), corrupted_weight

    @tff.tensorflow.computation(update_type, update_type, weight_type)
    def omniscient_target(honest_sum, corrupted_sum, corrupted_weight):
      return tf.nest.map_structure(
          lambda g, c: tf.math.divide_no_nan(-(2 * g + c), tf.cast(corrupted_weight, g.dtype)),
          honest_sum, corrupted_sum,
      )

    @tff.tensorflow.computation(update_type, np.bool_, update_type)
    def replace_if_corrupted(update, corrupted, target):
      return tf.cond(corrupted, lambda: target, lambda: update)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_zip(collections.OrderedDict(
          inner=inner.initialize(), round_num=tff.federated_value(0, tff.SERVER)
      ))

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      update, corrupted = value[0], value[1]
      if self._attack == 'gaussian':
        update = tff.federated_map(
            gaussian_attack, (update, corrupted, tff.federated_broadcast(state.round_num))
        )
      else:
        sums = tff.federated_map(split_by_honesty, (update, corrupted, weight))
        target = tff.federated_map(omniscient_target, (
            tff.federated_sum(sums[0]), tff.federated_sum(sums[1]), tff.federated_sum(sums[2])
        ))
        update = tff.federated_map(replace_if_corrupted, (update, corrupted, tff.federated_broadcast(target)))
      output = inner.next(state.inner, update, weight)
      measurements = collections.OrderedDict(
          (name, output.measurements[name]) for name in inner_measurement_names
      )
      measurements['num_corrupted_clients'] = federated_counting.count_flagged_clients(corrupted)
      new_state = collections.OrderedDict(
          inner=output.state, round_num=federated_counting.increment(state.round_num)
      )
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip(new_state), result=output.result,
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
