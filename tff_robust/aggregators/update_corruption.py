"""Simulation-only update poisoning of the RFA paper (Sec. 5.1, App. D.2.1) as an aggregation wrapper.

The wrapped process takes `<update, is_corrupted>` from each client (see
`tff_robust.simulation.update_corruption_process`), replaces the updates of corrupted clients, then runs
the inner aggregator (mean, geometric median, a baseline) on all updates with the clients' weights:
  - 'gaussian': the update becomes sigma * N(0, I) ('replace', App. D.2.1 and the authors' code) or gets
    sigma * N(0, I) added ('add', the main text), sigma = the std of the update's own components.
  - 'omniscient': every corrupted client sends -(2 S_G + S_C) / A_C, with S_G and S_C the weighted sums of
    the honest and corrupted clients' updates and A_C the corrupted weight, so that the cohort's weighted
    mean becomes the negative of what it would have been.
  - 'alie' ("a little is enough", Baruch, Baruch, Goldberg, NeurIPS 2019, Algorithm 3): every corrupted
    client sends mu - z sigma, with mu and sigma the coordinate-wise mean and standard deviation of the
    honest updates. The paper's z_max: with n workers of which m are corrupted, s = floor(n/2 + 1) - m
    "supporters" are needed and z_max = max{z : Phi(z) < (n - s)/n} = Phi^{-1}((n - s)/n), Phi the standard
    normal CDF. Here n is the round's cohort size and m its corrupted count (both change from round to
    round); where the corrupted clients are a majority (s <= 0, Phi^{-1}(>= 1) = inf) s is taken as 1, the
    largest finite z the formula gives. `alie_z` set replaces the formula by a fixed z.
  - 'ipm' (inner-product manipulation, Xie, Koyejo, Gupta, UAI 2019 / PMLR 115, 2020): every corrupted
    client sends -epsilon mu. Karimireddy, He, Jaggi (ICML 2021; ICLR 2022) use epsilon = 0.1, our default;
    Xie et al. study several epsilon (small ones against Krum-like rules, large ones against the median);
    Blades' default is 0.5.
  - 'sign_flipping': every corrupted client sends minus its own update.

The honest statistics are weighted by the clients' aggregation weights w_i, like the omniscient attack's sums:
mu = sum_{i honest} w_i x_i / A_G and sigma^2 = sum_{i honest} w_i (x_i - mu)^2 / A_G (A_G the honest weight;
the population variance, ddof = 0). The papers and Blades use the unweighted mean and (torch's ddof = 1)
standard deviation of the honest workers; with equal weights mu is the same and sigma differs by
sqrt((k - 1)/k) for k honest clients. With no honest client mu = sigma = 0. The attacker's sums use
`tff.federated_sum` (it is omniscient); this wrapper is a simulation of an adversary, never a deployment
component.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import type_checks

ATTACKS = ('gaussian', 'omniscient', 'alie', 'ipm', 'sign_flipping')
GAUSSIAN_MODES = ('replace', 'add')
DEFAULT_IPM_EPSILON = 0.1


class UpdateCorruptionFactory(tff.aggregators.WeightedAggregationFactory):
  """Corrupts flagged clients' updates, then aggregates with `inner_factory`.

  Measurements: those of the inner aggregator, plus `num_corrupted_clients` in the cohort.
  """

  def __init__(self, attack: str, inner_factory: tff.aggregators.WeightedAggregationFactory,
               gaussian_mode: str = 'replace', seed: int = 0, *, alie_z: Optional[float] = None,
               ipm_epsilon: float = DEFAULT_IPM_EPSILON):
    if attack not in ATTACKS:
      raise ValueError(f'attack must be one of {ATTACKS}, got {attack!r}')
    if gaussian_mode not in GAUSSIAN_MODES:
      raise ValueError(f'gaussian_mode must be one of {GAUSSIAN_MODES}, got {gaussian_mode!r}')
    if alie_z is not None:  # None: the paper's z_max, each round
      type_checks.check_number('alie_z', alie_z)
    type_checks.check_number('ipm_epsilon', ipm_epsilon, minimum=0.0)
    if not isinstance(inner_factory, tff.aggregators.WeightedAggregationFactory):
      raise TypeError(f'inner_factory must be a tff.aggregators.WeightedAggregationFactory, got {inner_factory!r}')
    self._attack = attack
    self._inner_factory = inner_factory
    self._gaussian_mode = gaussian_mode
    self._seed = int(seed)
    self._alie_z = alie_z
    self._ipm_epsilon = float(ipm_epsilon)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    if not (isinstance(value_type, tff.StructType) and len(value_type) == 2
            and value_type[1] == tff.TensorType(np.bool_)):
      raise TypeError(f'value_type must be <update, bool is_corrupted>, got {value_type}')
    update_type = value_type[0]
    type_checks.check_value_type(update_type)
    type_checks.check_weight_type(weight_type)
    inner = self._inner_factory.create(update_type, weight_type)
    inner_measurement_names = tff.structure.name_list(inner.next.type_signature.result.measurements.member)
    attack, gaussian_mode, seed = self._attack, self._gaussian_mode, self._seed
    alie_z, ipm_epsilon = self._alie_z, self._ipm_epsilon

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
      return scale(honest_weight), scale(corrupted_weight), honest_weight, corrupted_weight

    @tff.tensorflow.computation(update_type, update_type, weight_type)
    def omniscient_target(honest_sum, corrupted_sum, corrupted_weight):
      return tf.nest.map_structure(
          lambda g, c: tf.math.divide_no_nan(-(2 * g + c), tf.cast(corrupted_weight, g.dtype)),
          honest_sum, corrupted_sum,
      )

    @tff.tensorflow.computation(update_type, weight_type)
    def honest_mean(honest_sum, honest_weight):
      return tf.nest.map_structure(lambda g: tf.math.divide_no_nan(g, tf.cast(honest_weight, g.dtype)), honest_sum)

    @tff.tensorflow.computation(update_type)
    def ipm_target(mean):
      return tf.nest.map_structure(lambda m: -ipm_epsilon * m, mean)

    @tff.tensorflow.computation(update_type, np.bool_, weight_type, update_type)
    def honest_squared_deviation(update, corrupted, weight, mean):
      honest_weight = tf.where(corrupted, tf.zeros_like(weight), weight)
      return tf.nest.map_structure(lambda x, m: tf.cast(honest_weight, x.dtype) * tf.square(x - m), update, mean)

    @tff.tensorflow.computation(np.int32, np.int32)
    def alie_z_max(cohort_size, num_corrupted):
      if alie_z is not None:
        return tf.constant(alie_z, tf.float64)
      supporters = tf.maximum(cohort_size // 2 + 1 - num_corrupted, 1)  # s = floor(n/2 + 1) - m, at least 1
      return tf.math.ndtri(tf.cast(cohort_size - supporters, tf.float64) / tf.cast(cohort_size, tf.float64))

    @tff.tensorflow.computation(update_type, update_type, weight_type, np.float64)
    def alie_target(mean, squared_deviation_sum, honest_weight, z):
      # multiply_no_nan: a zero sigma (one or no honest client) gives mu even where z is infinite (n = m = 1).
      return tf.nest.map_structure(
          lambda m, v: m - tf.math.multiply_no_nan(
              tf.cast(z, m.dtype), tf.sqrt(tf.math.divide_no_nan(v, tf.cast(honest_weight, v.dtype)))
          ),
          mean, squared_deviation_sum,
      )

    @tff.tensorflow.computation(update_type, np.bool_)
    def flip_sign_if_corrupted(update, corrupted):
      return tf.cond(corrupted, lambda: tf.nest.map_structure(tf.negative, update), lambda: update)

    @tff.tensorflow.computation(update_type, np.bool_, update_type)
    def replace_if_corrupted(update, corrupted, target):
      return tf.cond(corrupted, lambda: target, lambda: update)

    @tff.tensorflow.computation(np.bool_)
    def one(_):
      return tf.constant(1, tf.int32)

    def omniscient_attack_target(update, corrupted, weight):
      """The target every corrupted client sends, at the server, from the cohort's updates of this round."""
      sums = tff.federated_map(split_by_honesty, (update, corrupted, weight))
      if attack == 'omniscient':
        return tff.federated_map(omniscient_target, (
            tff.federated_sum(sums[0]), tff.federated_sum(sums[1]), tff.federated_sum(sums[3])
        ))
      honest_weight = tff.federated_sum(sums[2])
      mean = tff.federated_map(honest_mean, (tff.federated_sum(sums[0]), honest_weight))
      if attack == 'ipm':
        return tff.federated_map(ipm_target, mean)
      squared_deviations = tff.federated_map(
          honest_squared_deviation, (update, corrupted, weight, tff.federated_broadcast(mean))
      )
      z = tff.federated_map(alie_z_max, (
          tff.federated_sum(tff.federated_map(one, corrupted)), federated_counting.count_flagged_clients(corrupted)
      ))
      return tff.federated_map(alie_target, (mean, tff.federated_sum(squared_deviations), honest_weight, z))

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
      if attack == 'gaussian':
        update = tff.federated_map(
            gaussian_attack, (update, corrupted, tff.federated_broadcast(state.round_num))
        )
      elif attack == 'sign_flipping':
        update = tff.federated_map(flip_sign_if_corrupted, (update, corrupted))
      else:
        target = omniscient_attack_target(update, corrupted, weight)
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
