"""Delta-FL's client work: loss of the broadcast model, quantile threshold, self-filtering local training.

Superquantile FL (Laguel et al.), Algorithm 2 lines 3-8 and Algorithm 3 lines 3-14, as one
`tff.learning.templates.ClientWorkProcess`:
  1. each client computes F_k(w_t), the mean loss of the broadcast model over its dataset, and its weight
     alpha_k (examples, or 1 for uniform weighting);
  2. a quantile process (exact or secure, `tff_robust.aggregators.quantile`) turns the cohort's losses into
     eta_t, the weighted (1 - theta)-quantile; every `threshold_period` rounds (App. C.3), otherwise the
     previous eta is reused;
  3. eta_t is broadcast and each client trains only if F_k(w_t) >= eta_t - tolerance (the secure
     quantile's smoothing radius; 0 for the exact one); a failing client returns a zero update with
     weight 0, so the weighted mean that follows averages the kept clients only.
A client whose loss is not finite is not kept and is counted (`filter/num_nonfinite_losses`); a kept client
whose training ends in a non-finite model is left out by TFF's client update (zero update, weight 0) and
counted in `num_nonfinite_updates`. Losses are means over the dataset as given:
with several local epochs each example counts equally often, so the mean is the same as over one epoch.
"""

import collections
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.learning.templates import model_delta_client_work

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import type_checks
from tff_robust.processes import client_loop
from tff_robust.processes import model_types


# The clients' 0/1 flags, summed in one int32 vector: its entries' names in the measurements.
_FLAGS = ('num_clients', 'num_kept', 'num_nonfinite_losses', 'num_nonfinite_updates', 'num_empty_datasets')


