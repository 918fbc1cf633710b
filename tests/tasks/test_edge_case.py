"""The edge-case backdoor's TensorFlow data path and attack success rate (`tasks.backdoor`, through the runner's
`simulation.corruption`) against the NumPy reference (`core.attacks.edge_case`) on digits' own split."""

import numpy as np
import pytest

from tff_robust import tasks
from tff_robust.core.attacks import backdoor
from tff_robust.core.attacks import edge_case as reference
from tff_robust.simulation import corruption
from tff_robust.tasks import base
from tff_robust.tasks import digits
from tests.simulation import numpy_classifiers
from tests.tasks import digits_weights
from tests.tasks import served_batches

_SPEC = 'edge_case(target=1,tail=0.2,share=0.3)'
_EDGE = reference.EdgeCase(target=1, source=None, tail=0.2, share=0.3)


@pytest.fixture(scope='module')
def task():
  return tasks.create_task('digits', client_epochs=2, client_batch_size=8, seed=5)


def _pooled(clients):
  return (np.concatenate([clients[cid][0] for cid in sorted(clients)]),
          np.concatenate([clients[cid][1] for cid in sorted(clients)]))


def test_an_attackers_training_batches_are_the_numpy_poisoning_with_the_training_sets_tail_pool(task):
  """The runner's data path (pool images at the backdoor's positions, every pool image labelled 1, then the task's
  shuffle, epochs and batches) equals the same pipeline over the NumPy reference's arrays, the pool drawn from all
  clients' training examples; the honest clients' data is untouched."""
  clients, _ = digits.load_client_arrays()
  train_x, train_y = _pooled(clients)
  pool = reference.attacker_pool(train_x, train_y, _EDGE, num_classes=10)
  assert abs(len(pool) - 0.2 * np.sum(train_y != 1)) <= 9  # a fifth of each of the nine source classes, up to one
  chosen = frozenset(sorted(clients)[:2])
  assert corruption.update_attack(_SPEC) is None  # a data corruption: no flag
  data_fn = corruption.make_client_data_fn(task, _SPEC, chosen)
  expected_task = base.client_data_from_arrays(
      {cid: reference.poison(x, y, pool, 0.3, target=1) if cid in chosen else (x, y)
       for cid, (x, y) in clients.items()})
  for cid in sorted(clients)[:3]:
    labels = served_batches.assert_served_as_expected(task, data_fn, expected_task, cid)
    raw_x, raw_y = clients[cid]
    assert len(labels) == 2 * len(raw_y)  # the attacker's weight is its own count
    if cid in chosen:  # both epochs: the replaced positions and its own tail examples labelled 1
      own_tail = reference.in_pool(raw_x, pool) & ~backdoor.poisoned_positions(len(raw_y), 0.3)
      relabelled = backdoor.poisoned_positions(len(raw_y), 0.3) | own_tail
      assert np.sum(labels == 1) == 2 * (relabelled.sum() + np.sum(raw_y[~relabelled] == 1)) and own_tail.sum() > 0
    else:
      assert np.sum(labels == 1) == 2 * np.sum(raw_y == 1)


def test_the_attack_success_rate_is_1_for_a_model_that_always_says_the_target_and_0_for_one_that_never_does(task):
  asr = corruption.attack_success_evaluator(task, _SPEC)
  assert asr(digits_weights.constant_model(1, 10.0)) == {'attack_success_rate': 1.0}
  assert asr(digits_weights.constant_model(1, -10.0)) == {'attack_success_rate': 0.0}


@pytest.mark.parametrize('validation_fraction', [None, 0.2])
def test_the_attack_success_rate_of_a_random_model_is_the_numpy_one_on_the_held_out_tail(validation_fraction):
  """On the held-out examples (or the validation ones) in the tail fixed on the training examples, which it shares
  no image with."""
  task = tasks.create_task('digits', client_epochs=1, client_batch_size=8, seed=0,
                           validation_fraction=validation_fraction)
  clients, (x, y) = digits.load_client_arrays()
  if validation_fraction is not None:
    clients, validation = digits.split_validation(clients, validation_fraction)
    x, y = _pooled(validation)
  train_x, train_y = _pooled(clients)
  tail = reference.fit_tail(train_x, train_y, _EDGE, num_classes=10)
  inputs = reference.held_out_tail(x, y, tail)
  assert 15 < len(inputs) < 100 and not reference.in_pool(inputs, train_x).any()
  rng = np.random.default_rng(3)
  trainable = [rng.normal(scale=0.5, size=v.shape) for v in digits.model_fn().trainable_variables]
  logits = numpy_classifiers.mlp_logits(trainable, inputs)
  margins = np.sort(np.delete(logits, 1, axis=1).max(axis=1) - logits[:, 1])
  middle = len(margins) // 2
  assert margins[middle] - margins[middle - 1] > 1e-4  # no input near a tie between float32 and float64 logits
  trainable[3][1] += (margins[middle - 1] + margins[middle]) / 2  # says the target on half the inputs
  predictions = numpy_classifiers.mlp_logits(trainable, inputs).argmax(axis=1)
  expected = backdoor.attack_success_rate(predictions, y[tail.in_tail(x, y)], target=1)
  assert 0.2 < expected < 0.8
  got = corruption.attack_success_evaluator(task, _SPEC)(digits_weights.model_weights(trainable))['attack_success_rate']
  assert got == pytest.approx(expected, abs=1e-6)


def test_an_edge_case_that_does_not_fit_or_a_task_without_one_is_refused_by_name(task):
  with pytest.raises(ValueError, match=r'source must be a class in \[0, 9\], got 10'):
    corruption.make_client_data_fn(task, 'edge_case(source=10)', frozenset())
  with pytest.raises(ValueError, match=r'target must be a class in \[0, 9\], got 12'):
    corruption.attack_success_evaluator(task, 'edge_case(target=12)')
  with pytest.raises(ValueError, match='no evaluation example is in the tail'):  # one class's top 0.1 %: none held out
    corruption.attack_success_evaluator(task, 'edge_case(source=7,target=1,tail=0.001)')
  other = tasks.create_task('synthetic_regression', client_epochs=1, client_batch_size=8, seed=0)
  with pytest.raises(ValueError, match="edge_case needs a task with a pixel trigger \\(digits\\), not "
                                       "'synthetic_regression'"):
    corruption.make_client_data_fn(other, 'edge_case', frozenset())
