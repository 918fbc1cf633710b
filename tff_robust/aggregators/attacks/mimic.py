"""Mimic (Karimireddy, He, Jaggi, ICLR 2022): every corrupted client copies the honest client farthest along the
honest updates' direction of largest variance, i* = argmax_i |<x_i - xbar, z>|, computed from the top eigenvector
of the centred honest rows' Gram matrix. The rule, the per-round choice and what the attacker knows:
`tff_robust.core.attacks.mimic` (the NumPy reference). Gathers the updates (simulation only).
"""

import tensorflow as tf

from tff_robust.aggregators.attacks import gathered
from tff_robust.aggregators.attacks import stacked_statistics


class MimicAttack(gathered.GatheredAttack):
  """Mimic as a gathered attack: copy the honest client farthest along the honest updates' direction of largest
  variance."""

  def payload(self, points, weights, corrupted, previous):
    """The honest row [d] to copy (zeros when no client is honest)."""
    honest = tf.boolean_mask(points, stacked_statistics.honest_mask(points, weights, corrupted))

    def copy():
      centred = honest - tf.reduce_mean(honest, axis=0)
      _, vectors = tf.linalg.eigh(tf.matmul(centred, centred, transpose_b=True))
      return honest[tf.argmax(tf.abs(vectors[:, -1]), output_type=tf.int32)]

    return tf.cond(tf.shape(honest)[0] > 0, copy, lambda: tf.zeros([tf.shape(points)[1]], points.dtype))
