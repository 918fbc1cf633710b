"""The targeted attacks' NumPy references (`core.attacks.backdoor`, `core.attacks.boost`), the targeted catalog's
spelling of specs, and the attack window (`core.corruption.AttackWindow`), against their defining properties."""

import numpy as np
import pytest

from tff_robust.core import corruption
from tff_robust.core.attacks import backdoor
from tff_robust.core.attacks import boost
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import neurotoxin
from tff_robust.core.attacks import targeted_catalog


@pytest.mark.parametrize('share', [1.0, 0.5, 0.3, 0.25, 0.1, 0.77])
def test_the_first_n_examples_hold_floor_n_share_poisoned_ones_evenly_spread(share):
  mask = backdoor.poisoned_positions(500, share)
  for n in (1, 7, 10, 99, 500):
    assert abs(mask[:n].sum() - n * share) < 1 + 1e-9  # floor(n s), up to the float64 rounding of n s
  gaps = np.diff(np.flatnonzero(mask))
  assert gaps.max() - gaps.min() <= 1  # evenly spread: every gap is floor(1/s) or ceil(1/s)
  if share == 1.0:
    assert mask.all()
  if share == 0.5:
    np.testing.assert_array_equal(np.flatnonzero(mask[:6]), [1, 3, 5])


def test_stamping_sets_exactly_the_bottom_right_patch():
  rng = np.random.default_rng(0)
  images = rng.uniform(0, 0.9, size=(5, 64))
  trigger = backdoor.PixelTrigger(target=3, size=3, value=1.0)
  stamped = backdoor.stamp(images, trigger, (8, 8))
  grid, original = stamped.reshape(5, 8, 8), images.reshape(5, 8, 8)
  on_patch = np.zeros((8, 8), bool)
  for row in (5, 6, 7):
    for column in (5, 6, 7):
      on_patch[row, column] = True
  assert np.all(grid[:, on_patch] == 1.0)
  np.testing.assert_array_equal(grid[:, ~on_patch], original[:, ~on_patch])
  np.testing.assert_array_equal(images, original.reshape(5, 64))  # the input is not changed in place


def test_poisoning_relabels_and_stamps_the_poisoned_positions_only():
  rng = np.random.default_rng(1)
  x, y = rng.uniform(0, 0.9, size=(9, 64)), rng.integers(0, 10, 9)
  trigger = backdoor.PixelTrigger(target=7, share=1 / 3, size=2, value=0.5)
  px, py = backdoor.poison(x, y, trigger, (8, 8))
  poisoned = np.array([False, False, True] * 3)
  np.testing.assert_array_equal(backdoor.poisoned_positions(9, 1 / 3), poisoned)
  np.testing.assert_array_equal(py, np.where(poisoned, 7, y))
  np.testing.assert_array_equal(px[~poisoned], x[~poisoned])
  np.testing.assert_array_equal(px[poisoned].reshape(-1, 8, 8)[:, 6:, 6:], 0.5)
  assert np.count_nonzero(px[poisoned] != x[poisoned]) == 3 * 4


def test_the_attack_success_rate_counts_only_inputs_not_already_of_the_target():
  labels = np.array([0, 1, 2, 3, 3, 4])
  assert backdoor.attack_success_rate([3, 3, 0, 3, 1, 2], labels, target=3) == pytest.approx(2 / 4)
  assert backdoor.attack_success_rate([3] * 6, labels, 3) == 1.0
  assert backdoor.attack_success_rate([0] * 6, labels, 3) == 0.0
  assert np.isnan(backdoor.attack_success_rate([3, 3], [3, 3], 3))
  x = np.arange(6 * 4, dtype=float).reshape(6, 4)
  triggered = backdoor.triggered_inputs(x, labels, backdoor.PixelTrigger(target=3, size=1, value=-1.0), (2, 2))
  np.testing.assert_array_equal(triggered[:, :3], x[[0, 1, 2, 5], :3])
  assert np.all(triggered[:, 3] == -1.0) and len(triggered) == 4


@pytest.mark.parametrize('trigger, message', [
    (backdoor.PixelTrigger(target=10), r'target must be a class in \[0, 9\], got 10'),
    (backdoor.PixelTrigger(target=-1), r'target must be a class in \[0, 9\]'),
    (backdoor.PixelTrigger(target=0, size=9), r'size must be an integer in \[1, 8\] \(the trigger must fit the 8 x 8'),
    (backdoor.PixelTrigger(target=0, size=0), r'size must be an integer in \[1, 8\]'),
    (backdoor.PixelTrigger(target=0, share=0.0), r'share must be in \(0, 1\], got 0.0'),
    (backdoor.PixelTrigger(target=0, share=1.5), r'share must be in \(0, 1\]'),
])
def test_a_trigger_that_does_not_fit_the_task_is_refused_naming_the_parameter(trigger, message):
  with pytest.raises(ValueError, match=message):
    backdoor.check_trigger(trigger, (8, 8), 10)


