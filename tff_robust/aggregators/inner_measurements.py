"""An aggregator's measurements with those of an inner process, left out when they hold no value.

TFF's `MeanFactory` measures nothing: its measurements are `OrderedDict(mean_value=(), mean_weight=())`. Passed on
as they are, every round's metrics would hold an empty `mean` entry (what a user printing `output.metrics` saw); an
inner factory that does measure (e.g. a `SecureSumFactory` mean with its clipped counts) keeps its entry.
"""

import collections

import tensorflow_federated as tff


def with_inner(measurements: collections.OrderedDict, name: str, inner) -> collections.OrderedDict:
  """`measurements` (server-placed values) with `name: inner` added if `inner`, an inner process's server-placed
  measurements, contains a tensor."""
  if tff.types.contains(inner.type_signature, lambda type_spec: isinstance(type_spec, tff.TensorType)):
    measurements[name] = inner
  return measurements
