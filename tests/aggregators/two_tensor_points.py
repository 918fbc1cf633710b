"""Points of R^5 as client values of two tensors (R^3, R^2): a norm over the value must span the whole structure.

The aggregator tests draw clients as rows of a NumPy array and compare with NumPy references over those rows;
these helpers carry the rows into and out of a factory's process.
"""

import numpy as np
import tensorflow_federated as tff

VALUE_TYPE = tff.to_type([(np.float32, [3]), (np.float32, [2])])
WEIGHT_TYPE = tff.TensorType(np.float32)
TYPES = (VALUE_TYPE, WEIGHT_TYPE)  # a factory's `create(*TYPES)`


def client_values(points):
  """Each row of `points` (clients x 5) as the two-tensor value [row[:3], row[3:]] in float32."""
  return [[p[:3], p[3:]] for p in np.asarray(points, np.float32)]


def run_round(process, state, points, weights):
  """(next state, the aggregate as one row of R^5, measurements) of one `process.next` over `points`."""
  output = process.next(state, client_values(points), [np.float32(w) for w in weights])
  return output.state, np.concatenate(output.result), output.measurements


def aggregate_once(process, points, weights):
  """(the aggregate as one row of R^5, measurements) of one round from `process.initialize()`."""
  _, result, measurements = run_round(process, process.initialize(), points, weights)
  return result, measurements
