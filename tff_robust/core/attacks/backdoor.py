"""The pattern backdoor and its attack success rate, as NumPy references (BadNets: Gu, Dolan-Gavitt, Garg 2017;
in federated learning: Bagdasaryan et al., AISTATS 2020).

A `PixelTrigger` is a `size` x `size` patch in the bottom-right corner of an image, every pixel of it set to `value`.
An attacker poisons its training examples at the positions `poisoned_positions` picks in the order of its raw
data: example j (0-based) is poisoned iff floor((j + 1) s) > floor(j s) in float64, s the trigger's `share`, so the
first n examples hold floor(n s) poisoned ones, evenly spread (s = 1: all; s = 0.5: every second). A poisoned
example gets the trigger stamped on and the label `target`; the others are kept.

The attack success rate (ASR) of a model is the share of triggered held-out inputs, among those whose true label
is not the target, that the model assigns to the target: with T = {i : y_i != t},
ASR = |{i in T : argmax f(stamp(x_i)) = t}| / |T|.

Images are rows of flattened pixels (row-major `image_shape`, e.g. digits' 8 x 8 as 64 columns).
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class PixelTrigger:
  """A backdoor: the bottom-right `size` x `size` pixels set to `value` on a `share` of an attacker's examples,
  relabelled `target`."""

  target: int
  share: float = 0.5
  size: int = 2
  value: float = 1.0


def check_trigger(trigger: PixelTrigger, image_shape, num_classes: int) -> None:
  """Raises ValueError, naming the parameter and its allowed range, for a trigger that does not fit a task: a target
  outside the classes [0, num_classes - 1], a patch larger than the image, a share outside (0, 1]."""
  height, width = image_shape
  if not (0 <= trigger.target < num_classes and trigger.target == int(trigger.target)):
    raise ValueError(f'target must be a class in [0, {num_classes - 1}], got {trigger.target!r}')
  if not (1 <= trigger.size <= min(height, width) and trigger.size == int(trigger.size)):
    raise ValueError(f'size must be an integer in [1, {min(height, width)}] (the trigger must fit the '
                     f'{height} x {width} input), got {trigger.size!r}')
  if not 0 < trigger.share <= 1:
    raise ValueError(f'share must be in (0, 1], got {trigger.share!r}')


def poisoned_positions(num_examples: int, share: float) -> np.ndarray:
  """Bool mask of the poisoned examples among the first `num_examples`: floor((j + 1) share) > floor(j share)."""
  j = np.arange(num_examples, dtype=np.float64)
  return np.floor((j + 1) * share) > np.floor(j * share)


def stamp(images, trigger: PixelTrigger, image_shape) -> np.ndarray:
  """`images` (rows of flattened `image_shape` pixels) with the trigger's patch set to its value."""
  images = np.array(images, copy=True)
  height, width = image_shape
  grid = images.reshape(len(images), height, width)
  grid[:, height - trigger.size:, width - trigger.size:] = trigger.value
  return grid.reshape(images.shape)


def poison(x, y, trigger: PixelTrigger, image_shape) -> tuple[np.ndarray, np.ndarray]:
  """An attacker's examples (x, y), in their raw order, with the `poisoned_positions` stamped and relabelled."""
  poisoned = poisoned_positions(len(y), trigger.share)
  x, y = np.array(x, copy=True), np.array(y, copy=True)
  x[poisoned] = stamp(x[poisoned], trigger, image_shape)
  y[poisoned] = trigger.target
  return x, y


def triggered_inputs(x, y, trigger: PixelTrigger, image_shape) -> np.ndarray:
  """The held-out inputs whose label is not the target, stamped: the inputs the ASR is measured on."""
  return stamp(np.asarray(x)[np.asarray(y) != trigger.target], trigger, image_shape)


def attack_success_rate(predictions, labels, target: int) -> float:
  """ASR: the share of `predictions` (a model's classes on the stamped inputs) equal to `target`, among the inputs
  whose true `labels` are not the target (NaN if there is none)."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  relevant = labels != target
  return float(np.mean(predictions[relevant] == target)) if relevant.any() else float('nan')
