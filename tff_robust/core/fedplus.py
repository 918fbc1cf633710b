"""NumPy reference of the Fed+ aggregation operators: prox, residual, Moreau envelope and aggregator.

Kundu, Yu, Wynter, Lim, "Robustness and Personalization in Federated Learning: A Unified Approach via
Regularization" (Fed+). A party's personal offset is theta_k = prox_Psi^{1/sigma}(w_k - w~), eq. (11),
and the server aggregates with eq. (7),
    A(W) = argmin_w (1/N) sum_k Psihat_{1/sigma}(w_k - w),
where Psihat_{1/sigma}(v) = min_theta Psi(theta) + (sigma/2) ||v - theta||^2 is the Moreau envelope,
eq. (6). For the three proposed regularisers sigma cancels from the prox and only scales the envelope
(notes, section 1.1; H_delta is the Huber function):

  kind          Psi(theta)             Psihat_{1/sigma}(v) / sigma
  'squared_l2'  sigma delta/2 ||.||^2  delta/(1+delta)/2 ||v||^2
  'l2'          sigma delta ||.||_2    H_delta(||v||_2)
  'l1'          sigma delta ||.||_1    sum_i H_delta(v_i)

  kind          prox(v) = theta              residual(v) = v - prox(v)
  'squared_l2'  v / (1 + delta)              delta/(1+delta) v
  'l2'          max(0, 1 - delta/||v||_2) v  min(1, delta/||v||_2) v   (norm-clip to delta)
  'l1'          sign(v) max(|v| - delta, 0)  clip(v, -delta, delta)

'squared_l2' is FedAvg+ (aggregate = mean), 'l2' is FedGeoMed+ (delta-approximate geometric median) and
'l1' is FedCoMed+ (delta-approximate coordinate-wise median). The 'l2' norm is over the whole flattened
model. The 'l1' prox is the usual soft-threshold; the paper's printed eq. (19) is a typo
(see `soft_threshold_as_printed`).

Aggregation, iteration (25) (= (16) for 'l2', (22) for 'l1'), started at the mean:
    theta_k <- prox(w_k - w),   w <- Mean{w_k} - Mean{theta_k}  ==  w <- w + Mean{(w_k - w) - theta_k}.
With G(w) = sum_k a_k Psihat(w_k - w) / (sigma sum_k a_k), grad G(w) = -Mean_a{residual(w_k - w)} is
1-Lipschitz, so (25) is gradient descent with step 1 and G is non-increasing along it. Its fixed point is
eq. (49), w = Mean{w_k} - Mean{prox(w_k - w)}, i.e. Mean{residual(w_k - w)} = 0. Every residual is clipped
to delta, so each step moves w by at most delta and a party at distance D needs about D / delta steps.
The 'irls' solver reaches the same fixed point as a reweighted mean (one secure weighted mean per step):
    omega_k = a_k min(1, delta / ||w_k - w||_2)  ('l1': per coordinate),
    w <- sum_k omega_k w_k / sum_k omega_k.
The weights a_k default to 1 (the paper's unweighted Mean); other weights give the n_k-weighted variant.

The TFF aggregators and the Fed+ process in `tff_robust` are tested against this file.
"""

from typing import NamedTuple

import numpy as np

PSI_KINDS = ('squared_l2', 'l2', 'l1')  # FedAvg+, FedGeoMed+, FedCoMed+.
SOLVERS = ('fixed_point', 'irls')


class AggregationResult(NamedTuple):
  """Output of `aggregate`."""

  aggregate: np.ndarray  # The last iterate: A(W) once converged.
  iterates: list[np.ndarray]  # w^(0) (the start), w^(1), ..., w^(num_iterations).
  num_iterations: int  # Number of update steps taken.
  converged: bool  # Whether the last step had ||w^(t+1) - w^(t)||_2 <= tolerance.
  step_norms: list[float]  # ||w^(t+1) - w^(t)||_2 for each step.


# ---------------------------------------------------------------------------------------------------
# Argument checks.


