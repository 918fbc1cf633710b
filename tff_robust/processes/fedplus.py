"""Fed+ (FedAvg+, FedGeoMed+, FedCoMed+): personal local models pulled toward a robust global model.

Fed+ (Kundu, Yu, Wynter, Lim), Algorithm 1 with the corrections of the implementation notes. Each client k
keeps its local model w_k between rounds (its client state; w_k^0 = the initial global model). In round t,
client k in the cohort receives the global model w~ and
    theta_k = prox_Psi^{1/sigma}(w_k - w~)                       (eq. (11); closed forms in `prox_ops`)
    w <- (1 - lambda) w_k + lambda w~                             (line 18, `local_init_mixing`)
    w <- kappa [w - eta grad f_k(w)] + (1 - kappa) [w~ + theta_k], kappa = 1 / (1 + eta sigma)   (eq. (14))
for each minibatch, stores w as its new w_k and sends w~ - w. The server aggregates with the mean
('avg'), the delta-geometric median ('geomed') or the delta-coordinate-wise median ('comed') of eq. (7),
over the cohort: these are translation-equivariant, so aggregating w~ - w_k and subtracting the result
from w~ (server SGD with learning rate 1) gives the aggregate of the local models.

A client first sampled in round t starts from w_k = w~^0, the initial global model (Algorithm 1, line 2:
`init_client_from='initial_global'`), or from the w~^t it receives (`'current_global'`, the notes' option for
partial participation; its state then also records whether the client has trained). With every client in every
round the two are the same.

Table 1 of the paper as arguments: FedAvg is (mean, lambda=1, sigma=0); FedProx with proximal strength
mu is variant 'fedprox' (Psi = indicator of 0, so theta = 0) with lambda=1, sigma=mu and client learning
rate eta (FedProx with learning rate eta kappa: `tff_robust.processes.fedprox`, not TFF's, whose proximal term
has the opposite sign, NOTES.md); RFA is `model_aggregator=` a geometric median with
lambda=1, sigma=0; local training without FL is sigma=0, lambda=0.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import delta_median
from tff_robust.aggregators import prox_ops
from tff_robust.aggregators import type_checks
from tff_robust.processes import local_training
from tff_robust.processes import stateful_clients

# variant -> Psi of eq. (2) (None: the indicator of 0, theta = 0).
_PSI_OF_VARIANT = {'avg': 'squared_l2', 'geomed': 'l2', 'comed': 'l1', 'fedprox': None}
VARIANTS = tuple(_PSI_OF_VARIANT)
DEFAULT_DELTA = 0.1


def fedplus_aggregator(
    variant: str,
    delta: float = DEFAULT_DELTA,
    *,
    solver: str = 'irls',
    max_iterations: int = delta_median.DEFAULT_MAX_ITERATIONS,
    tolerance: float = 1e-6,
) -> tff.aggregators.WeightedAggregationFactory:
  """The server step of `variant`: the mean ('avg', 'fedprox') or a `DeltaMedianFactory`.

  Raises:
    ValueError: for an unknown `variant`, or a `delta` (> 0) or `tolerance` (>= 0) that is not a finite number in
      range, whether the variant uses them or not.
  """
  if variant not in VARIANTS:
    raise ValueError(f'variant must be one of {VARIANTS}, got {variant!r}')
  delta = type_checks.check_number('delta', delta, minimum=0.0, strict=True)
  tolerance = type_checks.check_number('tolerance', tolerance, minimum=0.0)
  if variant in ('avg', 'fedprox'):
    return tff.aggregators.MeanFactory(no_nan_division=True)
  return delta_median.DeltaMedianFactory(
      'l2' if variant == 'geomed' else 'l1', delta, solver=solver, max_iterations=max_iterations,
      tolerance=tolerance,
  )


def _anchor_trainables(global_trainable, local_trainable, psi: Optional[str], delta: float) -> list:
  """TensorFlow: the anchor w~ + theta_k, theta_k = prox_Psi^{1/sigma}(w_k - w~) (eq. (11); 0 without Psi), tensor
  by tensor: where local training pulls w_k (eq. (14)), and the personalised model of eq. (2)."""
  offset = [w - g for w, g in zip(local_trainable, global_trainable)]
  theta = prox_ops.prox(offset, psi, delta) if psi else [tf.zeros_like(t) for t in offset]
  return [g + t for g, t in zip(global_trainable, theta)]


class _FromInitialGlobal:
  """Client states of Algorithm 1: a client's state is its local model's trainables w_k, w_k^0 = w~^0."""

  @staticmethod
  def type_of(weights_type):
    """The state's `tff.Type` given the model's `ModelWeights` type."""
    return weights_type.trainable

  @staticmethod
  def initial(server_state):
    """The state of a client before its first round: the trainables of the server state's global model."""
    return tuple(server_state['global_model_weights'].trainable)

  @staticmethod
  def local_trainables(global_trainable, client_state) -> list:
    """w_k (the global model plays no part)."""
    del global_trainable  # unused
    return list(client_state)

  @staticmethod
  def after_training(trained):
    """The state holding the trained w_k."""
    return tuple(trained)


