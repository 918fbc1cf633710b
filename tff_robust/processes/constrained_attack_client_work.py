"""Client work whose flagged clients train constrain-and-scale's attacker objective (Bagdasaryan et al., "How to
backdoor federated learning", AISTATS 2020, Sec. 4): every client starts from the broadcast global model G; an
honest client takes one optimizer step per batch on the gradient of its loss L_class, a flagged (corrupted) one on
the gradient of
    L_model = alpha L_class(w) + (1 - alpha) L_ano(w),    L_ano(w) = ||w - G||^2,
    grad L_model = alpha grad L_class(w) + 2 (1 - alpha) (w - G),
so that its model stays near the global one (under a norm or distance defence) while it learns its backdoored data.
The scaling (boost) is the aggregator's (`aggregators.attacks.boost`, through `UpdateCorruptionFactory`).
L_ano is the squared Euclidean distance to the global model (the paper's anomaly loss is the defence's own metric;
for a norm bound, the distance).

Each client's data is `<dataset, flag dataset>` and its update leaves as `<update, flag>`, as
`counting_client_work`'s with `client_flags=True`; stateless, with FedProx's result, non-finite and empty counts
(`stateless_client_work`).
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.processes import counting_client_work
from tff_robust.processes import local_training
from tff_robust.processes import model_types
from tff_robust.processes import stateless_client_work


def build_constrained_attack_client_work(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    alpha: float,
    client_weighting: tff.learning.ClientWeighting,
    metrics_aggregator,
) -> tff.learning.templates.ClientWorkProcess:
  """The client work of the module docstring; alpha in (0, 1] (1: the flagged clients train as honest ones do).

  Raises:
    ValueError: for an alpha outside (0, 1].
  """
  alpha = type_checks.check_number('alpha', alpha, minimum=0.0, strict=True, maximum=1.0)
  dataset_type, weights_type, metrics_aggregation_fn = model_types.model_types(model_fn, metrics_aggregator)
  client_data_type = tff.StructType([dataset_type, tff.SequenceType(np.bool_)])

  @tff.tensorflow.computation(weights_type, client_data_type)
  def client_update(global_weights, client_data):
    dataset, flagged = client_data[0], counting_client_work.first_flag(client_data[1])
    global_trainable = list(global_weights.trainable)
    trained, num_examples, metrics = local_training.train_locally(
        model_fn(), client_optimizer_fn, global_weights, dataset, anchor=global_trainable,
        proximal_strength=tf.where(flagged, 2.0 * (1.0 - alpha), 0.0),
        loss_weight=tf.where(flagged, alpha, 1.0),
    )
    return stateless_client_work.client_result(trained, global_trainable, num_examples, metrics, dataset,
                                               client_weighting, flag=flagged)

  return stateless_client_work.build(client_update, weights_type, client_data_type, metrics_aggregation_fn)
