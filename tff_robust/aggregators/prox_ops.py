"""Fed+'s proximal operators on structures of tensors (a model is a structure of tensors).

Fed+ (Kundu et al.), Sec. 4.4.1 with the notes' closed forms: for v = w_k - w (local minus global model)
and delta > 0,
    Psi = (sigma delta / 2)||.||^2 ('squared_l2', FedAvg+):  prox(v) = v / (1 + delta)
    Psi = sigma delta ||.||_2      ('l2', FedGeoMed+):        prox(v) = max(0, 1 - delta/||v||_2) v
    Psi = sigma delta ||.||_1      ('l1', FedCoMed+):         prox(v) = sign(v) max(|v| - delta, 0)
(sigma cancels; the l1 soft-threshold is the corrected form of the misprinted eq. (19)). The residual
v - prox(v) is v clipped to norm delta ('l2') or to [-delta, delta] per coordinate ('l1'): the factor
min(1, delta / |v|) of `clip_factor`. The 'l2' norm is over the whole structure, not per tensor.
"""

import tensorflow as tf

from tff_robust.aggregators import structure_math

PSI_KINDS = ('squared_l2', 'l2', 'l1')


def clip_factor(difference, norm: str, delta: float):
  """min(1, delta / |d|): one scalar for the whole structure ('l2'), or a structure of factors ('l1').

  The 'l2' factor has the dtype of `structure_math.global_l2_norm` (float64 if a tensor is float64, else
  float32): cast it to each tensor's dtype before multiplying.
  """
  if norm == 'l1':
    return tf.nest.map_structure(lambda d: tf.minimum(delta / tf.maximum(tf.abs(d), delta), 1.0), difference)
  if norm == 'l2':
    distance = structure_math.global_l2_norm(difference)
    return tf.minimum(delta / tf.maximum(distance, delta), 1.0)
  raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")


def prox(v, kind: str, delta: float):
  """theta = prox_Psi^{1/sigma}(v) for Psi of `kind` (see the module docstring)."""
  if kind == 'squared_l2':
    return tf.nest.map_structure(lambda x: x / (1.0 + delta), v)
  factor = clip_factor(v, kind, delta)
  if kind == 'l2':
    return tf.nest.map_structure(lambda x: (1.0 - tf.cast(factor, x.dtype)) * x, v)
  return tf.nest.map_structure(lambda f, x: (1.0 - f) * x, factor, v)
