"""Gaussian noise (RFA paper, Pillutla, Kakade, Harchaoui, IEEE TSP 2022, Sec. 5.1 and App. D.2.1).

A corrupted client's update becomes sigma N(0, I) ('replace', App. D.2.1 and the authors' code) or gets
sigma N(0, I) added ('add', the main text), sigma the standard deviation of the update's own components. The draw
is deterministic per (seed, round, update): stateless normals seeded by (seed + round, fingerprint) + (0, leaf
index), the fingerprint the sum of the update's float32 bit patterns (as int32) modulo 2^31 - 1, which tells
clients apart without identities. Knows: only its own update.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.attacks import base


class GaussianAttack(base.UpdateAttack):
  """Gaussian noise as an `UpdateAttack`: `mode='replace'` sends sigma N(0, I), `'add'` adds it (sigma the update's own
  standard deviation)."""

  def __init__(self, mode: str = 'replace'):
    self._mode = mode

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: each corrupted client draws its noise statelessly from (seed + round, its update's
    fingerprint)."""
    mode = self._mode

    @tff.tensorflow.computation(update_type, np.bool_, np.int32)
    def gaussian_attack(update, corrupted, round_num):
      def attacked():
        leaves = tf.nest.flatten(update)
        flat = tf.concat([tf.reshape(tf.cast(t, tf.float32), [-1]) for t in leaves], 0)
        sigma = tf.math.reduce_std(flat)
        fingerprint = tf.reduce_sum(tf.cast(tf.bitcast(flat, tf.int32), tf.int64)) % 2147483647
        seed_base = tf.stack([seed + round_num, tf.cast(fingerprint, tf.int32)])
        noises = tf.nest.pack_sequence_as(update, [
            tf.cast(sigma * tf.random.stateless_normal(tf.shape(t), seed=seed_base + [0, i]), t.dtype)
            for i, t in enumerate(leaves)
        ])
        if mode == 'replace':
          return noises
        return tf.nest.map_structure(tf.add, update, noises)
      return tf.cond(corrupted, attacked, lambda: update)

    def corrupt(update, corrupted, weight, round_num, previous):
      del weight, previous
      return tff.federated_map(gaussian_attack, (update, corrupted, tff.federated_broadcast(round_num)))

    return corrupt
