"""The pattern and edge-case backdoors on a task's raw training data, and the attack success rate of a model, in
TensorFlow.

`PixelBackdoor` is what a task with image inputs offers a targeted attack (`Task.backdoor`): `poison(trigger)`, a
transform of an attacker's raw dataset that stamps the trigger on the examples at the trigger's poisoned positions
and relabels them (the runner applies it where the task's own data poisoning goes, before the local pipeline's
shuffle), and `success_evaluator(trigger)`, the attack success rate of model weights on the task's evaluation
examples (the held-out ones, or the validation ones when the task holds a validation share out). Definitions and
NumPy references: `tff_robust.core.attacks.backdoor` (Gu et al. 2017; Bagdasaryan et al. 2020).

The edge-case backdoor (Wang et al., NeurIPS 2020; the digits analogue and its NumPy reference:
`tff_robust.core.attacks.edge_case`) needs the task's training examples too (`train_x`, `train_y`: where its tail
is fixed and its pool E drawn from): `edge_case_poison(edge)` puts E's images in place of a share of an attacker's
examples and labels every image of E the target, and `edge_case_success_evaluator(edge)` is the share of the
evaluation examples in the tail that the model assigns to the target.
"""

import collections
import dataclasses
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.core.attacks import backdoor
from tff_robust.core.attacks import edge_case
from tff_robust.tasks import evaluation

ASR_METRIC = 'attack_success_rate'


def stamp(images: tf.Tensor, trigger: backdoor.PixelTrigger, image_shape) -> tf.Tensor:
  """`images` (flattened row-major `image_shape` pixels in the last axis) with the bottom-right `trigger.size` x
  `trigger.size` pixels set to `trigger.value`."""
  height, width = image_shape
  size = trigger.size
  patch = tf.pad(tf.ones([size, size]), [[height - size, 0], [width - size, 0]])
  on_patch = tf.reshape(patch, [height * width]) > 0
  return tf.where(on_patch, tf.cast(trigger.value, images.dtype), images)


def poison_transform(trigger: backdoor.PixelTrigger, image_shape, *, x_key: str = 'x',
                     y_key: str = 'y') -> Callable[[tf.data.Dataset], tf.data.Dataset]:
  """The transform of a raw dataset (elements {x_key: flattened image, y_key: label}) that stamps and relabels
  example j iff floor((j + 1) share) > floor(j share) (float64), j its position in the dataset."""
  share = float(trigger.share)

  def poison(index, element):
    j = tf.cast(index, tf.float64)
    poisoned = tf.floor((j + 1.0) * share) > tf.floor(j * share)
    x, y = element[x_key], element[y_key]
    return {**element,
            x_key: tf.where(poisoned, stamp(x, trigger, image_shape), x),
            y_key: tf.where(poisoned, tf.cast(trigger.target, y.dtype), y)}

  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.enumerate().map(poison)

  return corrupt


def edge_case_transform(pool: np.ndarray, share: float, target: int, *, x_key: str = 'x',
                        y_key: str = 'y') -> Callable[[tf.data.Dataset], tf.data.Dataset]:
  """The transform of an attacker's raw dataset (elements {x_key: flattened image, y_key: label}) that replaces
  example j's image by pool[k mod |pool|] iff floor((j + 1) share) > floor(j share) (float64; k = floor((j + 1)
  share) - 1, the count of such positions before j), then labels `target` every example whose image equals a row
  of `pool` (`edge_case.poison`)."""
  share = float(share)
  pool = np.asarray(pool)

  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    x_spec, y_spec = dataset.element_spec[x_key], dataset.element_spec[y_key]
    pool_x = tf.constant(pool.reshape(len(pool), -1), x_spec.dtype)

    def poison(index, element):
      j = tf.cast(index, tf.float64)
      poisoned = tf.floor((j + 1.0) * share) > tf.floor(j * share)
      k = tf.cast(tf.floor((j + 1.0) * share), tf.int64) - 1
      x = tf.where(poisoned, tf.gather(pool_x, tf.math.floormod(k, len(pool))), element[x_key])
      in_pool = tf.reduce_any(tf.reduce_all(tf.equal(x[tf.newaxis, :], pool_x), axis=1))
      return {**element, x_key: x, y_key: tf.where(in_pool, tf.cast(target, y_spec.dtype), element[y_key])}

    return dataset.enumerate().map(poison)

  return corrupt