class _FromCurrentGlobal:
  """Client states <local: w_k's trainables, seen: whether the client has trained>; an unseen client's w_k is
  the global model it is given."""

  @staticmethod
  def type_of(weights_type):
    """The state's `tff.Type` given the model's `ModelWeights` type."""
    return tff.to_type(collections.OrderedDict(local=weights_type.trainable, seen=tff.TensorType(np.bool_)))

  @staticmethod
  def initial(server_state):
    """The state of a client before its first round: unseen (its `local` is a placeholder of the right shapes)."""
    return collections.OrderedDict(local=tuple(server_state['global_model_weights'].trainable), seen=np.bool_(False))

  @staticmethod
  def local_trainables(global_trainable, client_state) -> list:
    """w_k as tensors (eager ones for NumPy arguments): `local` once seen, else `global_trainable`."""
    return [tf.where(client_state['seen'], w, g) for w, g in zip(client_state['local'], global_trainable)]

  @staticmethod
  def after_training(trained):
    """The state holding the trained w_k, seen."""
    return collections.OrderedDict(local=tuple(trained), seen=tf.constant(True))


_CLIENT_STATES = {'initial_global': _FromInitialGlobal, 'current_global': _FromCurrentGlobal}
INIT_CLIENT_FROM = tuple(_CLIENT_STATES)


def _anchor(global_weights, local_trainable, psi: Optional[str], delta: float) -> tff.learning.models.ModelWeights:
  """`_anchor_trainables` of NumPy weights, eagerly: the model of eq. (2), which the paper's Algorithm 1 does not
  return (notes 6.11: report both)."""
  anchor = _anchor_trainables([tf.convert_to_tensor(w) for w in global_weights.trainable],
                              [tf.convert_to_tensor(w) for w in local_trainable], psi, delta)
  return tff.learning.models.ModelWeights(
      trainable=[t.numpy() for t in anchor], non_trainable=list(global_weights.non_trainable))