def _check_delta(delta) -> float:
  try:
    value = float(delta)
  except (TypeError, ValueError):
    raise ValueError(f'delta must be a finite number > 0, got {delta!r}') from None
  if not (np.isfinite(value) and value > 0):
    raise ValueError(f'delta must be a finite number > 0, got {delta!r}')
  return value


def _check_kind(kind) -> None:
  if kind not in PSI_KINDS:
    raise ValueError(f'kind must be one of {PSI_KINDS}, got {kind!r}')


def _check_solver(solver) -> None:
  if solver not in SOLVERS:
    raise ValueError(f'solver must be one of {SOLVERS}, got {solver!r}')


def _check_vector(name: str, value, size: int | None = None) -> np.ndarray:
  vector = np.asarray(value, np.float64)
  if vector.ndim != 1:
    raise ValueError(f'{name} must be a 1-D array, got shape {vector.shape}')
  if size is not None and vector.shape[0] != size:
    raise ValueError(f'{name} must have length {size}, got {vector.shape[0]}')
  if not np.all(np.isfinite(vector)):
    raise ValueError(f'{name} must be finite')
  return vector


def _check_points(points) -> np.ndarray:
  points = np.asarray(points, np.float64)
  if points.ndim != 2 or points.shape[0] < 1 or points.shape[1] < 1:
    raise ValueError(f'points must be a 2-D array with at least one row and column, got shape {points.shape}')
  if not np.all(np.isfinite(points)):
    raise ValueError('points must be finite')
  return points


def _check_weights(weights, num_points: int) -> np.ndarray:
  if weights is None:
    return np.ones(num_points)
  weights = _check_vector('weights', weights, num_points)
  if np.any(weights < 0):
    raise ValueError('weights must be >= 0')
  if not weights.sum() > 0:
    raise ValueError('weights must have a positive sum')
  return weights


def _check_max_iterations(max_iterations) -> int:
  if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)):
    raise ValueError(f'max_iterations must be an int >= 1, got {max_iterations!r}')
  if max_iterations < 1:
    raise ValueError(f'max_iterations must be an int >= 1, got {max_iterations!r}')
  return int(max_iterations)


def _check_tolerance(tolerance) -> float:
  try:
    value = float(tolerance)
  except (TypeError, ValueError):
    raise ValueError(f'tolerance must be a number >= 0, got {tolerance!r}') from None
  if not value >= 0:  # Also rejects NaN.
    raise ValueError(f'tolerance must be a number >= 0, got {tolerance!r}')
  return value


# ---------------------------------------------------------------------------------------------------
# Row-wise operators (one flattened model per row), shared by the public functions and the solvers.


def _prox_rows(differences: np.ndarray, delta: float, kind: str) -> np.ndarray:
  if kind == 'squared_l2':
    return differences / (1.0 + delta)
  if kind == 'l2':
    norms = np.linalg.norm(differences, axis=1, keepdims=True)
    return np.maximum(0.0, 1.0 - delta / np.maximum(norms, delta)) * differences
  return np.sign(differences) * np.maximum(np.abs(differences) - delta, 0.0)


def _residual_rows(differences: np.ndarray, delta: float, kind: str) -> np.ndarray:
  if kind == 'squared_l2':
    return delta / (1.0 + delta) * differences
  if kind == 'l2':
    norms = np.linalg.norm(differences, axis=1, keepdims=True)
    return delta / np.maximum(norms, delta) * differences  # min(1, delta / ||v||) v, safe at v = 0.
  return np.clip(differences, -delta, delta)


def _envelope_rows(differences: np.ndarray, delta: float, kind: str) -> np.ndarray:
  """Psihat_{1/sigma}(v) / sigma for each row v."""
  if kind == 'squared_l2':
    return 0.5 * delta / (1.0 + delta) * np.sum(differences**2, axis=1)
  if kind == 'l2':
    return huber(np.linalg.norm(differences, axis=1), delta)
  return np.sum(huber(differences, delta), axis=1)


# ---------------------------------------------------------------------------------------------------
# Public single-vector operators.


