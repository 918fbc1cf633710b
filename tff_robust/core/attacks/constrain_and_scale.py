"""Constrain-and-scale's attacker objective (Bagdasaryan et al., "How to backdoor federated learning", AISTATS 2020,
Sec. 4), as a NumPy reference.

The attacker trains from the global model G on
    L_model(w) = alpha L_class(w) + (1 - alpha) L_ano(w),    L_ano(w) = ||w - G||^2,
whose gradient is alpha grad L_class(w) + 2 (1 - alpha) (w - G): the class loss on its backdoored data, and a
penalty that keeps its model near the global one (its update short, under a norm or distance defence). It then
scales its update G - w by the boost (`boost`). alpha = 1 is model replacement's plain training.
"""

import numpy as np


def anomaly_loss(weights, global_weights) -> float:
  """L_ano = ||w - G||^2 over the flattened weights."""
  return float(np.sum((np.asarray(weights, np.float64) - np.asarray(global_weights, np.float64)) ** 2))


def attacker_gradient(class_gradient, weights, global_weights, alpha: float) -> np.ndarray:
  """alpha grad L_class(w) + 2 (1 - alpha) (w - G), the gradient of L_model."""
  weights = np.asarray(weights, np.float64)
  return alpha * np.asarray(class_gradient, np.float64) + 2.0 * (1.0 - alpha) * (weights - global_weights)
