"""Static data poisoning of the RFA paper (Sec. 5.1, App. D.2.1), applied to a corrupted client's raw data.

Images x in [0, 1] become their negative 1 - x (labels kept); text is reversed (the 20-character window and
its next character are rebuilt from the reversed string); tasks without a natural data corruption flip the
label (classification: y -> num_classes - 1 - y; regression: y -> -y). Evaluation always uses clean data.
"""

import tensorflow as tf


def negate_images(key: str):
  """x -> 1 - x on the element field `key` (pixels in [0, 1])."""
  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(lambda element: {**element, key: 1.0 - element[key]})
  return corrupt


def reverse_text(key: str):
  """Reverses each string of the element field `key` character by character."""
  def reverse(text):
    return tf.strings.reduce_join(tf.reverse(tf.strings.unicode_split(text, 'UTF-8'), [0]))

  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(lambda element: {**element, key: reverse(element[key])})
  return corrupt


def negate_targets(key: str):
  """y -> -y on the element field `key` (regression)."""
  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(lambda element: {**element, key: -element[key]})
  return corrupt


def flip_labels(key: str, num_classes: int):
  """y -> num_classes - 1 - y on the element field `key` (classification; Sent140's y -> 1 - y)."""
  if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
    raise ValueError(f'num_classes must be an integer >= 2, got {num_classes!r}')

  def corrupt(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(
        lambda element: {**element, key: tf.cast(num_classes - 1, element[key].dtype) - element[key]}
    )
  return corrupt
