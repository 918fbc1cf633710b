"""A defence chain's `tff.aggregators` factory and its stacked TensorFlow rule, from the registry's entries."""

import importlib
from typing import Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.defences import implementations
from tff_robust.aggregators.defences import registry


def implementation(component: registry.Component) -> implementations.Implementation:
  """The `Implementation` object that `component`'s registry entry names ('module:attribute')."""
  module, _, attribute = component.entry.implementation.partition(':')
  return getattr(importlib.import_module(module), attribute)


def _context(chain, clients_per_round, num_byzantine, secure_bounds=None) -> implementations.BuildContext:
  for name, value, minimum in (('clients_per_round', clients_per_round, 1), ('num_byzantine', num_byzantine, 0)):
    if (name != 'clients_per_round' or value is not None) and (
        isinstance(value, bool) or not isinstance(value, int) or value < minimum):
      raise ValueError(f'{name} must be an integer >= {minimum}, got {value!r}')
  needing = [c.name for c in chain.components if c.entry.needs_clients_per_round]
  if clients_per_round is None and needing:
    raise ValueError(f'defence {str(chain)!r} needs clients_per_round (the cohort size n) for {", ".join(needing)}')
  return implementations.BuildContext(clients_per_round, num_byzantine, secure_bounds)


def build_factory(
    spec_or_chain: Union[str, registry.DefenceChain],
    *,
    clients_per_round: Optional[int],
    num_byzantine: int,
    secure_bounds: Optional[implementations.SecureBounds] = None,
    seed: int = 0,
) -> tff.aggregators.WeightedAggregationFactory:
  """The factory of the chain: its rule's factory, wrapped by each pre-aggregator's from the last to the first.

  Args:
    spec_or_chain: a spec (`registry.parse`) or a `DefenceChain`.
    clients_per_round: the cohort size n (bucketing's stacked sums, ARC's k, the default trimmed fraction);
      None for a chain without such components (`registry.Entry.needs_clients_per_round`).
    num_byzantine: f, what the parameters `f` default to.
    secure_bounds: if set, every sum of client values is a secure sum within these bounds, so that
      `privacy.assert_client_values_aggregated_securely` passes; the chain must be secure (`registry.is_secure`).
    seed: what the parameters `seed` (the server noise of `weak_dp` and `flame`) default to: the run's seed, so
      that runs of different seeds draw different noise.

  Raises:
    ValueError: for a bad spec, counts out of range, or `secure_bounds` with a chain that gathers updates.
  """
  chain = registry.as_chain(spec_or_chain)
  context = _context(chain, clients_per_round, num_byzantine, secure_bounds)
  if secure_bounds is not None and not registry.is_secure(chain):
    raise ValueError(f'defence {str(chain)!r} cannot be built with secure sums: '
                     f'{", ".join(registry.non_secure_components(chain))} gathers the client updates')
  factory = None
  for component in reversed(chain.components):
    arguments = component.arguments(clients_per_round=clients_per_round, num_byzantine=num_byzantine, seed=seed)
    factory = implementation(component).build(arguments, factory, context)
  return factory


def stacked_rule(
    spec_or_chain: Union[str, registry.DefenceChain], *, clients_per_round: int, num_byzantine: int
) -> implementations.StackedRule:
  """The chain's TensorFlow function (points [m, d], weights [m], center [d]) -> aggregate [d] (float32).

  Rows that are not finite are zeroed with weight 0 first (as every factory does), then each pre-aggregator's
  stacked form runs in order, then the rule's. It computes what `build_factory`'s factory computes on the same
  float32 updates, `center` being the previous aggregate (centered clipping's state), except for the parts
  each stacked form documents: bucketing uses the identity permutation, and the norm filter (and ARC) the
  exact quantile where the factory's secure one is the lower edge of a narrow bin.
  """
  chain = registry.as_chain(spec_or_chain)
  context = _context(chain, clients_per_round, num_byzantine)
  arguments = [c.arguments(clients_per_round=clients_per_round, num_byzantine=num_byzantine) for c in chain.components]
  forms = [implementation(c).stacked(a, context) for c, a in zip(chain.components, arguments)]
  *pre_aggregators, rule = forms

  def stacked(points, weights, center):
    points, weights = implementations.without_nonfinite(
        tf.convert_to_tensor(points, tf.float32), tf.convert_to_tensor(weights, tf.float32)
    )
    for pre_aggregator in pre_aggregators:
      points, weights = pre_aggregator(points, weights)
    return rule(points, weights, tf.convert_to_tensor(center, tf.float32))

  return stacked
