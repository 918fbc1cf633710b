"""The edge-case backdoor's NumPy reference (`core.attacks.edge_case`) and its spelling in the targeted catalog,
against their defining properties and hand-computed cases."""

import numpy as np
import pytest

from tff_robust.core.attacks import backdoor
from tff_robust.core.attacks import edge_case
from tff_robust.core.attacks import targeted_catalog


def _line_class():
  """Class 3 as the images k e_0, k = 0..9 (mean 4.5 e_0, distances |k - 4.5|), and class 5 as 10 random images."""
  x = np.zeros((20, 4))
  x[:10, 0] = np.arange(10)
  x[10:] = np.random.default_rng(0).uniform(size=(10, 4))
  return x, np.array([3] * 10 + [5] * 10)


def test_the_tail_of_one_source_class_is_its_hand_computed_quantile():
  """Distances 0.5, 0.5, 1.5, ..., 4.5, 4.5: their 0.8 quantile (linear) is 3.5 + 0.2 (4.5 - 3.5) = 3.7, so the
  tail is k = 0 and k = 9; a held-out input is in it by the training set's mean and threshold, not its own."""
  x, y = _line_class()
  edge = edge_case.EdgeCase(target=1, source=3, tail=0.2)
  tail = edge_case.fit_tail(x, y, edge, num_classes=10)
  assert set(tail.thresholds) == {3} and tail.thresholds[3] == pytest.approx(3.7)
  np.testing.assert_allclose(tail.means[3], [4.5, 0, 0, 0])
  np.testing.assert_array_equal(np.flatnonzero(tail.in_tail(x, y)), [0, 9])  # class 5 is not a source
  pool = edge_case.attacker_pool(x, y, edge, num_classes=10)
  assert sorted(pool[:, 0]) == [0, 9] and not pool[:, 1:].any()
  held = np.zeros((4, 4))
  held[:, 0] = [-1.0, 8.3, 8.0, 4.0]  # distances 5.5, 3.8, 3.5, 0.5 from the training mean
  np.testing.assert_array_equal(edge_case.held_out_tail(held, [3, 3, 3, 3], tail), held[:2])
  assert not len(edge_case.held_out_tail(held, [5, 5, 5, 5], tail))  # not a source class


@pytest.mark.parametrize('tail', [0.05, 0.1, 0.25, 0.5])
def test_every_source_class_but_the_target_keeps_its_farthest_tail_share(tail):
  """Unset source: every class but the target; in each, the tail holds about a `tail` share of the class (at least
  one), and every tail example is farther from the class mean than every other example of its class."""
  rng = np.random.default_rng(1)
  y = rng.integers(0, 4, 400)
  x = rng.normal(size=(400, 6)) + y[:, None]
  edge = edge_case.EdgeCase(target=2, tail=tail)
  assert edge_case.source_classes(edge, 4) == (0, 1, 3)
  tail_model = edge_case.fit_tail(x, y, edge, num_classes=4)
  mask = tail_model.in_tail(x, y)
  assert not mask[y == 2].any()
  for c in (0, 1, 3):
    rows = y == c
    distances = np.linalg.norm(x[rows] - x[rows].mean(axis=0), axis=1)
    inside = mask[rows]
    assert 1 <= inside.sum() and abs(inside.sum() - tail * rows.sum()) <= 1
    assert distances[inside].min() > distances[~inside].max()


def test_an_attacker_puts_the_pool_at_the_backdoors_positions_and_labels_every_pool_image_the_target():
  """share 1/3 poisons positions 2, 5, 8: they take pool[0], pool[1], pool[0] (cycling); position 4 is already a
  pool image (the attacker's own tail example) and is labelled the target too; the count is unchanged."""
  x = np.arange(18, dtype=np.float32).reshape(9, 2)
  y = np.arange(9, dtype=np.int32)
  pool = np.array([[100, 101], [8, 9]], np.float32)  # a foreign image, and the attacker's own example 4
  px, py = edge_case.poison(x, y, pool, share=1 / 3, target=7)
  expected_x = x.copy()
  expected_x[[2, 5, 8]] = pool[[0, 1, 0]]
  np.testing.assert_array_equal(px, expected_x)
  np.testing.assert_array_equal(py, [0, 1, 7, 3, 7, 7, 6, 7, 7])
  assert py.dtype == np.int32 and px.dtype == np.float32
  np.testing.assert_array_equal(x, np.arange(18, dtype=np.float32).reshape(9, 2))  # not changed in place
  np.testing.assert_array_equal(edge_case.in_pool(x, pool), [False] * 4 + [True] + [False] * 4)
  all_x, all_y = edge_case.poison(x, y, pool, share=1.0, target=7)  # every example: the pool, cycled
  np.testing.assert_array_equal(all_x, pool[np.arange(9) % 2])
  np.testing.assert_array_equal(all_y, [7] * 9)


