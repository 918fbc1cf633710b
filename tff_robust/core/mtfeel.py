"""NumPy reference of MtFEEL's server-side mathematics (Mahara, Shruti, Bharath, Murthy, arXiv:2108.02517).

N devices, device k owns model w_k; `losses[k, m]` = Lhat(w_k, S_m), the loss of model k on device m's data,
and `signs[k, m]` = sign(grad_{w_k} Lhat(w_k, S_m)) as device m sends it. alpha is row-stochastic
(alpha_k in the simplex), lambda_k are fixed device importances, n_m the devices' sample counts and dhat the
discrepancy estimates of Algorithm 1 (DDE).

Objective (7), with pen_scale := M sqrt((N/2) log(|Lambda_eps|/delta)) as one hyperparameter:
    PsiHat(W, alpha) = sum_k lambda_k sum_j alpha_kj Lhat(w_k, S_j) + sum_k gamma_k ||w_k||_2
                       + pen_scale sqrt(S(alpha)) + sum_{k,j} lambda_k alpha_kj dhat_kj,
    S(alpha) = sum_{k,j} (lambda_k alpha_kj / n_j)^2.
Its exact alpha-gradient (the paper's eq. (10) divides by sqrt(S/2), a sqrt(2) slip; notes section 3.2):
    dPsiHat/dalpha_km = lambda_k Lhat(w_k, S_m) + lambda_k dhat_km + pen_scale lambda_k^2 alpha_km / (n_m^2 sqrt(S)).
Signed step, eq. (9):  w_k <- w_k - eta (lambda_k sum_m alpha_km s_km + gamma_k sign(w_k)).
alpha step (Algorithm 2, line 10, with the Euclidean projection of Definition 4):
    alpha_k <- Proj_simplex(alpha_k - mu dPsiHat/dalpha_k).
DDE subgradient, eq. (8) corrected (the printed indicators make it descend):
    d/dw |Lhat(w, S_j) - Lhat(w, S_k)| = sign(Lhat(w, S_j) - Lhat(w, S_k)) (grad Lhat(w, S_j) - grad Lhat(w, S_k)).

The TFF processes in `tff_robust.processes.mtfeel` and `tff_robust.processes.dde` are tested against this file.
"""

import numpy as np


def project_to_simplex(v: np.ndarray) -> np.ndarray:
  """Euclidean projection of each row of `v` onto the probability simplex (Duchi et al. 2008, sort method).

  x = max(v - tau, 0) with tau = (sum_{i <= rho} u_i - 1) / rho, u = v sorted in decreasing order and
  rho = max{j : u_j - (sum_{i <= j} u_i - 1) / j > 0}.
  """
  v = np.asarray(v, np.float64)
  u = -np.sort(-v, axis=-1)
  cumulative = np.cumsum(u, axis=-1) - 1.0
  ranks = np.arange(1, v.shape[-1] + 1)
  rho = np.sum(u - cumulative / ranks > 0, axis=-1, keepdims=True)
  tau = np.take_along_axis(cumulative, rho - 1, axis=-1) / rho
  return np.maximum(v - tau, 0.0)


def variance_penalty_sum(alpha: np.ndarray, lambdas: np.ndarray, num_examples: np.ndarray) -> float:
  """S(alpha) = sum_{k,j} (lambda_k alpha_kj / n_j)^2, the sum under the square root of (7)."""
  return float(np.sum((lambdas[:, None] * alpha / num_examples[None, :]) ** 2))


def objective(losses, discrepancies, alpha, lambdas, num_examples, pen_scale, weight_norms=None, gammas=None) -> float:
  """PsiHat of eq. (7); `weight_norms[k]` = ||w_k||_2 enters only with `gammas`."""
  value = np.sum(lambdas[:, None] * alpha * (losses + discrepancies))
  value += pen_scale * np.sqrt(variance_penalty_sum(alpha, lambdas, num_examples))
  if gammas is not None:
    value += np.sum(gammas * weight_norms)
  return float(value)


def alpha_gradient(losses, discrepancies, alpha, lambdas, num_examples, pen_scale) -> np.ndarray:
  """The exact gradient of (7) with respect to alpha (module docstring), shape [N, N]."""
  root = np.sqrt(variance_penalty_sum(alpha, lambdas, num_examples))
  penalty = pen_scale * (lambdas[:, None] ** 2) * alpha / (num_examples[None, :] ** 2) / root
  return lambdas[:, None] * (losses + discrepancies) + penalty


def alpha_step(losses, discrepancies, alpha, lambdas, num_examples, pen_scale, alpha_learning_rate) -> np.ndarray:
  """alpha_k <- Proj_simplex(alpha_k - mu grad_alpha_k PsiHat), all rows at once."""
  gradient = alpha_gradient(losses, discrepancies, alpha, lambdas, num_examples, pen_scale)
  return project_to_simplex(alpha - alpha_learning_rate * gradient)


def weighted_sign_sum(signs: np.ndarray, alpha: np.ndarray) -> np.ndarray:
  """sum_m alpha_km s_km for `signs` of shape [N models, M devices, ...] and alpha [N, M]: eq. (9)'s vote."""
  return np.einsum('km,km...->k...', alpha, signs)


def sign_step(weights, signs, alpha, lambdas, learning_rate, gammas=None) -> np.ndarray:
  """Eq. (9): w_k - eta (lambda_k sum_m alpha_km s_km + gamma_k sign(w_k)); weights [N, ...]."""
  extra_dims = (1,) * (weights.ndim - 1)
  direction = lambdas.reshape((-1,) + extra_dims) * weighted_sign_sum(signs, alpha)
  if gammas is not None:
    direction = direction + gammas.reshape((-1,) + extra_dims) * np.sign(weights)
  return weights - learning_rate * direction


def discrepancy_ascent_direction(loss_j, loss_k, gradient_j, gradient_k):
  """The corrected subgradient of |Lhat(w, S_j) - Lhat(w, S_k)| (eq. (8)); 0 at a tie."""
  return np.sign(loss_j - loss_k) * (np.asarray(gradient_j) - np.asarray(gradient_k))


def sign_of_gradient(gradient) -> np.ndarray:
  """The transmitted bit of each coordinate: +1 where gradient >= 0, -1 elsewhere (sign(0) := +1)."""
  return np.where(np.asarray(gradient) >= 0, 1.0, -1.0)
