"""Mimic (NumPy reference): Karimireddy, He, Jaggi, "Byzantine-Robust Learning on Heterogeneous Datasets via
Bucketing", ICLR 2022, its mimic attack (as the authors' code `MimicVariantAttacker` runs it).

Every corrupted client sends a copy of one honest client's update, which over-weights that client's data
without sending anything an outlier test could catch. The paper's rule picks the honest client i* farthest along
z, the direction of largest variance of the honest updates (the top eigenvector of their covariance):
  i* = argmax_{i honest} |<x_i - xbar, z>|,   xbar the honest (unweighted) mean.
The authors' code estimates z by power iteration from a seeded random start over a warm-up of rounds and then
keeps i* fixed, which needs the same workers every round; with a cohort sampled anew each round we choose i* in
every round from that round's honest updates, and take |.| so that the arbitrary sign of an eigenvector does not
matter (the authors' argmax of <x_i, z> depends on it). z is computed through the Gram matrix of the centred
rows: the projections X z are proportional to the top eigenvector v of X X^T, so i* = argmax_i |v_i| (ties: the
lowest index).

Knows: the round's honest updates; not the defence.
"""

import numpy as np

from tff_robust.core.attacks import honest_statistics


def target(updates, weights, corrupted) -> np.ndarray:
  """The honest row farthest along the honest updates' top principal direction (zeros when none is honest)."""
  _, _, _, honest, _ = honest_statistics.split(updates, weights, corrupted)
  if len(honest) == 0:
    return np.zeros(np.shape(updates)[1])
  centred = honest - honest.mean(axis=0)
  _, vectors = np.linalg.eigh(centred @ centred.T)
  return honest[int(np.argmax(np.abs(vectors[:, -1])))]