def prox(v, delta: float, kind: str) -> np.ndarray:
  """theta = prox_Psi^{1/sigma}(v), eq. (11), in the closed form of the table above (sigma cancels).

  Args:
    v: 1-D array, a flattened model difference w_k - w~.
    delta: threshold delta > 0 of Psi.
    kind: one of PSI_KINDS. 'l2' uses the norm of the whole vector; 'l1' is the soft-threshold
      sign(v) max(|v| - delta, 0) (not the printed eq. (19)); 'squared_l2' is v / (1 + delta).

  Returns:
    The argmin over theta of Psi(theta)/sigma + (1/2) ||v - theta||^2.

  Raises:
    ValueError: if delta is not a finite number > 0, kind is not in PSI_KINDS or v is not 1-D and finite.
  """
  delta = _check_delta(delta)
  _check_kind(kind)
  v = _check_vector('v', v)
  return _prox_rows(v[np.newaxis], delta, kind)[0]


def residual(v, delta: float, kind: str) -> np.ndarray:
  """v - prox(v): 'l2' clips the norm to delta, 'l1' clips each entry to [-delta, delta].

  'squared_l2' gives delta / (1 + delta) v. The residual is the gradient of Psihat_{1/sigma} / sigma at v,
  and its (weighted) mean over the parties is the step of iteration (25). Same arguments and errors as
  `prox`.
  """
  delta = _check_delta(delta)
  _check_kind(kind)
  v = _check_vector('v', v)
  return _residual_rows(v[np.newaxis], delta, kind)[0]


def huber(r, delta: float) -> np.ndarray:
  """Elementwise Huber function H_delta(r) = r^2/2 if |r| <= delta, else delta (|r| - delta/2).

  H_delta is the Moreau envelope of delta |.| (eq. (6) with Psi = sigma delta |.|, divided by sigma).
  Raises ValueError if delta is not a finite number > 0.
  """
  delta = _check_delta(delta)
  r = np.abs(np.asarray(r, np.float64))
  return np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta))


def soft_threshold_as_printed(v, delta: float) -> np.ndarray:
  """The paper's MISPRINTED eq. (19): max(0, v - delta sign(v)). Do not use it for Fed+.

  It zeroes every coordinate v_i <= -delta (and returns v_i + delta > 0 for -delta < v_i < 0) instead of
  soft-thresholding it, so its aggregate is wrong whenever some w_k - w~ has negative entries. It is kept
  only for the regression test showing that; use `prox(v, delta, 'l1')`. Raises ValueError on a bad delta.
  """
  delta = _check_delta(delta)
  v = np.asarray(v, np.float64)
  return np.maximum(0.0, v - delta * np.sign(v))


# ---------------------------------------------------------------------------------------------------
# Aggregation objective, fixed-point residual and the aggregator.


def aggregation_objective(w, points, delta: float, kind: str, weights=None) -> float:
  """G(w) = sum_k a_k Psihat_{1/sigma}(w_k - w) / (sigma sum_k a_k): eq. (7)'s objective, divided by sigma.

  Args:
    w: 1-D candidate aggregate of length d.
    points: [K, d] array, one flattened local model w_k per row.
    delta: threshold delta > 0.
    kind: one of PSI_KINDS ('l2': H_delta(||.||_2); 'l1': sum_i H_delta; 'squared_l2':
      delta/(1+delta)/2 ||.||^2).
    weights: optional non-negative a_k with a positive sum; default 1 (the paper's unweighted mean).

  Raises:
    ValueError: on any argument outside its allowed range (see `aggregate`).
  """
  delta, points, weights = _check_common(points, delta, kind, weights)
  w = _check_vector('w', w, points.shape[1])
  return float(weights @ _envelope_rows(points - w, delta, kind) / weights.sum())


def fixed_point_residual(w, points, delta: float, kind: str, weights=None) -> np.ndarray:
  """sum_k a_k residual(w_k - w) / sum_k a_k = -grad G(w): zero exactly at the aggregate.

  Setting it to zero is the fixed-point equation (49), w = Mean{w_k} - Mean{prox(w_k - w)}, and it is the
  step of iteration (25). Same arguments and errors as `aggregation_objective`.
  """
  delta, points, weights = _check_common(points, delta, kind, weights)
  w = _check_vector('w', w, points.shape[1])
  return _mean_residual(w, points, delta, kind, weights)


