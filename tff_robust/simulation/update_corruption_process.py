"""A FedAvg-shaped learning process whose corrupted clients poison their updates (simulation only).

`tff.learning.templates.compose_learning_process` of TFF's own distributor, model-delta client work and
optimizer finalizer, with two changes: each client's data is `<dataset, flag>` (the flag a one-element bool
dataset: TFF client data must be sequences), and the client work passes `<update, flag>` to an
`UpdateCorruptionFactory` around the algorithm's own aggregator. With no corrupted client it computes
exactly `build_weighted_fed_avg(..., model_aggregator=model_aggregator)`, and like
`composition.build_fed_avg_process` it counts non-finite client updates (`client_work/num_nonfinite_updates`).
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import update_corruption
from tff_robust.aggregators.attacks import base
from tff_robust.processes import client_loop
from tff_robust.processes import composition


def corruption_flag_dataset(corrupted: bool) -> tf.data.Dataset:
  """The per-client flag in the form the process takes it: a one-element dataset."""
  return tf.data.Dataset.from_tensors(tf.constant(corrupted))


@tf.function
def _first_flag(flag_dataset: tf.data.Dataset) -> tf.Tensor:
  """The flag of a `corruption_flag_dataset` (False if empty), read through an iterator: no reduce function to
  instantiate at every client call (`tff_robust.processes.client_loop`)."""
  flag = iter(flag_dataset).get_next_as_optional()
  return tf.cond(flag.has_value(), flag.get_value, lambda: tf.constant(False))


def _flag_emitting_client_work(inner: tff.learning.templates.ClientWorkProcess):
  weights_type = inner.next.type_signature.parameter[1]
  data_type = inner.next.type_signature.parameter[2].member
  result_member_type = inner.next.type_signature.result.result.member

  @tff.tensorflow.computation(result_member_type, tff.SequenceType(np.bool_))
  def attach_flag(client_result, flag_dataset):
    flag = _first_flag(flag_dataset)
    return tff.learning.templates.ClientResult(
        update=(client_result.update, flag), update_weight=client_result.update_weight
    )

  @tff.federated_computation(
      inner.initialize.type_signature.result,
      weights_type,
      tff.FederatedType((data_type, tff.SequenceType(np.bool_)), tff.CLIENTS),
  )
  def next_fn(state, model_weights, client_data):
    output = inner.next(state, model_weights, client_data[0])
    return tff.templates.MeasuredProcessOutput(
        state=output.state,
        result=tff.federated_map(attach_flag, (output.result, client_data[1])),
        measurements=output.measurements,
    )

  return tff.learning.templates.ClientWorkProcess(
      inner.initialize, next_fn, get_hparams_fn=inner.get_hparams, set_hparams_fn=inner.set_hparams
  )


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
) -> tff.learning.templates.LearningProcess:
  """Builds the process; `next(state, [(dataset, corruption_flag_dataset(flag)), ...])`.

  `attack` (a spec such as 'alie(z=1)'), `seed` and `stacked_rule` (the defence's, for white-box attacks) are
  `update_corruption.UpdateCorruptionFactory`'s.
  """
  client_work = _flag_emitting_client_work(composition.count_nonfinite_updates(
      tff.learning.templates.build_model_delta_client_work(
          model_fn, client_optimizer_fn, client_weighting, loop_implementation=client_loop.LOOP_IMPLEMENTATION
      )
  ))
  aggregator = update_corruption.UpdateCorruptionFactory(attack, model_aggregator, seed=seed, stacked_rule=stacked_rule)
  return composition.compose_with_fedavg_parts(model_fn, client_work, aggregator, server_optimizer_fn)
