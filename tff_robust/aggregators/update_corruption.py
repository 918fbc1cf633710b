"""Simulation-only update poisoning as an aggregation wrapper: corrupted clients' updates are replaced by an
attack's, then the inner aggregator (the defence) aggregates all updates with the clients' weights.

The wrapped process takes `<update, is_corrupted>` from each client (see
`tff_robust.simulation.update_corruption_process`). The attack is chosen by a spec (`attack='alie(z=1)'`; names,
parameters and defaults: `tff_robust.core.attacks.catalog`, implementations one module each in
`tff_robust.aggregators.attacks`, `attacks.registry`). The state keeps the round number and, for the attacks that
place their updates relative to it (ROP, the line search), the previous round's aggregate (the inner
aggregator's last result, zeros at first). The adversary is omniscient: it sums or gathers whatever it needs;
this wrapper is a simulation of an adversary, never a deployment component.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening
from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import registry
from tff_robust.core.attacks import catalog

ATTACKS = catalog.ATTACK_NAMES
DEFAULT_IPM_EPSILON = catalog.DEFAULT_IPM_EPSILON


class UpdateCorruptionFactory(tff.aggregators.WeightedAggregationFactory):
  """Corrupts flagged clients' updates with `attack`, then aggregates with `inner_factory`.

  Args:
    attack: an attack spec (`catalog.parse`), e.g. 'omniscient', 'alie(z=1)', 'min_max(direction=sign)'.
    inner_factory: the defence.
    seed: the run's seed, for the attacks that draw random numbers (gaussian, fang_trimmed_mean).
    stacked_rule: the defence as a `StackedRule`, for the attacks that evaluate it (line_search).

  Measurements: those of the inner aggregator, plus `num_corrupted_clients` in the cohort.
  """

  def __init__(self, attack, inner_factory: tff.aggregators.WeightedAggregationFactory, seed: int = 0, *,
               stacked_rule: Optional[base.StackedRule] = None):
    if not isinstance(inner_factory, tff.aggregators.WeightedAggregationFactory):
      raise TypeError(f'inner_factory must be a tff.aggregators.WeightedAggregationFactory, got {inner_factory!r}')
    self._spec = catalog.parse(attack)
    self._attack = registry.build(self._spec, stacked_rule=stacked_rule)
    self._inner_factory = inner_factory
    self._seed = int(seed)

  @property
  def attack(self) -> catalog.AttackSpec:
    return self._spec

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. `value_type` must be <update, bool
    is_corrupted>."""
    if not (isinstance(value_type, tff.StructType) and len(value_type) == 2
            and value_type[1] == tff.TensorType(np.bool_)):
      raise TypeError(f'value_type must be <update, bool is_corrupted>, got {value_type}')
    update_type = value_type[0]
    type_checks.check_value_type(update_type)
    type_checks.check_weight_type(weight_type)
    inner = self._inner_factory.create(update_type, weight_type)
    inner_measurement_names = tff.structure.name_list(inner.next.type_signature.result.measurements.member)
    corrupt = self._attack.build(update_type, weight_type, self._seed)
    keeps_previous = self._attack.uses_previous_aggregate

    @tff.tensorflow.computation
    def zeros():
      return widening.pack(update_type, iter([tf.zeros(t.shape, t.dtype) for t in widening.leaf_types(update_type)]))

    @tff.federated_computation()
    def init_fn():
      state = collections.OrderedDict(inner=inner.initialize(), round_num=tff.federated_value(0, tff.SERVER))
      if keeps_previous:
        state['previous_aggregate'] = tff.federated_eval(zeros, tff.SERVER)
      return tff.federated_zip(state)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      update, corrupted = value[0], value[1]
      previous = state.previous_aggregate if keeps_previous else None
      update = corrupt(update, corrupted, weight, state.round_num, previous)
      output = inner.next(state.inner, update, weight)
      measurements = collections.OrderedDict(
          (name, output.measurements[name]) for name in inner_measurement_names
      )
      measurements['num_corrupted_clients'] = federated_counting.count_flagged_clients(corrupted)
      new_state = collections.OrderedDict(
          inner=output.state, round_num=federated_counting.increment(state.round_num)
      )
      if keeps_previous:
        new_state['previous_aggregate'] = output.result
      return tff.templates.MeasuredProcessOutput(
          state=tff.federated_zip(new_state), result=output.result,
          measurements=tff.federated_zip(measurements),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