def aggregate(
    points,
    delta: float,
    kind: str,
    *,
    weights=None,
    solver: str = 'fixed_point',
    max_iterations: int = 1000,
    tolerance: float = 1e-10,
    initial=None,
) -> AggregationResult:
  """The Fed+ aggregate A(W) of eq. (7), by iteration (25)/(16)/(22) or by IRLS.

  The start w^(0) is the a-weighted mean of the points, or `initial`. 'squared_l2' returns exactly the
  weighted mean with 0 iterations. Otherwise each step is
    'fixed_point' (the paper's (25)): w <- w + sum_k a_k residual(w_k - w) / sum_k a_k;
    'irls': omega_k = a_k min(1, delta / ||w_k - w||_2) (per coordinate for 'l1'),
            w <- sum_k omega_k w_k / sum_k omega_k,
  both with the fixed point (49). Iteration stops once ||w^(t+1) - w^(t)||_2 <= tolerance (converged)
  or after max_iterations steps.

  Args:
    points: [K, d] finite array, one flattened local model per row.
    delta: finite threshold delta > 0.
    kind: one of PSI_KINDS.
    weights: optional [K] non-negative a_k with a positive sum; default 1.
    solver: one of SOLVERS.
    max_iterations: int >= 1.
    tolerance: >= 0, on the Euclidean norm of a step.
    initial: optional [d] finite start (a warm start); default the weighted mean. Ignored by
      'squared_l2', whose aggregate is the weighted mean in closed form.

  Returns:
    AggregationResult(aggregate, iterates, num_iterations, converged, step_norms).

  Raises:
    ValueError: naming the argument, if any argument is outside its allowed range.
  """
  delta, points, weights = _check_common(points, delta, kind, weights)
  _check_solver(solver)
  max_iterations = _check_max_iterations(max_iterations)
  tolerance = _check_tolerance(tolerance)
  if initial is not None:
    initial = _check_vector('initial', initial, points.shape[1])
  mean = weights @ points / weights.sum()
  if kind == 'squared_l2':
    return AggregationResult(mean, [mean], 0, True, [])
  w = mean if initial is None else initial
  step = _fixed_point_step if solver == 'fixed_point' else _irls_step
  iterates, step_norms, converged = [w], [], False
  for _ in range(max_iterations):
    new_w = step(w, points, delta, kind, weights)
    step_norms.append(float(np.linalg.norm(new_w - w)))
    iterates.append(new_w)
    w = new_w
    if step_norms[-1] <= tolerance:
      converged = True
      break
  return AggregationResult(w, iterates, len(step_norms), converged, step_norms)


def _check_common(points, delta, kind, weights) -> tuple[float, np.ndarray, np.ndarray]:
  delta = _check_delta(delta)
  _check_kind(kind)
  points = _check_points(points)
  return delta, points, _check_weights(weights, points.shape[0])


def _mean_residual(w, points, delta, kind, weights) -> np.ndarray:
  return weights @ _residual_rows(points - w, delta, kind) / weights.sum()


def _fixed_point_step(w, points, delta, kind, weights) -> np.ndarray:
  """Iteration (25): w + Mean_a{residual(w_k - w)} = Mean_a{w_k} - Mean_a{prox(w_k - w)}."""
  return w + _mean_residual(w, points, delta, kind, weights)


def _irls_step(w, points, delta, kind, weights) -> np.ndarray:
  """Reweighted mean with omega = a min(1, delta / distance) = a delta / max(distance, delta)."""
  differences = np.abs(points - w)
  if kind == 'l2':
    distances = np.linalg.norm(differences, axis=1)
    omega = weights * delta / np.maximum(distances, delta)
    return omega @ points / omega.sum()
  omega = weights[:, np.newaxis] * delta / np.maximum(differences, delta)  # [K, d], per coordinate.
  return np.sum(omega * points, axis=0) / np.sum(omega, axis=0)
