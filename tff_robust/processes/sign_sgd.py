"""signSGD with majority vote (Bernstein et al.): MtFEEL's "sign FedSGD" baseline over the same uplink.

One global model w; every device m takes part in every round and sends s_m = sign(grad Lhat(w, S_m)) (its
full-batch gradient, one bit per coordinate) through the channel; the server steps
    w <- w - eta sign(sum_m s^_m)        (mode 'vote'; a tie gives 0)
or  w <- w - eta (1/N) sum_m s^_m        (mode 'mean'),
with s^_m the received bits (`MajorityVoteFactory`). A device whose gradient is not finite, or that has
no data, sends zeros that round (counted in `aggregator/num_nonfinite_clients` if not finite); the error-free
and binary symmetric channels keep them zero, but the Rayleigh channel detects them as random bits.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import channels
from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import sign_vote
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.processes import indexed_clients
from tff_robust.processes import model_types
from tff_robust.processes import stacked_models


def build_sign_sgd_process(
    model_fn, num_clients: int, *, learning_rate: float, mode: str = 'vote',
    channel: Optional[channels.Channel] = None, seed: int = 0,
) -> indexed_clients.IndexedClientsProcess:
  """Builds signSGD over `num_clients` devices (all in every round); the channel is seeded like MtFEEL's.

  Returns:
    An `IndexedClientsProcess` with a global model (every device predicts with it). Metrics:
    `client_work/train/loss` (mean over devices of Lhat(w, S_m)), `client_work/num_empty_datasets` (devices
    without data) and `aggregator/` (the channel's `bits`,
    `bit_errors`, `outages`, and `num_nonfinite_clients`).

  Raises:
    ValueError: for an argument out of range, naming it.
  """
  type_checks.check_integer('num_clients', num_clients, minimum=1)
  learning_rate = type_checks.check_number('learning_rate', learning_rate, minimum=0.0, strict=True)
  channel = channels.ErrorFreeChannel() if channel is None else channel
  data_type, weights_type, _ = model_types.model_types(model_fn, tff.learning.metrics.sum_then_finalize)
  client_type = indexed_clients.client_value_type(data_type)

  @tff.tensorflow.computation
  def initial_model():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  @tff.tensorflow.computation(weights_type, tff.TensorType(np.int32), client_type)
  def client_signs(weights, round_num, client):
    as_stack = tf.nest.map_structure(lambda w: w[None], weights)
    losses, gradients, num_examples = stacked_models.losses_and_gradients(
        model_fn(), as_stack, tf.constant([0]), client.dataset
    )
    nonfinite = tf.logical_not(structure_math.all_finite([losses, gradients]))
    keep = tf.logical_not(tf.logical_or(nonfinite, num_examples <= 0))
    signs = [tf.where(keep, s, 0.0) for s in indexed_clients.gradient_signs([g[0] for g in gradients])]
    return (
        collections.OrderedDict(
            signs=signs, seed=indexed_clients.channel_seed(seed, round_num, client.index, num_clients)
        ),
        collections.OrderedDict(
            loss=tf.where(keep, losses[0], 0.0), reporting=tf.cast(keep, tf.float32),
            nonfinite=tf.cast(nonfinite, tf.int32),
            empty=federated_counting.is_empty_after(client.dataset, (losses, gradients)),
        ),
    )

  vote = sign_vote.MajorityVoteFactory(channel, mode=mode).create(client_signs.type_signature.result[0])

  @tff.tensorflow.computation(weights_type, vote.next.type_signature.result.result.member)
  def signed_step(weights, direction):
    return tff.learning.models.ModelWeights(
        trainable=[w - learning_rate * d for w, d in zip(weights.trainable, direction)],
        non_trainable=list(weights.non_trainable),
    )

  @tff.tensorflow.computation(client_signs.type_signature.result[1])
  def mean_loss(totals):
    return tf.math.divide_no_nan(totals['loss'], totals['reporting'])


  @tff.federated_computation
  def initialize_fn():
    return tff.federated_zip(collections.OrderedDict(
        global_model_weights=tff.federated_eval(initial_model, tff.SERVER),
        round_num=tff.federated_value(np.int32(0), tff.SERVER),
        vote=vote.initialize(),
    ))

  @tff.federated_computation(initialize_fn.type_signature.result, tff.FederatedType(client_type, tff.CLIENTS))
  def next_fn(state, clients):
    outputs = tff.federated_map(client_signs, (
        tff.federated_broadcast(state.global_model_weights), tff.federated_broadcast(state.round_num), clients,
    ))
    voted = vote.next(state.vote, outputs[0])
    totals = tff.federated_sum(outputs[1])
    new_state = tff.federated_zip(collections.OrderedDict(
        global_model_weights=tff.federated_map(signed_step, (state.global_model_weights, voted.result)),
        round_num=federated_counting.increment(state.round_num),
        vote=voted.state,
    ))
    metrics = tff.federated_zip(collections.OrderedDict(
        client_work=tff.federated_zip(collections.OrderedDict(
            train=tff.federated_zip(collections.OrderedDict(loss=tff.federated_map(mean_loss, totals))),
            num_empty_datasets=totals.empty,
        )),
        aggregator=tff.federated_zip(collections.OrderedDict(
            channel=voted.measurements, num_nonfinite_clients=totals.nonfinite,
        )),
    ))
    return new_state, metrics

  return indexed_clients.IndexedClientsProcess(
      initialize_fn, next_fn, num_clients=num_clients,
      get_model_weights=lambda state: state['global_model_weights'],
      set_model_weights=lambda state, model_weights: collections.OrderedDict(
          state, global_model_weights=model_weights
      ),
      personal_model_weights=lambda state, index: state['global_model_weights'],
  )
