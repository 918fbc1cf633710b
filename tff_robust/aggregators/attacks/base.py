"""The interface of a simulated update attack and the step every targeted attack ends with.

An `UpdateAttack` builds, for the update and weight types of a process, a function called while tracing the
wrapper's federated computation (`update_corruption.UpdateCorruptionFactory`):
    corrupt(update@CLIENTS, corrupted@CLIENTS, weight@CLIENTS, round_num@SERVER, previous@SERVER) -> update@CLIENTS
returning every client's update with the corrupted clients' replaced; `previous` is the previous round's
aggregate (zeros in the first round) when the attack sets `uses_previous_aggregate`, else None.
"""

import abc
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# The defence's rule over the round's gathered updates, as the defences package defines it:
# (points [m, d] float32, weights [m] float32, center [d] float32) -> [d].
StackedRule = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]


class UpdateAttack(abc.ABC):
  """One attack; `uses_previous_aggregate`: its corrupt function takes the previous round's aggregate."""

  uses_previous_aggregate = False

  @abc.abstractmethod
  def build(self, update_type, weight_type, seed: int) -> Callable:
    """The corrupt function of the module docstring for these types (`seed`: the run's, for random attacks)."""


def replace_with_target(update_type, update, corrupted, target: Optional[object]):
  """Every corrupted client's update becomes `target` (a server value of `update_type`), broadcast to them."""

  @tff.tensorflow.computation(update_type, np.bool_, update_type)
  def replace_if_corrupted(own, is_corrupted, replacement):
    return tf.cond(is_corrupted, lambda: replacement, lambda: own)

  return tff.federated_map(replace_if_corrupted, (update, corrupted, tff.federated_broadcast(target)))