def test_a_boosted_attacker_replaces_the_fedavg_model_when_the_others_send_zero_updates():
  """Bagdasaryan et al.'s closed form: with gamma = W / (eta W_C) the new global model is the attackers' weighted
  mean model."""
  rng = np.random.default_rng(2)
  global_model, weights = rng.normal(size=6), rng.uniform(1, 5, 8)
  for eta in (1.0, 0.3):
    for attackers in ([2], [0, 5]):
      corrupted = np.isin(np.arange(8), attackers)
      targets = rng.normal(size=(8, 6))  # the attackers' own trained models X_i
      updates = np.where(corrupted[:, None], global_model - targets, 0.0)  # TFF's delta: initial - trained
      boosted = boost.boosted_updates(updates, weights, corrupted, eta=eta)
      expected = weights[corrupted] @ targets[corrupted] / weights[corrupted].sum()
      np.testing.assert_allclose(boost.fedavg_step(global_model, boosted, weights, eta), expected, atol=1e-12)
      # unboosted, the attackers' models are diluted by the cohort's weight
      assert not np.allclose(boost.fedavg_step(global_model, updates, weights, eta), expected)
  gamma = boost.replacement_factor([1.0] * 10, [True] + [False] * 9, eta=0.5)
  assert gamma == pytest.approx(10 / 0.5)  # the paper's n / eta for clients of equal weight
  assert boost.replacement_factor([1.0, 2.0], [False, False]) == 0.0
  np.testing.assert_allclose(boost.boosted_updates(np.ones((3, 2)), np.ones(3), [True, False, False], gamma=4.0),
                             [[4, 4], [1, 1], [1, 1]])


def test_targeted_specs_have_a_canonical_form_a_trigger_and_an_update_half():
  spec = targeted_catalog.parse('model_replacement( target=3 , size=3.0, boost=10)')
  assert str(spec) == 'model_replacement(target=3,size=3,boost=10)'
  assert spec.trigger() == backdoor.PixelTrigger(target=3, share=0.5, size=3, value=1.0)
  assert spec.update_attack(0.5) == 'boost(gamma=10,eta=0.5)'
  assert targeted_catalog.parse('model_replacement').update_attack(1.0) == 'boost'
  assert str(targeted_catalog.parse('backdoor(share=0.5,value=1)')) == 'backdoor'
  assert targeted_catalog.parse('backdoor(target=2)').update_attack(3.0) is None
  assert targeted_catalog.lookup('alie') is None and catalog.lookup('backdoor') is None
  assert str(catalog.parse('boost(eta=1.0,gamma=2)')) == 'boost(gamma=2)'


@pytest.mark.parametrize('spec, message', [
    ('backdoor(target=-1)', "attack 'backdoor': target must be an integer >= 0"),
    ('backdoor(target=1.5)', "attack 'backdoor': target must be an integer >= 0"),
    ('backdoor(share=0)', r"attack 'backdoor': share must be a number in \(0, 1\], got '0'"),
    ('backdoor(share=1.01)', r'share must be a number in \(0, 1\]'),
    ('backdoor(size=0)', "attack 'backdoor': size must be an integer >= 1"),
    ('backdoor(value=nan)', "attack 'backdoor': value must be a finite number"),
    ('backdoor(colour=red)', r'parameters: target, share, size, value'),
    ('model_replacement(boost=0)', "attack 'model_replacement': boost must be a finite number > 0"),
    ('model_replacement(boost=inf)', "attack 'model_replacement': boost must be a finite number > 0"),
])
def test_bad_targeted_specs_are_refused_naming_the_parameter(spec, message):
  with pytest.raises(ValueError, match=message):
    targeted_catalog.parse(spec)


def test_the_attack_window_says_which_rounds_attack_and_refuses_bad_bounds_by_name():
  window = corruption.AttackWindow(3, 5)
  assert [r for r in range(1, 9) if window.active(r)] == [3, 4, 5] and not window.whole_run
  assert corruption.AttackWindow().whole_run and corruption.AttackWindow(1).active(10**6)
  assert [r for r in range(1, 6) if corruption.AttackWindow(4).active(r)] == [4, 5]
  for start, end, message in ((0, None, 'start_round must be an integer >= 1, got 0'),
                              (-2, None, 'start_round must be'),
                              (5, 3, r'end_round must be an integer >= start_round \(5\), or unset, got 3'),
                              (1, 0, 'end_round must be'), (2.5, None, 'start_round must be')):
    with pytest.raises(ValueError, match=message):
      corruption.AttackWindow(start, end)


def test_neurotoxins_mask_drops_the_largest_coordinates_of_the_last_global_update():
  previous = np.array([0.1, -3.0, 0.5, 2.0, -0.2, 0.0])
  np.testing.assert_array_equal(neurotoxin.kept_coordinates(previous, 0.3), [1, 0, 1, 0, 1, 1])  # ceil(1.8) = 2
  np.testing.assert_array_equal(neurotoxin.kept_coordinates([1.0, 1.0, 0.5, 1.0], 0.5), [0, 0, 1, 1])  # ties: lower
  assert neurotoxin.kept_coordinates(np.zeros(4), 0.5).all()  # before the first aggregate nothing is masked
  np.testing.assert_array_equal(neurotoxin.kept_coordinates([0.0, 2.0, 0.0, 0.0], 0.5), [1, 0, 1, 1])  # only changed
  assert neurotoxin.kept_coordinates(previous, 0.0).all()
  updates = np.arange(12.0).reshape(2, 6) + 1
  masked = neurotoxin.masked_updates(updates, [True, False], previous, 0.3)
  np.testing.assert_array_equal(masked, [[1, 0, 3, 0, 5, 6], updates[1]])
