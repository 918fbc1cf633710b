"""FedProx with the proximal gradient of the right sign: a drop-in for TFF's `build_weighted_fed_prox`.

FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith 2020, Algorithm 2). Each client k of the cohort starts
from the broadcast global model w_t and takes one optimizer step per batch on the gradient of
    h_k(w) = f_k(w) + (mu / 2) ||w - w_t||^2,    grad h_k(w) = grad f_k(w) + mu (w - w_t)      (eq. (2)),
then sends w_t - w_k with weight n_k (examples trained on) or 1; the server applies the weighted mean of
those updates with its optimizer (SGD with learning rate 1: w_{t+1} = the weighted mean of the w_k).
mu = 0 is FedAvg. With client SGD at learning rate eta this is Fed+ (Table 1) with theta = 0, lambda = 1,
sigma = mu and weights n_k at client learning rate eta' = eta / (1 - eta mu), for which eta' kappa = eta.

TFF 0.87's `build_weighted_fed_prox` adds mu (w_t - w) to the gradient instead (its `proximal_client_work`),
so it pushes clients away from w_t. This process takes its arguments (less `model_distributor` and
`loop_implementation`) and has the sign of eq. (2).
"""

from typing import Optional

import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.processes import composition
from tff_robust.processes import local_training
from tff_robust.processes import model_types
from tff_robust.processes import stateless_client_work

_CLIENT_WEIGHTINGS = (tff.learning.ClientWeighting.NUM_EXAMPLES, tff.learning.ClientWeighting.UNIFORM)


def build_fedprox_client_work(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    proximal_strength: float,
    client_weighting: tff.learning.ClientWeighting,
    metrics_aggregator,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """The client step of FedProx (module docstring) as a stateless `ClientWorkProcess`.

  A client whose update or weight has a NaN or Inf entry is left out as in TFF's model-delta client work
  (zero update, weight 0, metrics reset) and counted in `num_nonfinite_updates`; `num_empty_datasets`
  counts clients without data; `count_factory` sums the two counts (`stateless_client_work`). `train` is
  `metrics_aggregator` over the cohort's model metrics.

  `proximal_strength` may be negative here (`build_fedprox_process` takes mu >= 0): at -mu this client work,
  composed with FedAvg's parts, is TFF 0.87's `build_weighted_fed_prox` at mu (`tests/processes/test_fedprox.py`).

  Raises:
    ValueError: for a `proximal_strength` that is not a finite number.
  """
  proximal_strength = type_checks.check_number('proximal_strength', proximal_strength)
  data_type, weights_type, metrics_aggregation_fn = model_types.model_types(model_fn, metrics_aggregator)

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(global_weights, dataset):
    global_trainable = list(global_weights.trainable)
    trained, num_examples, metrics = local_training.train_locally(
        model_fn(), client_optimizer_fn, global_weights, dataset, anchor=global_trainable,
        proximal_strength=proximal_strength,
    )
    return stateless_client_work.client_result(trained, global_trainable, num_examples, metrics, dataset,
                                               client_weighting)

  return stateless_client_work.build(client_update, weights_type, data_type, metrics_aggregation_fn, count_factory)


def build_fedprox_process(
    model_fn,
    proximal_strength: float,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    model_aggregator: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    metrics_aggregator=None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds FedProx (module docstring) with `build_weighted_fed_prox`'s arguments (its client work has no state).

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`.
    proximal_strength: mu >= 0 of (mu / 2)||w - w_t||^2 (0: FedAvg).
    client_optimizer_fn: a `tff.learning.optimizers.Optimizer` for the local steps.
    server_optimizer_fn: applied to the aggregate; defaults to SGD with learning rate 1.
    client_weighting: `tff.learning.ClientWeighting.NUM_EXAMPLES` (n_k, the default) or `UNIFORM`.
    model_aggregator: a `WeightedAggregationFactory`; defaults to `tff.aggregators.MeanFactory()`.
    metrics_aggregator: defaults to `tff.learning.metrics.sum_then_finalize`.
    count_factory: sums the client work's 0/1 counts (below); defaults to `tff.aggregators.SumFactory()`. With
      `tff.aggregators.SecureSumFactory(1, 0)`, a secure `model_aggregator` and
      `metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize`, every client value reaches the server
      through a secure sum (`privacy.assert_client_values_aggregated_securely(process.next)`).

  Returns:
    A `tff.learning.templates.LearningProcess`; its metrics `client_work/num_nonfinite_updates` count the
    clients left out of a round for a non-finite update, `client_work/num_empty_datasets` those without data.

  Raises:
    ValueError: for a proximal strength or client weighting outside the allowed values.
  """
  type_checks.check_number('proximal_strength', proximal_strength, minimum=0.0)
  if client_weighting not in _CLIENT_WEIGHTINGS:
    raise ValueError(f'client_weighting must be one of {_CLIENT_WEIGHTINGS}, got {client_weighting!r}')
  server_optimizer_fn, model_aggregator, metrics_aggregator = composition.with_fedavg_defaults(
      server_optimizer_fn, model_aggregator, metrics_aggregator
  )
  client_work = build_fedprox_client_work(
      model_fn, client_optimizer_fn, proximal_strength, client_weighting, metrics_aggregator, count_factory
  )
  return composition.compose_with_fedavg_parts(model_fn, client_work, model_aggregator, server_optimizer_fn)