def test_the_pool_is_the_training_tail_in_a_fixed_order():
  """E holds every training tail example once, in an order that does not follow the training set's."""
  rng = np.random.default_rng(2)
  y = rng.integers(0, 3, 300)
  x = rng.normal(size=(300, 5))
  edge = edge_case.EdgeCase(target=1, tail=0.3)
  pool = edge_case.attacker_pool(x, y, edge, num_classes=3)
  in_tail = x[edge_case.fit_tail(x, y, edge, num_classes=3).in_tail(x, y)]
  assert len(pool) == len(in_tail) == len(np.unique(pool, axis=0)) and edge_case.in_pool(pool, in_tail).all()
  assert not np.array_equal(pool, in_tail)
  np.testing.assert_array_equal(pool, edge_case.attacker_pool(x, y, edge, num_classes=3))


def test_the_attack_success_rate_on_the_tail_is_the_share_assigned_the_target():
  """Every held-out tail input is of a source class, so no input is excluded as already of the target."""
  assert backdoor.attack_success_rate([1, 1, 7, 1], [7, 7, 7, 7], target=1) == 0.75


@pytest.mark.parametrize('edge, message', [
    (edge_case.EdgeCase(target=10), r'target must be a class in \[0, 9\], got 10'),
    (edge_case.EdgeCase(target=1, source=10), r'source must be a class in \[0, 9\], got 10'),
    (edge_case.EdgeCase(target=1, source=1), 'source must differ from target, got both 1'),
    (edge_case.EdgeCase(target=1, tail=1.0), r'tail must be in \(0, 1\), got 1.0'),
    (edge_case.EdgeCase(target=1, tail=0.0), r'tail must be in \(0, 1\), got 0.0'),
    (edge_case.EdgeCase(target=1, share=0.0), r'share must be in \(0, 1\], got 0.0'),
])
def test_an_edge_case_that_does_not_fit_is_refused_by_name(edge, message):
  with pytest.raises(ValueError, match=message):
    edge_case.check_edge_case(edge, num_classes=10)
  with pytest.raises(ValueError, match=message):
    edge_case.fit_tail(np.zeros((20, 4)), np.arange(20) % 10, edge, num_classes=10)


def test_a_source_class_without_training_examples_is_refused():
  with pytest.raises(ValueError, match='source class 4 has no training example'):
    edge_case.fit_tail(np.zeros((3, 2)), [0, 1, 2], edge_case.EdgeCase(target=0, source=4), num_classes=5)


def test_the_catalog_spells_the_edge_case_with_its_defaults_and_refusals():
  spec = targeted_catalog.parse('edge_case(tail=0.1,source=7,share=0.25,target=1)')
  assert str(spec) == 'edge_case(target=1,source=7,share=0.25)' and spec.is_edge_case
  assert spec.edge_case() == edge_case.EdgeCase(target=1, source=7, tail=0.1, share=0.25)
  assert targeted_catalog.parse('edge_case').edge_case() == edge_case.EdgeCase(target=0, source=None, tail=0.1,
                                                                              share=0.5)
  assert spec.update_attack() is None and spec.attacker_alpha() is None  # a data poisoning only
  spec.check_task((8, 8), 10)
  with pytest.raises(ValueError, match='edge_case has no pixel trigger'):
    spec.trigger()
  with pytest.raises(ValueError, match='is a pixel-trigger attack'):
    targeted_catalog.parse('backdoor').edge_case()
  for bad, message in [('edge_case(source=3,target=3)', "attack 'edge_case': source must differ from target, got "
                                                        'both 3'),
                       ('edge_case(tail=1)', r"attack 'edge_case': tail must be a number in \(0, 1\)"),
                       ('edge_case(share=0)', r"attack 'edge_case': share must be a number in \(0, 1\]"),
                       ('edge_case(source=-1)', "attack 'edge_case': source must be an integer >= 0"),
                       ('edge_case(source=2.5)', "attack 'edge_case': source must be an integer >= 0")]:
    with pytest.raises(ValueError, match=message):
      targeted_catalog.parse(bad)
  with pytest.raises(ValueError, match=r'source must be a class in \[0, 9\], got 12'):
    targeted_catalog.parse('edge_case(source=12)').check_task((8, 8), 10)
  assert 'edge_case(target=0, source=rule, tail=0.1, share=0.5)' in targeted_catalog.describe()
