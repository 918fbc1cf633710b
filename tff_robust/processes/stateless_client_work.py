"""The result and process shape that FedProx's and constrain-and-scale's client works share.

Both train locally from the broadcast global model G (`local_training.train_locally`) and send TFF's model delta
G - w with weight n_k (examples trained on, `NUM_EXAMPLES`) or 1 (`UNIFORM`). As in TFF's model-delta client
work, a client whose update or weight has a NaN or Inf entry is left out (zero update, weight 0, metrics reset)
and counted in `num_nonfinite_updates`; `num_empty_datasets` counts clients without data; `train` is the
metrics aggregator over the cohort's model metrics. The client works keep no state. The two counts leave each
client as one int32 [2] of 0/1, summed by `count_factory` (`counting_client_work.counts_summer`: plain by
default, secret with `tff.aggregators.SecureSumFactory(1, 0)`).
"""

import collections
from typing import Callable, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import nonfinite
from tff_robust.aggregators import structure_math
from tff_robust.processes import counting_client_work


def client_result(
    trained: list,
    global_trainable: list,
    num_examples: tf.Tensor,
    metrics,
    dataset: tf.data.Dataset,
    client_weighting: tff.learning.ClientWeighting,
    flag: Optional[tf.Tensor] = None,
):
  """(ClientResult, metrics, [left out, empty dataset] as int32 0/1) of a client that trained `global_trainable`
  into `trained`.

  The update is G - w (TFF's sign: applied as a gradient), leaving as `<update, flag>` when `flag` is given (the
  shape `counting_client_work` gives with `client_flags=True`).
  """
  update = [g - w for w, g in zip(trained, global_trainable)]
  if client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
    weight = tf.cast(num_examples, tf.float32)
  else:
    weight = tf.constant(1.0)
  update, weight, left_out = nonfinite.leave_out_if_nonfinite(update, weight)
  result = tff.learning.templates.ClientResult(update=update if flag is None else (update, flag),
                                               update_weight=weight)
  empty = federated_counting.is_empty_after(dataset, result)
  return result, structure_math.zeros_where(left_out, metrics), tf.stack([tf.cast(left_out, tf.int32), empty])


def build(
    client_update: tff.Computation,
    weights_type: tff.Type,
    client_data_type: tff.Type,
    metrics_aggregation_fn: Callable,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """The stateless `ClientWorkProcess` mapping `client_update` (global weights, client data -> `client_result`'s
  three values) over the cohort, with the `train`, `num_nonfinite_updates` and `num_empty_datasets` measurements
  (the last two summed by `count_factory`, module docstring)."""
  sum_counts = counting_client_work.counts_summer(count_factory)

  @tff.federated_computation()
  def init_fn():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(client_data_type, tff.CLIENTS),
  )
  def next_fn(state, model_weights, client_data):
    result, model_metrics, counts = tff.federated_map(client_update, (model_weights, client_data))
    num_nonfinite_updates, num_empty_datasets = sum_counts(counts)
    measurements = collections.OrderedDict(
        train=metrics_aggregation_fn(model_metrics),
        num_nonfinite_updates=num_nonfinite_updates,
        num_empty_datasets=num_empty_datasets,
    )
    return tff.templates.MeasuredProcessOutput(state, result, tff.federated_zip(measurements))

  return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)
