"""The pattern backdoor's TensorFlow data path and attack success rate (`tasks.backdoor`, through the runner's
`simulation.corruption`) against the NumPy references (`core.attacks.backdoor`)."""

import numpy as np
import pytest

from tff_robust import tasks
from tff_robust.core.attacks import backdoor as reference
from tff_robust.simulation import corruption
from tff_robust.tasks import base
from tff_robust.tasks import digits
from tests.simulation import numpy_classifiers
from tests.tasks import digits_weights
from tests.tasks import served_batches

_SPEC = 'backdoor(target=4,share=0.3,size=3,value=0.75)'
_TRIGGER = reference.PixelTrigger(target=4, share=0.3, size=3, value=0.75)


@pytest.fixture(scope='module')
def task():
  return tasks.create_task('digits', client_epochs=2, client_batch_size=8, seed=5)


def test_an_attackers_training_batches_are_the_numpy_poisoning_of_its_raw_examples(task):
  """The runner's data path (poisoned raw data, then the task's shuffle, epochs and batches) equals the same
  pipeline over the NumPy reference's poisoned arrays; the honest clients' data is untouched."""
  clients, _ = digits.load_client_arrays()
  chosen = frozenset(sorted(clients)[:2])
  data_fn = corruption.make_client_data_fn(task, _SPEC, chosen, in_memory=True)
  assert corruption.update_attack(_SPEC) is None  # a data corruption: no flag
  expected_task = base.client_data_from_arrays(
      {cid: reference.poison(x, y, _TRIGGER, digits.IMAGE_SHAPE) if cid in chosen else (x, y)
       for cid, (x, y) in clients.items()})
  for cid in sorted(clients)[:4]:
    labels = served_batches.assert_served_as_expected(task, data_fn, expected_task, cid)
    raw_labels = clients[cid][1]
    poisoned = reference.poisoned_positions(len(raw_labels), 0.3)
    if cid in chosen:  # both epochs: the poisoned examples relabelled 4, the others' labels kept
      assert np.sum(labels == 4) == 2 * (np.sum(raw_labels[~poisoned] == 4) + poisoned.sum()) and poisoned.sum() > 0
    else:
      assert np.sum(labels == 4) == 2 * np.sum(raw_labels == 4)


def test_the_attack_success_rate_is_1_for_a_model_that_always_says_the_target_and_0_for_one_that_never_does(task):
  asr = corruption.attack_success_evaluator(task, _SPEC)
  assert asr(digits_weights.constant_model(4, 10.0)) == {'attack_success_rate': 1.0}
  assert asr(digits_weights.constant_model(4, -10.0)) == {'attack_success_rate': 0.0}
  assert corruption.attack_success_evaluator(task, 'data') is None
  assert corruption.attack_success_evaluator(task, 'alie') is None


@pytest.mark.parametrize('validation_fraction', [None, 0.2])
def test_the_attack_success_rate_of_a_random_model_is_the_numpy_one_on_the_accuracy_examples(validation_fraction):
  """On the held-out examples, or the validation ones when a validation share is held out (where accuracy is)."""
  task = tasks.create_task('digits', client_epochs=1, client_batch_size=8, seed=0,
                           validation_fraction=validation_fraction)
  if validation_fraction is None:
    _, (x, y) = digits.load_client_arrays()
  else:
    parts = [next(iter(task.personal_test_data.create_tf_dataset_for_client(cid).batch(10_000)))
             for cid in task.train_data.client_ids]
    x, y = (np.concatenate([p[key].numpy() for p in parts]) for key in ('x', 'y'))
  rng = np.random.default_rng(3)
  trainable = [rng.normal(scale=0.5, size=v.shape) for v in digits.model_fn().trainable_variables]
  stamped = reference.stamp(x, _TRIGGER, (8, 8))
  logits = numpy_classifiers.mlp_logits(trainable, stamped)
  trainable[3][4] += np.median(np.delete(logits, 4, axis=1).max(axis=1) - logits[:, 4])  # says the target half the time
  predictions = numpy_classifiers.mlp_logits(trainable, stamped).argmax(axis=1)
  expected = reference.attack_success_rate(predictions, y, target=4)
  assert 0.2 < expected < 0.8
  got = corruption.attack_success_evaluator(task, _SPEC)(digits_weights.model_weights(trainable))['attack_success_rate']
  assert got == pytest.approx(expected, abs=1e-6)  # Keras accuracy in float32; one input is ~3e-3
  assert task.evaluate(digits_weights.model_weights(trainable))['accuracy'] == pytest.approx(
      1 - numpy_classifiers.error_rate(numpy_classifiers.mlp_logits(trainable, x), y), abs=1e-6)


@pytest.mark.parametrize('spec, message', [
    ('backdoor(target=10)', r'target must be a class in \[0, 9\], got 10'),
    ('model_replacement(size=9)', r'size must be an integer in \[1, 8\] \(the trigger must fit the 8 x 8 input\)'),
])
def test_a_trigger_that_does_not_fit_digits_is_refused_by_name(task, spec, message):
  with pytest.raises(ValueError, match=message):
    corruption.make_client_data_fn(task, spec, frozenset())
  with pytest.raises(ValueError, match=message):
    corruption.attack_success_evaluator(task, spec)


def test_a_task_without_a_pixel_trigger_is_refused_by_name():
  task = tasks.create_task('synthetic_regression', client_epochs=1, client_batch_size=8, seed=0)
  with pytest.raises(ValueError, match="backdoor needs a task with a pixel trigger \\(digits\\), not "
                                       "'synthetic_regression'"):
    corruption.make_client_data_fn(task, 'backdoor', frozenset())
  with pytest.raises(ValueError, match="model_replacement needs a task with a pixel trigger"):
    corruption.attack_success_evaluator(task, 'model_replacement(target=1)')
