"""Checks, by walking a federated computation's intrinsics, how client values reach the server.

Two checks of different strength:
  - `non_secure_intrinsics`: *compatible* with secure aggregation. Client-placed values reach the server
    only through sums or means (which a secure-aggregation protocol could implement) and everything else is
    broadcast or local computation; intrinsics that gather individual client values (`federated_aggregate`
    with an arbitrary accumulator, `federated_select`, min/max) are not on the allow-list. Plain TFF FedAvg
    passes it (it sums with `federated_sum`), so an empty result does not show that secure aggregation is
    *used*.
  - `plain_client_aggregations` / `assert_client_values_aggregated_securely`: secure aggregation is *used*.
    Every intrinsic that takes a client-placed value to the server is a secure sum
    (`SECURE_SUM_INTRINSICS`); any other (`federated_sum`, `federated_mean`, `federated_aggregate`, ...)
    is reported with the type of the client value it aggregates.
"""

from typing import NamedTuple

import tensorflow_federated as tff

SECURE_AGGREGATION_INTRINSICS = frozenset({
    # Server -> clients and local computation reveal nothing about a client's value.
    'federated_broadcast',
    'federated_map',
    'federated_map_all_equal',
    'federated_apply',
    'federated_eval_at_server',
    'federated_eval_at_clients',
    'federated_value_at_server',
    'federated_value_at_clients',
    'federated_zip_at_server',
    'federated_zip_at_clients',
    # Clients -> server only as sums or means.
    'federated_sum',
    'federated_mean',
    'federated_weighted_mean',
    'federated_secure_sum',
    'federated_secure_sum_bitwidth',
    'federated_secure_modular_sum',
})


def intrinsic_uris(computation) -> frozenset[str]:
  """The set of intrinsic URIs a `tff.Computation` calls, nested computations included."""
  found = set()

  def record(block):
    if isinstance(block, tff.framework.Intrinsic):
      found.add(block.uri)
    return block, False

  tff.framework.transform_postorder(computation.to_building_block(), record)
  return frozenset(found)


def non_secure_intrinsics(computation) -> frozenset[str]:
  """Intrinsics of `computation` outside `SECURE_AGGREGATION_INTRINSICS` (empty when compatible)."""
  return intrinsic_uris(computation) - SECURE_AGGREGATION_INTRINSICS


SECURE_SUM_INTRINSICS = frozenset({
    'federated_secure_sum',
    'federated_secure_sum_bitwidth',
    'federated_secure_modular_sum',
})


class ClientAggregation(NamedTuple):
  """One call of an intrinsic that takes a client-placed value to the server."""

  intrinsic: str  # its URI, e.g. 'federated_sum'
  client_value_type: str  # the member type of its (first) client-placed argument, e.g. 'float32[3]'

  def __str__(self):
    return f'{self.intrinsic} of {self.client_value_type}@CLIENTS'


class NotSecurelyAggregatedError(ValueError):
  """A computation aggregates client values other than through a secure sum."""


def _placed_members(type_spec, placement):
  """The federated types placed at `placement` in `type_spec` (a federated type or a struct of them)."""
  if isinstance(type_spec, tff.FederatedType):
    return [type_spec] if type_spec.placement is placement else []
  if isinstance(type_spec, tff.StructType):
    return [member for element in type_spec for member in _placed_members(element, placement)]
  return []


def client_aggregations(computation) -> list[ClientAggregation]:
  """Every call of an intrinsic of `computation` (nested computations included) whose argument holds a
  client-placed value and whose result is at the server, in the order of the computation's building block."""
  found = []

  def record(block):
    if isinstance(block, tff.framework.Intrinsic) and isinstance(block.type_signature, tff.FunctionType):
      signature = block.type_signature
      clients = _placed_members(signature.parameter, tff.CLIENTS)
      if clients and _placed_members(signature.result, tff.SERVER):
        found.append(ClientAggregation(block.uri, str(clients[0].member)))
    return block, False

  tff.framework.transform_postorder(computation.to_building_block(), record)
  return found


def plain_client_aggregations(computation) -> list[ClientAggregation]:
  """The aggregations of client values in `computation` that are not secure sums (empty when every client
  value reaches the server through `SECURE_SUM_INTRINSICS`)."""
  return [a for a in client_aggregations(computation) if a.intrinsic not in SECURE_SUM_INTRINSICS]


def assert_client_values_aggregated_securely(computation) -> None:
  """Raises `NotSecurelyAggregatedError` listing every aggregation of client values in `computation` that is
  not a secure sum (`plain_client_aggregations`); returns None when there is none."""
  plain = plain_client_aggregations(computation)
  if plain:
    listed = '; '.join(str(aggregation) for aggregation in plain)
    raise NotSecurelyAggregatedError(
        f'{len(plain)} aggregation(s) of client values are not secure sums: {listed}. Build every sum of '
        'client values with tff.aggregators.SecureSumFactory (e.g. a MeanFactory whose value_sum_factory and '
        'weight_sum_factory are SecureSumFactory) or tff.federated_secure_sum*.'
    )