@dataclasses.dataclass(frozen=True, eq=False)
class PixelBackdoor:
  """A task's support for the targeted attacks: its images' shape, its number of classes, its model and its
  evaluation examples (`eval_x` rows of flattened images, `eval_y` labels: what its accuracy is measured on); for
  the edge case also its training examples, all clients' pooled (`train_x`, `train_y`; None: no edge case).
  Compared and hashed by identity (a `Task` is hashed: `corruption.client_example_counts` caches per task)."""

  image_shape: tuple[int, int]
  num_classes: int
  model_fn: Callable[[], tff.learning.models.VariableModel]
  eval_x: np.ndarray
  eval_y: np.ndarray
  x_key: str = 'x'
  y_key: str = 'y'
  train_x: Optional[np.ndarray] = None
  train_y: Optional[np.ndarray] = None

  def _training_examples(self):
    if self.train_x is None:
      raise ValueError('edge_case needs the task\'s training examples (PixelBackdoor.train_x), which it does not '
                       'give')
    return self.train_x, self.train_y

  def _tail(self, edge: edge_case.EdgeCase) -> edge_case.TailModel:
    return edge_case.fit_tail(*self._training_examples(), edge, self.num_classes)

  def edge_case_pool(self, edge: edge_case.EdgeCase) -> np.ndarray:
    """E: the training set's tail examples of the source classes, in `edge_case.attacker_pool`'s order."""
    return edge_case.attacker_pool(*self._training_examples(), edge, self.num_classes)

  def edge_case_poison(self, edge: edge_case.EdgeCase) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """`edge_case_transform` of this task's pool E for an attacker's raw dataset.

    Raises:
      ValueError: for an edge case that does not fit the task (`edge_case.check_edge_case`).
    """
    return edge_case_transform(self.edge_case_pool(edge), edge.share, edge.target, x_key=self.x_key,
                               y_key=self.y_key)

  def edge_case_dataset(self, edge: edge_case.EdgeCase, batch_size: int = 256) -> tf.data.Dataset:
    """The evaluation examples in the tail (`edge_case.held_out_tail`), labelled the target, batched.

    Raises:
      ValueError: for an edge case that does not fit the task, or an evaluation set with no example in the tail.
    """
    inputs = edge_case.held_out_tail(self.eval_x, self.eval_y, self._tail(edge))
    if not len(inputs):
      raise ValueError(f'no evaluation example is in the tail of {edge}: no input to measure the attack success '
                       'rate on (a larger tail has more)')
    return tf.data.Dataset.from_tensor_slices(collections.OrderedDict([
        (self.x_key, inputs), (self.y_key, np.full(len(inputs), edge.target, self.eval_y.dtype))])).batch(batch_size)

  def edge_case_success_evaluator(self, edge: edge_case.EdgeCase) -> Callable[[tff.learning.models.ModelWeights],
                                                                              dict[str, float]]:
    """model weights -> {'attack_success_rate': ASR}: the model's accuracy on `edge_case_dataset` (the share of the
    held-out tail assigned to the target).

    Raises:
      ValueError: as `edge_case_dataset`.
    """
    evaluator = evaluation.CentralizedEvaluator(self.model_fn, self.edge_case_dataset(edge), {})
    return lambda model_weights: {ASR_METRIC: evaluator(model_weights)['accuracy']}

  def poison(self, trigger: backdoor.PixelTrigger) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """`poison_transform` of `trigger` for this task's raw datasets.

    Raises:
      ValueError: for a trigger that does not fit the task (`backdoor.check_trigger`: target, size, share).
    """
    backdoor.check_trigger(trigger, self.image_shape, self.num_classes)
    return poison_transform(trigger, self.image_shape, x_key=self.x_key, y_key=self.y_key)

  def triggered_dataset(self, trigger: backdoor.PixelTrigger, batch_size: int = 256) -> tf.data.Dataset:
    """The evaluation examples whose label is not the target, stamped and labelled the target, batched."""
    keep = self.eval_y != trigger.target
    inputs = tf.data.Dataset.from_tensor_slices(collections.OrderedDict([
        (self.x_key, self.eval_x[keep]), (self.y_key, np.full(int(keep.sum()), trigger.target, self.eval_y.dtype))]))
    triggered = inputs.map(lambda e: {**e, self.x_key: stamp(e[self.x_key], trigger, self.image_shape)})
    return triggered.batch(batch_size)

  def success_evaluator(self, trigger: backdoor.PixelTrigger) -> Callable[[tff.learning.models.ModelWeights],
                                                                          dict[str, float]]:
    """model weights -> {'attack_success_rate': ASR} on the task's evaluation examples: the model's accuracy on
    `triggered_dataset` (the share assigned to the target).

    Raises:
      ValueError: for a trigger that does not fit the task, or evaluation examples that all have the target label.
    """
    backdoor.check_trigger(trigger, self.image_shape, self.num_classes)
    if not np.any(self.eval_y != trigger.target):
      raise ValueError(f'every evaluation example has the target label {trigger.target}: no input to measure the '
                       'attack success rate on')
    evaluator = evaluation.CentralizedEvaluator(self.model_fn, self.triggered_dataset(trigger), {})
    return lambda model_weights: {ASR_METRIC: evaluator(model_weights)['accuracy']}