def build_fedplus_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    *,
    variant: str = 'avg',
    sigma: float,
    delta: float = DEFAULT_DELTA,
    local_init_mixing: float = 0.0,
    weighted: bool = False,
    solver: str = 'irls',
    max_iterations: int = delta_median.DEFAULT_MAX_ITERATIONS,
    tolerance: float = 1e-6,
    model_aggregator: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    metrics_aggregator=tff.learning.metrics.sum_then_finalize,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
    init_client_from: str = 'initial_global',
) -> stateful_clients.StatefulClientProcess:
  """Builds Fed+ (Algorithm 1) as a `StatefulClientProcess`; client state = the local model's trainables (with
  `init_client_from='current_global'`, and whether the client has trained).

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`.
    client_optimizer_fn: a `tff.learning.optimizers.Optimizer` with a `learning_rate` hyperparameter eta;
      SGD gives eq. (14) exactly.
    variant: 'avg' (FedAvg+), 'geomed' (FedGeoMed+), 'comed' (FedCoMed+) or 'fedprox' (theta = 0, mean).
    sigma: the proximal penalty sigma >= 0 (0: no pull, kappa = 1).
    delta: the smoothing/personalisation threshold delta > 0 of Psi.
    local_init_mixing: lambda in [0, 1]: local training starts at (1 - lambda) w_k + lambda w~.
    weighted: aggregate with weights n_k (examples trained on) instead of the paper's unweighted mean.
    solver, max_iterations, tolerance: of the delta-median server step (`DeltaMedianFactory`).
    model_aggregator: replaces the variant's server step (e.g. RFA's geometric median, Table 1).
    server_optimizer_fn: applied to the aggregate; defaults to SGD with learning rate 1 (w~ = A(W)).
    metrics_aggregator: as for `tff.learning.algorithms.build_weighted_fed_avg`.
    count_factory: sums the client work's non-finite and empty-dataset counts (`stateful_clients`); with
      `tff.aggregators.SecureSumFactory(1, 0)`, a secure `model_aggregator` and secure metrics, every client value
      reaches the server through a secure sum (e.g. `model_aggregator=delta_median.DeltaMedianFactory(...,
      sum_factory=<a secure sum>)` for FedGeoMed+ or FedCoMed+).
    init_client_from: where a client's local model w_k starts before its first round: 'initial_global' (w~^0,
      Algorithm 1) or 'current_global' (the global model of that round; a client left out of a round for a
      non-finite result, or never sampled, keeps starting from the current one).

  Returns:
    A `StatefulClientProcess`; a client's personal model is its local model w_k (Algorithm 1's), its anchor
    model the personalised w~ + theta_k of eq. (2) (`anchor_model_weights`).

  Raises:
    ValueError: for an argument outside its allowed range.
  """
  if variant not in VARIANTS:
    raise ValueError(f'variant must be one of {VARIANTS}, got {variant!r}')
  sigma = type_checks.check_number('sigma', sigma, minimum=0.0)
  mixing = type_checks.check_number('local_init_mixing', local_init_mixing, minimum=0.0, maximum=1.0)
  delta = type_checks.check_number('delta', delta, minimum=0.0, strict=True)
  type_checks.check_number('tolerance', tolerance, minimum=0.0)
  if init_client_from not in INIT_CLIENT_FROM:
    raise ValueError(f'init_client_from must be one of {INIT_CLIENT_FROM}, got {init_client_from!r}')
  client_states = _CLIENT_STATES[init_client_from]
  if model_aggregator is None:
    model_aggregator = fedplus_aggregator(
        variant, delta, solver=solver, max_iterations=max_iterations, tolerance=tolerance
    )
  if server_optimizer_fn is None:
    server_optimizer_fn = tff.learning.optimizers.build_sgdm(learning_rate=1.0)
  kappa = 1.0 / (1.0 + local_training.learning_rate_of(client_optimizer_fn) * sigma)
  psi = _PSI_OF_VARIANT[variant]

  def client_update(global_weights, client_state, dataset):
    global_trainable = list(global_weights.trainable)
    local_trainable = client_states.local_trainables(global_trainable, client_state)
    anchor = _anchor_trainables(global_trainable, local_trainable, psi, delta)
    start = tff.learning.models.ModelWeights(
        trainable=[(1.0 - mixing) * w + mixing * g for w, g in zip(local_trainable, global_trainable)],
        non_trainable=list(global_weights.non_trainable),
    )
    trained, num_examples, metrics = local_training.train_locally(
        model_fn(), client_optimizer_fn, start, dataset, anchor=anchor, kappa=kappa
    )
    update = [g - w for w, g in zip(trained, global_trainable)]  # TFF's sign: applied as a gradient
    weight = tf.cast(num_examples, tf.float32) if weighted else tf.constant(1.0)
    return update, weight, client_states.after_training(trained), metrics

  def personal_model_weights(global_weights, client_state):
    local = client_states.local_trainables(list(global_weights.trainable), client_state)
    return tff.learning.models.ModelWeights(
        trainable=[np.asarray(w) for w in local], non_trainable=list(global_weights.non_trainable)
    )

  def anchor_model_weights(global_weights, client_state):
    return _anchor(global_weights, client_states.local_trainables(list(global_weights.trainable), client_state),
                   psi, delta)

  return stateful_clients.build_stateful_client_process(
      model_fn, client_update, client_states.type_of, model_aggregator, server_optimizer_fn,
      initial_client_state=client_states.initial,
      personal_model_weights=personal_model_weights,
      anchor_model_weights=anchor_model_weights,
      metrics_aggregator=metrics_aggregator,
      count_factory=count_factory,
  )
