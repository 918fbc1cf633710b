"""A FedAvg-shaped learning process whose corrupted clients poison their updates (simulation only).

`tff.learning.templates.compose_learning_process` of TFF's own distributor, model-delta client work and
optimizer finalizer, with two changes: each client's data is `<dataset, flag>` (the flag a one-element bool
dataset: TFF client data must be sequences), and the client work passes `<update, flag>` to an
`UpdateCorruptionFactory` around the algorithm's own aggregator (`counting_client_work`'s `client_flags`, read in
the client's one training call). With no corrupted client it computes
exactly `build_weighted_fed_avg(..., model_aggregator=model_aggregator)`, and like
`composition.build_fed_avg_process` it counts non-finite client updates (`client_work/num_nonfinite_updates`).
With `attacker_alpha` the flagged clients also train constrain-and-scale's objective alpha L_class + (1 - alpha)
||w - G||^2 (`constrained_attack_client_work`; stateless client work: no client learning-rate hparams).
"""

from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import update_corruption
from tff_robust.aggregators.attacks import base
from tff_robust.processes import client_loop
from tff_robust.processes import composition
from tff_robust.processes import constrained_attack_client_work
from tff_robust.processes import counting_client_work


def corruption_flag_dataset(corrupted: bool) -> tf.data.Dataset:
  """The per-client flag in the form the process takes it: a one-element dataset."""
  return tf.data.Dataset.from_tensors(tf.constant(corrupted))


def build_update_corruption_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: tff.learning.optimizers.Optimizer,
    *,
    model_aggregator: tff.aggregators.WeightedAggregationFactory,
    attack,
    seed: int = 0,
    client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
    stacked_rule: Optional[base.StackedRule] = None,
    attacker_alpha: Optional[float] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds the process; `next(state, [(dataset, corruption_flag_dataset(flag)), ...])`.

  `attack` (a spec such as 'alie(z=1)'), `seed` and `stacked_rule` (the defence's, for white-box attacks) are
  `update_corruption.UpdateCorruptionFactory`'s; `attacker_alpha` in (0, 1], if given, the flagged clients' weight
  of their class loss in constrain-and-scale's objective (module docstring).
  """
  if attacker_alpha is None:
    client_work = counting_client_work.build_model_delta_client_work(
        model_fn, client_optimizer_fn, client_weighting, tff.learning.metrics.sum_then_finalize,
        loop_implementation=client_loop.LOOP_IMPLEMENTATION, client_flags=True,
    )
  else:
    client_work = constrained_attack_client_work.build_constrained_attack_client_work(
        model_fn, client_optimizer_fn, attacker_alpha, client_weighting, tff.learning.metrics.sum_then_finalize)
  aggregator = update_corruption.UpdateCorruptionFactory(attack, model_aggregator, seed=seed, stacked_rule=stacked_rule)
  return composition.compose_with_fedavg_parts(model_fn, client_work, aggregator, server_optimizer_fn)
