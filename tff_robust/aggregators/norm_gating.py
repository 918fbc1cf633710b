"""What ARC and the norm filter share: a weighted quantile of the clients' update norms gates each client (clips
it, or drops it) before an inner rule aggregates the gated updates.

State: <the quantile process's state, the inner process's state>. Measurements: `secure_average_calls` (the
quantile's calls plus the inner process's, 1 if it reports none), `threshold` (the norm the gate applies),
one count of gated clients, and `inner` (the inner process's measurements, absent when empty).
"""

import collections

import tensorflow_federated as tff

from tff_robust.aggregators import call_counts
from tff_robust.aggregators import inner_measurements


def initialize(quantile_process, inner_process) -> tff.Computation:
  """The gated factory's `init_fn`: both processes' initial states, zipped at the server."""

  @tff.federated_computation()
  def init_fn():
    return tff.federated_zip((quantile_process.initialize(), inner_process.initialize()))

  return init_fn


def output(quantile, quantile_process, inner, inner_process, *, threshold, count_name: str, count):
  """The gated factory's `MeasuredProcessOutput` from the quantile's and the inner process's outputs (federated).

  Args:
    quantile: the quantile process's `MeasuredProcessOutput` this round.
    quantile_process: that process (its `secure_average_calls` when it measures none).
    inner: the inner process's `MeasuredProcessOutput` this round; its result is the aggregate.
    inner_process: that process.
    threshold: the server-placed norm the gate applied.
    count_name: the measurement's name for `count`, e.g. 'num_clipped_clients'.
    count: the server-placed number of gated clients.
  """
  measurements = inner_measurements.with_inner(collections.OrderedDict([
      ('secure_average_calls', call_counts.total_calls(
          (quantile.measurements, quantile_process), (inner.measurements, inner_process)
      )),
      ('threshold', threshold),
      (count_name, count),
  ]), 'inner', inner.measurements)
  return tff.templates.MeasuredProcessOutput(
      state=tff.federated_zip((quantile.state, inner.state)),
      result=inner.result,
      measurements=tff.federated_zip(measurements),
  )
