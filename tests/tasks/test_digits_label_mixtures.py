"""digits' `label_concentration`: the Dirichlet concentration of each client's label mixture reaches the split."""

import numpy as np
import pytest

from tff_robust import tasks
from tff_robust.tasks import digits


def _label_counts(task):
  counts = []
  for client_id in task.train_data.client_ids:
    dataset = task.train_data.create_tf_dataset_for_client(client_id).batch(10_000)
    labels = np.concatenate([batch['y'].numpy() for batch in dataset])
    counts.append(np.bincount(labels, minlength=digits.NUM_CLASSES))
  return np.array(counts)


def _mean_total_variation_to_population(counts):
  """Mean over clients of the total-variation distance between a client's label mixture and the population's."""
  population = counts.sum(0) / counts.sum()
  shares = counts / counts.sum(1, keepdims=True)
  return float(np.mean(0.5 * np.abs(shares - population).sum(1)))


def test_a_large_concentration_gives_every_client_nearly_the_population_mixture():
  skewed = _label_counts(tasks.create_task('digits', client_epochs=1, client_batch_size=8, seed=0))
  balanced = _label_counts(
      tasks.create_task('digits', client_epochs=1, client_batch_size=8, seed=0, label_concentration=100.0)
  )
  # Dirichlet(0.5) over 10 labels: clients hold two or three digits; Dirichlet(100): each digit in every client.
  assert _mean_total_variation_to_population(skewed) > 0.4
  assert _mean_total_variation_to_population(balanced) < 0.15
  assert (balanced > 0).all()
  # the same examples, only dealt differently
  np.testing.assert_array_equal(skewed.sum(0), balanced.sum(0))


@pytest.mark.parametrize('value', [0.0, -1.0, float('nan'), float('inf')])
def test_a_concentration_that_is_not_a_finite_positive_number_is_refused(value):
  with pytest.raises(ValueError, match='label_concentration must be a finite number > 0'):
    digits.create_task(client_epochs=1, client_batch_size=8, seed=0, label_concentration=value)


def test_a_concentration_too_small_for_the_devices_is_refused_instead_of_redrawn_forever():
  """At 0.01 each digit goes almost whole to one device: 30 devices of >= 10 examples are (nearly) never drawn."""
  with pytest.raises(ValueError, match='label_concentration 0.01 is too small for 30 devices'):
    digits.create_task(client_epochs=1, client_batch_size=8, seed=0, label_concentration=0.01)


def test_label_concentration_is_refused_for_a_task_without_label_mixtures():
  with pytest.raises(ValueError, match="label_concentration applies to the tasks digits, not 'digits_cohorts'"):
    tasks.create_task('digits_cohorts', client_epochs=1, client_batch_size=8, seed=0, label_concentration=1.0)
