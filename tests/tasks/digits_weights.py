"""Digits MLP weights for the tests of targeted attacks' evaluators."""

import numpy as np
import tensorflow_federated as tff

from tff_robust.tasks import digits


def model_weights(trainable) -> tff.learning.models.ModelWeights:
  """`ModelWeights` of the digits MLP from its trainable arrays (it has no non-trainable ones)."""
  return tff.learning.models.ModelWeights(trainable=[np.asarray(w, np.float32) for w in trainable], non_trainable=[])


def constant_model(target: int, logit_of_target: float) -> tff.learning.models.ModelWeights:
  """A digits MLP whose logits are its output bias whatever the input: `target`'s logit `logit_of_target`, the
  others' 0."""
  trainable = [np.zeros(v.shape, np.float32) for v in digits.model_fn().trainable_variables]
  trainable[3][target] = logit_of_target
  return model_weights(trainable)
