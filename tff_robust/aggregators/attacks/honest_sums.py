"""The honest clients' weighted sums, mean and squared deviations through federated sums (the omniscient
attack, ALIE and IPM): S_G = sum_{honest} alpha_i x_i, A_G, S_C, A_C, mu = S_G / A_G and
sum_{honest} alpha_i (x_i - mu)^2 (`tff_robust.core.attacks.honest_statistics` defines them). The adversary is
omniscient: it sums what it wants; these are simulations, not deployment components.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def sums(update_type, weight_type, update, corrupted, weight):
  """OrderedDict(honest_sum, corrupted_sum, honest_weight, corrupted_weight) at the server."""

  @tff.tensorflow.computation(update_type, np.bool_, weight_type)
  def split_by_honesty(value, is_corrupted, w):
    honest_weight = tf.where(is_corrupted, tf.zeros_like(w), w)
    corrupted_weight = w - honest_weight
    scale = lambda a: tf.nest.map_structure(lambda t: t * tf.cast(a, t.dtype), value)
    return scale(honest_weight), scale(corrupted_weight), honest_weight, corrupted_weight

  split = tff.federated_map(split_by_honesty, (update, corrupted, weight))
  return collections.OrderedDict(
      (name, tff.federated_sum(split[i]))
      for i, name in enumerate(('honest_sum', 'corrupted_sum', 'honest_weight', 'corrupted_weight'))
  )


def mean(update_type, weight_type, honest_sum, honest_weight):
  """mu = S_G / A_G (zeros with no honest weight), at the server."""

  @tff.tensorflow.computation(update_type, weight_type)
  def divide(total, w):
    return tf.nest.map_structure(lambda g: tf.math.divide_no_nan(g, tf.cast(w, g.dtype)), total)

  return tff.federated_map(divide, (honest_sum, honest_weight))


def squared_deviation_sum(update_type, weight_type, update, corrupted, weight, honest_mean):
  """sum_{honest} alpha_i (x_i - mu)^2 per coordinate, at the server."""

  @tff.tensorflow.computation(update_type, np.bool_, weight_type, update_type)
  def deviation(value, is_corrupted, w, m):
    honest_weight = tf.where(is_corrupted, tf.zeros_like(w), w)
    return tf.nest.map_structure(lambda x, c: tf.cast(honest_weight, x.dtype) * tf.square(x - c), value, m)

  return tff.federated_sum(
      tff.federated_map(deviation, (update, corrupted, weight, tff.federated_broadcast(honest_mean)))
  )