def build_filtering_client_work(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    client_optimizer: tff.learning.optimizers.Optimizer,
    *,
    quantile_factory: Optional[tff.aggregators.WeightedAggregationFactory],
    uses_tolerance: bool,
    threshold_period: int,
    client_weighting: tff.learning.ClientWeighting,
    metrics_aggregator,
    loop_implementation: tff.learning.LoopImplementation,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
    share_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds the client work; `quantile_factory=None` keeps every client (theta = 1, FedAvg).

  `uses_tolerance`: the quantile process reports `tolerance` (the secure MM's smoothing radius), which the
  filter subtracts from the threshold. `count_factory` sums the clients' int32 0/1 flags (one sum of five:
  client, trained, non-finite loss, non-finite update, empty dataset; default `tff.aggregators.SumFactory()`,
  `tff.aggregators.SecureSumFactory(1, 0)` for a secure one); `share_factory` takes the weighted mean of the
  trained flag with weight alpha_k, the kept weight share (default: an exact mean that gives 0 when no weight
  is positive).

  State: optimizer hparams, the quantile process's state, the current threshold eta, the round number and
  the number of rounds so far that kept nobody. Measurements under `train` (TFF's training metrics of the
  clients that trained) and `filter`: `threshold`, `num_clients`, `num_kept`, `kept_weight_share`,
  `empty_round`, `empty_rounds` (cumulative), `num_nonfinite_losses`, `secure_average_calls` (quantile
  passes this round) and `quantile` (the quantile process's own measurements); and `num_nonfinite_updates`:
  kept clients with at least one example whose update TFF's client update returned with weight 0, which it
  does exactly when the model delta is not finite (it then zeroes the delta and resets the metrics); and
  `num_empty_datasets`.
  """
  data_type, weights_type, metrics_aggregation_fn = model_types.model_types(model_fn, metrics_aggregator)
  loss_type = tff.TensorType(np.float32)
  quantile_process = None if quantile_factory is None else quantile_factory.create(loss_type, loss_type)
  flags_process = type_checks.sum_factory_or_default(count_factory, 'count_factory').create(
      tff.TensorType(np.int32, [len(_FLAGS)]))
  share_process = type_checks.mean_factory_or_default(share_factory).create(loss_type, loss_type)
  initial_hparams = client_optimizer.get_hparams(  # as TFF's model-delta client work does
      client_optimizer.initialize(tf.TensorSpec(shape=(), dtype=tf.float32))
  )

  @tff.tensorflow.computation(weights_type, data_type)
  def evaluate_loss(model_weights, dataset):
    """(F_k(w_t), alpha_k, nonfinite, empty): example-weighted mean loss of the broadcast model; whether the
    dataset is empty (`federated_counting.is_empty_after`: read in this call, after the loss pass)."""
    model = model_fn()

    @tf.function  # automatic control dependencies: the weights are assigned before the forward passes
    def mean_loss(model_weights, dataset):
      tf.nest.map_structure(
          lambda variable, value: variable.assign(value),
          tff.learning.models.ModelWeights.from_model(model), model_weights,
      )

      def add_batch(totals, batch):
        output = model.forward_pass(batch, training=False)
        count = tf.cast(output.num_examples, tf.float64)
        return totals[0] + tf.cast(output.loss, tf.float64) * count, totals[1] + count

      zero = tf.constant(0.0, tf.float64)
      return client_loop.fold_batches(add_batch, dataset, (zero, zero))

    loss_sum, count = mean_loss(model_weights, dataset)
    loss = tf.cast(tf.math.divide_no_nan(loss_sum, count), tf.float32)
    finite = tf.math.is_finite(loss)
    if client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
      weight = tf.cast(count, tf.float32)
    else:
      weight = tf.cast(count > 0, tf.float32)
    return (
        tf.where(finite, loss, tf.zeros_like(loss)),
        tf.where(finite, weight, tf.zeros_like(weight)),
        tf.logical_not(finite),
        federated_counting.is_empty_after(dataset, (loss_sum, count)),
    )

  @tff.federated_computation()
  def init_fn():
    return tff.federated_zip(collections.OrderedDict(
        hparams=tff.federated_value(initial_hparams, tff.SERVER),
        quantile=(tff.federated_value((), tff.SERVER) if quantile_process is None
                  else quantile_process.initialize()),
        threshold=tff.federated_value(np.float32(-np.inf), tff.SERVER),
        round_num=tff.federated_value(np.int32(0), tff.SERVER),
        empty_rounds=tff.federated_value(np.int32(0), tff.SERVER),
    ))

  state_type = init_fn.type_signature.result
  hparams_type = state_type.member.hparams

  @tff.tensorflow.computation(hparams_type, weights_type, data_type, loss_type, loss_type,
                              tff.TensorType(np.bool_), loss_type)
  def train_if_kept(hparams, model_weights, dataset, loss, weight, nonfinite, threshold):
    """Algorithm 3, LocalUpdate: local training if F_k(w) >= eta, else (zero update, weight 0).

    Also returns whether the client trained (update weight > 0) and whether it was kept, had examples
    (alpha_k > 0) and still got weight 0: a non-finite update.
    """
    client_update = model_delta_client_work.build_model_delta_update_with_tff_optimizer(
        model_fn, weighting=client_weighting, loop_implementation=loop_implementation
    )
    untrained_model = model_fn()  # its metrics are all zero: what a client that skips training reports
    kept = tf.logical_and(tf.logical_not(nonfinite), loss >= threshold)

    def skip():
      zeros = tf.nest.map_structure(tf.zeros_like, model_weights.trainable)
      return (
          tff.learning.templates.ClientResult(update=zeros, update_weight=tf.constant(0.0)),
          untrained_model.report_local_unfinalized_metrics(),
      )

    result, model_output = tf.cond(
        kept, lambda: client_update(client_optimizer, model_weights, dataset, hparams), skip
    )
    trained = tf.where(result.update_weight > 0, 1.0, 0.0)
    nonfinite_update = tf.logical_and(
        tf.logical_and(kept, weight > 0), tf.logical_not(result.update_weight > 0)
    )
    return result, model_output, trained, nonfinite_update

  @tff.tensorflow.computation(loss_type, tff.TensorType(np.bool_), tff.TensorType(np.bool_), np.int32)
  def client_flags(trained, nonfinite_loss, nonfinite_update, empty):
    """int32 [5] in the order of `_FLAGS`."""
    return tf.stack([1, tf.cast(trained > 0, tf.int32), tf.cast(nonfinite_loss, tf.int32),
                     tf.cast(nonfinite_update, tf.int32), empty])

  @tff.tensorflow.computation(np.int32, loss_type, loss_type)
  def choose_threshold(round_num, fresh, previous):
    return tf.where(tf.equal(round_num % threshold_period, 0), fresh, previous)

  @tff.tensorflow.computation(tff.TensorType(np.int32, [len(_FLAGS)]), np.int32)
  def summarize(sums, empty_rounds):
    counts = collections.OrderedDict(zip(_FLAGS, tf.unstack(sums)))
    empty = tf.cast(tf.equal(counts['num_kept'], 0), tf.int32)
    return collections.OrderedDict(counts, empty_round=empty, empty_rounds=empty_rounds + empty)

  @tff.tensorflow.computation(loss_type, loss_type)
  def lower_by(value, tolerance):
    return value - tolerance

  @tff.tensorflow.computation(state_type.member)
  def get_hparams_fn(state):
    return state['hparams']

  @tff.tensorflow.computation(state_type.member, hparams_type)
  def set_hparams_fn(state, hparams):
    return collections.OrderedDict(state, hparams=hparams)

  @tff.federated_computation(
      state_type,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, model_weights, client_data):
    losses = tff.federated_map(evaluate_loss, (model_weights, client_data))
    loss, weight, nonfinite = losses[0], losses[1], losses[2]
    if quantile_process is None:
      quantile_state, threshold = state.quantile, state.threshold
      quantile_measurements = tff.federated_value((), tff.SERVER)
      quantile_calls = tff.federated_value(0, tff.SERVER)
    else:
      quantile = quantile_process.next(state.quantile, loss, weight)
      quantile_state, quantile_measurements = quantile.state, quantile.measurements
      fresh = quantile.result
      if uses_tolerance:
        fresh = tff.federated_map(lower_by, (fresh, quantile.measurements.tolerance))
      threshold = tff.federated_map(choose_threshold, (state.round_num, fresh, state.threshold))
      quantile_calls = (
          quantile.measurements.secure_average_calls if uses_tolerance else tff.federated_value(0, tff.SERVER)
      )
    result, model_outputs, kept, nonfinite_update = tff.federated_map(
        train_if_kept,
        (tff.federated_broadcast(state.hparams), model_weights, client_data, loss, weight, nonfinite,
         tff.federated_broadcast(threshold)),
    )
    flags = tff.federated_map(client_flags, (kept, nonfinite, nonfinite_update, losses[3]))
    counts = tff.federated_map(summarize, (
        flags_process.next(flags_process.initialize(), flags).result, state.empty_rounds,
    ))
    filter_measurements = collections.OrderedDict(
        threshold=threshold,
        num_clients=counts.num_clients,
        num_kept=counts.num_kept,
        kept_weight_share=share_process.next(share_process.initialize(), kept, weight).result,
        empty_round=counts.empty_round,
        empty_rounds=counts.empty_rounds,
        num_nonfinite_losses=counts.num_nonfinite_losses,
        secure_average_calls=quantile_calls,
        quantile=quantile_measurements,
    )
    new_state = collections.OrderedDict(
        hparams=state.hparams,
        quantile=quantile_state,
        threshold=threshold,
        round_num=federated_counting.increment(state.round_num),
        empty_rounds=counts.empty_rounds,
    )
    measurements = collections.OrderedDict(
        train=metrics_aggregation_fn(model_outputs), filter=tff.federated_zip(filter_measurements),
        num_nonfinite_updates=counts.num_nonfinite_updates,
        num_empty_datasets=counts.num_empty_datasets,
    )
    return tff.templates.MeasuredProcessOutput(
        tff.federated_zip(new_state), result, tff.federated_zip(measurements)
    )

  return tff.learning.templates.ClientWorkProcess(
      init_fn, next_fn, get_hparams_fn=get_hparams_fn, set_hparams_fn=set_hparams_fn
  )

