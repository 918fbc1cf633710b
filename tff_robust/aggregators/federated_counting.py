"""Counters that federated computations keep: clients with a flag set, empty datasets (read inside a client
computation), and a server-side round number."""

import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


@functools.cache
def _bool_as_int32():
  return tff.tensorflow.computation(lambda flag: tf.cast(flag, tf.int32), np.bool_)


@functools.cache
def _plus_one():
  return tff.tensorflow.computation(lambda value: value + 1, np.int32)


def count_flagged_clients(flags_at_clients):
  """The number of clients whose bool flag is True, at the server (a federated sum of 0/1)."""
  return tff.federated_sum(tff.federated_map(_bool_as_int32(), flags_at_clients))


def increment(counter_at_server):
  """An int32 counter at the server, plus one."""
  return tff.federated_map(_plus_one(), counter_at_server)


@tf.function
def has_an_element(dataset: tf.data.Dataset) -> tf.Tensor:
  """Whether `dataset` yields at least one element (a scalar bool; reads at most one element).

  An iterator's optional next element, not `dataset.take(1).reduce(...)`: a reduce op instantiates its function
  again at every client call in TFF's worker (`tff_robust.processes.client_loop`)."""
  return iter(dataset).get_next_as_optional().has_value()


def is_empty_after(dataset: tf.data.Dataset, after) -> tf.Tensor:
  """1 if `dataset` yields no element, else 0 (int32), read once the tensors of `after` are computed.

  For a client computation that has already used `dataset` (trained on it, or scored it): counting empty
  datasets there costs no second client call (a federated map of its own would serialise every dataset into
  the worker again), and a dataset that reshuffles at each iteration gives the computation its first order, as
  without the count; this read takes the next one, which cannot change whether it is empty."""
  with tf.control_dependencies(tf.nest.flatten(after)):
    return tf.cast(tf.logical_not(has_an_element(dataset)), tf.int32)
