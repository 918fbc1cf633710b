"""The `secure_average_calls` measurement of a factory that composes others: the sum over its parts."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def measurement_names(process: tff.templates.AggregationProcess) -> list:
  """The names of the top-level measurements of `process`'s `next`."""
  return tff.structure.name_list(process.next.type_signature.result.measurements.member)


def total_calls(*measurements_and_processes, extra: int = 0):
  """Federated: `extra` plus each process's `secure_average_calls` at the server (1 for a process that reports
  none: a weighted mean), given pairs (the measurements of one `next` call, that process)."""
  calls = [
      measurements['secure_average_calls'] if 'secure_average_calls' in measurement_names(process)
      else tff.federated_value(np.int32(1), tff.SERVER)
      for measurements, process in measurements_and_processes
  ]
  dtypes = [c.type_signature.member.dtype for c in calls]
  add = tff.tensorflow.computation(
      lambda counts: tf.add_n([tf.cast(c, tf.int32) for c in counts]) + extra,
      tff.StructType([tff.TensorType(d) for d in dtypes]),
  )
  return tff.federated_map(add, tff.federated_zip(tuple(calls)))
