"""Processes in which every device takes part in every round and the server knows which device is which.

MtFEEL (and its signSGD baseline) keeps one model per device on the server (Algorithm 2, full
participation), so device m must know its index m: the server's loss matrix has one column per device and
the weights device m applies are column m of alpha. TFF clients are anonymous, so each client's value is
`(dataset, index)`; `IndexedClientsProcess.next` takes the N datasets in device order and attaches the
indices itself.
"""

from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def client_value_type(data_type) -> tff.StructType:
  """The type of one client's value: its dataset and its device index."""
  return tff.StructType([('dataset', data_type), ('index', tff.TensorType(np.int32))])


def with_indices(datasets, num_clients: int) -> list:
  """[(dataset_m, m)] for the N devices' datasets given in device order."""
  if len(datasets) != num_clients:
    raise ValueError(
        f'datasets must have one entry per device (every device takes part in every round): expected '
        f'{num_clients}, got {len(datasets)}'
    )
  return [(dataset, np.int32(index)) for index, dataset in enumerate(datasets)]


def channel_seed(seed: int, round_num, index, num_clients: int) -> tf.Tensor:
  """The stateless seed of device `index`'s uplink in round `round_num`: (seed, round_num N + index), distinct
  for every (round, device)."""
  return tf.stack([
      tf.constant(seed, tf.int64), tf.cast(round_num, tf.int64) * num_clients + tf.cast(index, tf.int64),
  ])


def gradient_signs(gradients) -> list:
  """The bit a device sends for each coordinate: +1 where the gradient is >= 0, -1 elsewhere (sign(0) := +1)."""
  return [tf.where(g >= 0, 1.0, -1.0) for g in gradients]


class IndexedClientsProcess(tff.templates.IterativeProcess):
  """`IterativeProcess` with `next(state, datasets of all N devices in order) -> LearningProcessOutput`.

  Besides `initialize` and `next`:
    - `num_clients`: N;
    - `prepare(state, datasets)`: a set-up phase before training (MtFEEL's discrepancy estimation);
    - `get_model_weights(state)`: the global model, or None for a process without one;
    - `set_model_weights(state, model_weights)`: the state with every model replaced (e.g. drawn per seed);
    - `personal_model_weights(state, index)`: the model device `index` predicts with;
    - `artifacts(state)`: named arrays worth saving at the end of a run (MtFEEL's alpha and discrepancies).
  """

  def __init__(self, initialize_fn, next_fn, *, num_clients: int, get_model_weights: Callable,
               set_model_weights: Callable, personal_model_weights: Callable,
               prepare: Optional[Callable] = None, artifacts: Optional[Callable] = None):
    super().__init__(initialize_fn, next_fn)
    self._num_clients = num_clients
    self._get_model_weights = get_model_weights
    self._set_model_weights = set_model_weights
    self._personal_model_weights = personal_model_weights
    self._prepare = prepare
    self._artifacts = artifacts

  @property
  def num_clients(self) -> int:
    return self._num_clients

  def next(self, state, datasets) -> tff.learning.templates.LearningProcessOutput:
    """One round on the datasets of all N devices, in device order: `LearningProcessOutput(state, metrics)`."""
    state, metrics = super().next(state, with_indices(datasets, self._num_clients))
    return tff.learning.templates.LearningProcessOutput(state, metrics)

  def prepare(self, state, datasets):
    """The state after the set-up phase on every device's dataset (MtFEEL's discrepancy estimation); `state` unchanged
    for a process without one."""
    return state if self._prepare is None else self._prepare(state, datasets)

  def get_model_weights(self, state) -> Optional[tff.learning.models.ModelWeights]:
    """The global model of `state`, or None for a process without one."""
    return self._get_model_weights(state)

  def set_model_weights(self, state, model_weights: tff.learning.models.ModelWeights):
    """`state` with every model replaced by `model_weights`."""
    return self._set_model_weights(state, model_weights)

  def personal_model_weights(self, state, index: int) -> tff.learning.models.ModelWeights:
    """The model device `index` predicts with."""
    return self._personal_model_weights(state, index)

  def artifacts(self, state) -> dict[str, np.ndarray]:
    """Named arrays worth saving at the end of a run (MtFEEL: alpha and the discrepancies); {} if the process has
    none."""
    return {} if self._artifacts is None else self._artifacts(state)
