"""How many client calls of a round read client data: the test helper of the one-call-per-client property."""

import tensorflow_federated as tff


def _has_sequence(type_spec) -> bool:
  if isinstance(type_spec, tff.SequenceType):
    return True
  return isinstance(type_spec, tff.StructType) and any(_has_sequence(member) for member in type_spec)


def data_reading_client_maps(computation) -> int:
  """How many `federated_map` calls of `computation` pass client data (a sequence) to the clients' function.

  Each is one TensorFlow call per client in TFF's worker, with the client's dataset serialised into it. The
  selections that unpack a mapped struct read no data and are not counted."""
  calls = []

  def record(block):
    if (isinstance(block, tff.framework.Call) and isinstance(block.function, tff.framework.Intrinsic)
        and block.function.uri == 'federated_map'
        and _has_sequence(block.function.type_signature.parameter[1].member)):
      calls.append(block)
    return block, False

  tff.framework.transform_postorder(computation.to_building_block(), record)
  return len(calls)
