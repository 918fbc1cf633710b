"""RFA with personalization (Pillutla, Kakade, Harchaoui, Algorithm 4), as a `StatefulClientProcess`.

Objective: min_{w, U} sum_i alpha_i E_{z ~ D_i} f(w + u_i; z); device i predicts with w + u_i and keeps u_i
(its client state, u_i^(0) = 0). In a round, device i receives w and
    1. personal step: tau steps on u_i with w fixed:  u <- u - gamma grad f(w + u; z);
    2. shared step: tau steps on w with the new u_i fixed, on a fresh pass over its data;
then sends its shared update for geometric-median aggregation (`GeometricMedianFactory`, as RFA) and keeps
u_i. Because grad_u f(w + u) = grad f(w + u), step 1 is local training of the summed model w + u from
w + u_i, and step 2 continues it from the same point; u_i' = (after step 1) - w, and the shared model
moves by (after step 2) - (after step 1). Each step has its own, freshly initialised, optimizer state.
tau is one pass over the client's dataset as the task batches it (so twice FedAvg's local computation).

The paper uses one step size gamma for both steps. `personal_optimizer_fn` optionally gives step 1 its own
(an extension, not in the paper): a smaller personal step bounds how far u_i can move from the shared model
in a round, e.g. towards a corrupted device's data.
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import local_training
from tff_robust.processes import rfa
from tff_robust.processes import stateful_clients


def build_personalized_rfa_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    num_passes: Optional[int] = None,
    smoothing: float = 1e-6,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    metrics_aggregator=tff.learning.metrics.sum_then_finalize,
    personal_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> stateful_clients.StatefulClientProcess:
  """Builds personalized RFA; client state = the personal offset u_i (the trainable weights' structure).

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`.
    client_optimizer_fn: a `tff.learning.optimizers.Optimizer` for the shared step (gamma), and for the
      personal step unless `personal_optimizer_fn` is given.
    server_optimizer_fn: applied to the geometric median of the shared updates; defaults to SGD with
      learning rate 1.
    num_passes, smoothing, mean_factory: of RFA's aggregator (`rfa.rfa_aggregator`); alpha_i = examples.
    metrics_aggregator: as for `tff.learning.algorithms.build_weighted_fed_avg`; the metrics cover both
      local steps.
    personal_optimizer_fn: the personal step's optimizer; None (the paper): `client_optimizer_fn`.
    count_factory: sums the 0/1 counts of the client work (`stateful_clients`) and of the geometric median
      (`rfa.rfa_aggregator`); with `tff.aggregators.SecureSumFactory(1, 0)`, a secure `mean_factory` and secure
      metrics, every client value reaches the server through a secure sum.

  Returns:
    A `StatefulClientProcess`; a client's personal model is w + u_i.
  """
  if personal_optimizer_fn is None:
    personal_optimizer_fn = client_optimizer_fn
  aggregator = rfa.rfa_aggregator(
      num_passes=num_passes, smoothing=smoothing, mean_factory=mean_factory, count_factory=count_factory
  )
  if server_optimizer_fn is None:
    server_optimizer_fn = tff.learning.optimizers.build_sgdm(learning_rate=1.0)

  def client_update(global_weights, offset, dataset):
    model = model_fn()
    global_trainable = list(global_weights.trainable)
    non_trainable = list(global_weights.non_trainable)
    start = tff.learning.models.ModelWeights(
        trainable=[w + u for w, u in zip(global_trainable, offset)], non_trainable=non_trainable
    )
    personal, _, _ = local_training.train_locally(model, personal_optimizer_fn, start, dataset)
    after_shared, num_examples, metrics = local_training.train_locally(
        model, client_optimizer_fn,
        tff.learning.models.ModelWeights(trainable=list(personal), non_trainable=non_trainable), dataset,
    )
    new_offset = tuple(p - w for p, w in zip(personal, global_trainable))
    update = [p - s for p, s in zip(personal, after_shared)]  # w - w_i^(t+1), TFF's sign
    return update, tf.cast(num_examples, tf.float32), new_offset, metrics

  return stateful_clients.build_stateful_client_process(
      model_fn, client_update, lambda weights_type: weights_type.trainable, aggregator, server_optimizer_fn,
      initial_client_state=lambda state: tuple(np.zeros_like(w) for w in state['global_model_weights'].trainable),
      personal_model_weights=lambda global_weights, offset: tff.learning.models.ModelWeights(
          trainable=[w + u for w, u in zip(global_weights.trainable, offset)],
          non_trainable=list(global_weights.non_trainable),
      ),
      metrics_aggregator=metrics_aggregator,
      count_factory=count_factory,
  )
