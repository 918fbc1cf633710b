"""Checks that a federated computation is secure-aggregation compatible by walking its intrinsics.

A computation is compatible with secure aggregation when client-placed values reach the server only
through sums or means (which a secure-aggregation protocol implements) and everything else is broadcast or
local computation. Intrinsics that gather individual client values (`federated_aggregate` with an arbitrary
accumulator, `federated_select`, min/max) are not on the allow-list.
"""

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
