"""Model replacement's boosted update (Bagdasaryan et al., "How to backdoor federated learning", AISTATS 2020,
Sec. 4), as a NumPy reference.

The server's FedAvg step is G' = G - eta sum_i w_i D_i / W, with D_i = G - L_i a client's update (TFF's model delta:
initial minus trained weights), w_i its weight, W = sum_i w_i and eta the server learning rate. A corrupted client
that sends gamma D_a instead, with every other update zero, makes G' = G - eta gamma w_a D_a / W, which is its own
model L_a exactly when gamma = W / (eta w_a): the paper's gamma = n / eta for n clients of equal weight. With
several corrupted clients C, each scaled by gamma = W / (eta W_C) (W_C their total weight), G' is their
weighted mean model sum_C w_i L_i / W_C; honest updates that are not zero add -eta sum_honest w_i D_i / W to it (the
paper's approximation: the honest updates nearly cancel near convergence).
"""

from typing import Optional

import numpy as np


def replacement_factor(weights, corrupted, eta: float = 1.0) -> float:
  """gamma = W / (eta W_C): the cohort's weight over eta times the corrupted clients' weight (0 if none is)."""
  weights = np.asarray(weights, np.float64)
  corrupted_weight = weights[np.asarray(corrupted, bool)].sum()
  return float(weights.sum() / (eta * corrupted_weight)) if corrupted_weight > 0 else 0.0


def boosted_updates(updates, weights, corrupted, gamma: Optional[float] = None, eta: float = 1.0) -> np.ndarray:
  """`updates` (one row per client) with every corrupted row times `gamma` (unset: `replacement_factor`)."""
  updates = np.asarray(updates, np.float64)
  corrupted = np.asarray(corrupted, bool)
  factor = replacement_factor(weights, corrupted, eta) if gamma is None else float(gamma)
  boosted = updates.copy()
  boosted[corrupted] *= factor
  return boosted


def fedavg_step(global_model, updates, weights, eta: float = 1.0) -> np.ndarray:
  """The server's FedAvg step G - eta sum_i w_i D_i / W (SGD with learning rate eta on the weighted mean)."""
  weights = np.asarray(weights, np.float64)
  return np.asarray(global_model, np.float64) - eta * weights @ np.asarray(updates, np.float64) / weights.sum()
