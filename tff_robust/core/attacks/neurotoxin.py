"""Neurotoxin's mask (Zhang et al., "Neurotoxin: Durable backdoors in federated learning", ICML 2022), as a NumPy
reference.

The attacker estimates the coordinates the honest clients change most from the last global update, and keeps its
own backdoor out of them, so that later honest rounds overwrite it less and it survives after the attackers leave.
Here the last global update is the previous round's aggregate v (zeros before the first), the coordinates it
changes most are the k = ceil(top d) largest |v_j| among the d coordinates (ties to the lower index, as
`tf.math.top_k`) that it changed at all (|v_j| > 0: before the first aggregate nothing is masked, as the paper's
attacker, with no update seen, has no mask), and the attacker projects its update onto the others: u_j = 0 on those
coordinates. The paper
projects every local gradient step onto the same mask; projecting the final update once is this simulation's
simplification (the same mask; local steps then move the masked coordinates too, and the projection removes them).
"""

import math

import numpy as np


def kept_coordinates(previous_aggregate, top: float) -> np.ndarray:
  """Bool mask of the coordinates outside the top-`top` share of |previous_aggregate| (flattened; top in [0, 1)),
  where a coordinate the aggregate left at 0 is always kept."""
  magnitude = np.abs(np.asarray(previous_aggregate, np.float64).ravel())
  count = math.ceil(round(top * magnitude.size, 9))
  largest = np.argsort(-magnitude, kind='stable')[:count]
  kept = np.ones(magnitude.size, bool)
  kept[largest] = False
  return kept | (magnitude == 0)


def masked_updates(updates, corrupted, previous_aggregate, top: float) -> np.ndarray:
  """`updates` (one flattened row per client) with every corrupted row zeroed outside `kept_coordinates`."""
  updates = np.array(updates, np.float64, copy=True)
  kept = kept_coordinates(previous_aggregate, top)
  updates[np.asarray(corrupted, bool)] *= kept
  return updates
