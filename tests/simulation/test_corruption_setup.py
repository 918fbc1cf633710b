"""Data poisoning transforms, the runner's corrupted-client set-up, and the attack process's invariant."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.tasks import data_corruption
from tff_robust.simulation import update_corruption_process
from tff_robust.tasks import digits


def _elements(dataset):
  return list(dataset.as_numpy_iterator())


def test_transforms():
  images = tf.data.Dataset.from_tensor_slices({'x': np.array([[0.0, 0.25, 1.0]], np.float32), 'y': [3]})
  (element,) = _elements(data_corruption.negate_images('x')(images))
  np.testing.assert_allclose(element['x'], [1.0, 0.75, 0.0])
  assert element['y'] == 3
  text = tf.data.Dataset.from_tensor_slices({'snippets': ['median', 'été']})
  assert [e['snippets'].decode() for e in _elements(data_corruption.reverse_text('snippets')(text))] == [
      'naidem', 'été'[::-1]
  ]
  targets = tf.data.Dataset.from_tensor_slices({'y': [[1.5], [-2.0]]})
  assert [float(e['y'][0]) for e in _elements(data_corruption.negate_targets('y')(targets))] == [-1.5, 2.0]


def test_digits_clients_share_of_examples_reaches_rho_within_one_client():
  task = digits.create_task(client_epochs=1, client_batch_size=8, seed=0)
  counts = dict(zip(task.train_data.client_ids, corruption.client_example_counts(task)))
  chosen = corruption.select_corrupted_clients(task, 0.25, seed=1)
  share = corruption.corrupted_weight_share(task, chosen)
  assert share >= 0.25 and share - max(counts[c] for c in chosen) / sum(counts.values()) < 0.25
  poisoned = corruption.make_client_data_fn(task, 'data', chosen)
  client = sorted(chosen)[0]
  clean_x = np.concatenate([b['x'] for b in _elements(task.client_dataset(client))])
  poisoned_x = np.concatenate([b['x'] for b in _elements(poisoned(client))])
  np.testing.assert_allclose(poisoned_x, 1.0 - clean_x)  # same shuffle seed, so the same order


def test_no_corrupted_clients_is_a_zero_share_without_counting_any_dataset():
  class NoData:  # counting would read train_data and fail
    @property
    def train_data(self):
      raise AssertionError('counted the clients\' examples')
  assert corruption.corrupted_weight_share(NoData(), frozenset()) == 0.0


def test_attack_process_without_corrupted_clients_equals_fedavg():
  task = digits.create_task(client_epochs=1, client_batch_size=16, seed=0)
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(digits.model_fn, sgd(0.1), sgd(1.0))
  attacked = update_corruption_process.build_update_corruption_process(
      digits.model_fn, sgd(0.1), sgd(1.0), model_aggregator=tff.aggregators.MeanFactory(), attack='omniscient'
  )
  fedavg_state = fedavg.initialize()
  attacked_state = attacked.set_model_weights(attacked.initialize(), fedavg.get_model_weights(fedavg_state))
  clients = task.train_data.client_ids[:4]
  fedavg_out = fedavg.next(fedavg_state, [task.client_dataset(c) for c in clients])
  flagged = [(task.client_dataset(c), update_corruption_process.corruption_flag_dataset(False)) for c in clients]
  attacked_out = attacked.next(attacked_state, flagged)
  for expected, actual in zip(fedavg.get_model_weights(fedavg_out.state).trainable,
                              attacked.get_model_weights(attacked_out.state).trainable):
    np.testing.assert_allclose(actual, expected, atol=1e-6)
  assert attacked_out.metrics['aggregator']['num_corrupted_clients'] == 0


def _labels(dataset):
  return np.concatenate([batch['y'] for batch in _elements(dataset)])


def test_label_flipping_flips_exactly_the_chosen_clients_labels():
  """y -> 9 - y on digits for the clients `select_corrupted_clients` chose (the choice every attack shares);
  the others' data is untouched."""
  task = digits.create_task(client_epochs=1, client_batch_size=8, seed=0)
  chosen = corruption.select_corrupted_clients(task, 0.2, seed=2)
  flipped = corruption.make_client_data_fn(task, 'label_flipping', chosen)
  for client in task.train_data.client_ids:
    clean, served = _labels(task.client_dataset(client)), _labels(flipped(client))
    np.testing.assert_array_equal(served, 9 - clean if client in chosen else clean)  # same shuffle seed


def test_update_attacks_flag_exactly_the_chosen_clients():
  task = digits.create_task(client_epochs=1, client_batch_size=8, seed=0)
  chosen = corruption.select_corrupted_clients(task, 0.3, seed=4)
  for attack in corruption.UPDATE_ATTACKS:
    data_fn = corruption.make_client_data_fn(task, attack, chosen)
    flags = {cid: bool(next(iter(data_fn(cid)[1]))) for cid in task.train_data.client_ids}
    assert {cid for cid, flag in flags.items() if flag} == chosen


def test_label_flipping_is_refused_for_a_task_without_class_labels():
  from tff_robust.tasks import synthetic_regression  # pylint: disable=g-import-not-at-top
  task = synthetic_regression.create_task(client_epochs=1, client_batch_size=8, seed=0)
  try:
    corruption.make_client_data_fn(task, 'label_flipping', frozenset())
  except ValueError as error:
    assert str(error) == "label_flipping needs a task with class labels, not 'synthetic_regression'"
  else:
    raise AssertionError('label flipping on a regression task was accepted')


def test_the_tasks_listed_for_label_flipping_are_those_with_a_label_flip():
  """The TensorFlow-free lists the runner's flags check against match `Task.flip_labels` and `Task.backdoor` (the
  offline tasks)."""
  from tff_robust.tasks import task_names  # pylint: disable=g-import-not-at-top
  from tff_robust import tasks  # pylint: disable=g-import-not-at-top
  for name in ('digits', 'digits_robust', 'digits_cohorts', 'fedprox_synthetic', 'synthetic_regression',
               'synthetic_regression_fedplus', 'emnist_linear_dfl', 'emnist_cnn'):
    task = tasks.create_task(name, client_epochs=1, client_batch_size=8, seed=0, use_synthetic_data=True)
    assert (task.flip_labels is not None) == (name in task_names.LABEL_FLIPPING_TASK_NAMES), name
    # and the tasks listed with a pixel trigger for the targeted attacks, with their image shape and classes
    assert (task.backdoor is not None) == (name in task_names.BACKDOOR_TASKS), name
    if task.backdoor is not None:
      assert (task.backdoor.image_shape, task.backdoor.num_classes) == task_names.BACKDOOR_TASKS[name]


def test_attack_specs_with_parameters_are_update_attacks_and_bad_ones_are_refused():
  task = digits.create_task(client_epochs=1, client_batch_size=8, seed=0)
  chosen = corruption.select_corrupted_clients(task, 0.3, seed=4)
  data_fn = corruption.make_client_data_fn(task, 'norm_aware(direction=ipm,c=1.4)', chosen)
  assert {cid for cid in task.train_data.client_ids if bool(next(iter(data_fn(cid)[1])))} == chosen
  assert str(corruption.update_attack('alie(z=1.0)')) == 'alie(z=1)' and corruption.update_attack('data') is None
  for bad, message in (('alie(q=1)', "parameters: z"), ('poison', "unknown attack 'poison'")):
    with pytest.raises(ValueError, match=message):
      corruption.make_client_data_fn(task, bad, chosen)


def test_every_algorithm_that_takes_update_corruption_gives_the_white_box_attacker_its_defence():
  """The line search sees each defence algorithm's own chain: its stacked rule on a cohort with one far outlier is
  the registry's rule of that chain (for rfa the geometric median, near the honest points, not the mean)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tff_robust.aggregators import defences  # pylint: disable=g-import-not-at-top
  from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
  config = algorithms.AlgorithmConfig()
  points = np.array([[0.0, 1.0], [0.1, 1.1], [-0.1, 0.9], [0.05, 1.0], [0.0, 0.95], [-0.05, 1.05], [70.0, -70.0]],
                    np.float32)
  weights, center = np.ones(7, np.float32), np.zeros(2, np.float32)
  for name in algorithms.DEFENCE_ALGORITHM_NAMES:
    algorithms.check_settings(name, config, clients_per_round=7, update_attack='line_search(direction=ipm)')
    rule = algorithms.defence_stacked_rule(name, config, clients_per_round=7)
    expected = defences.stacked_rule(algorithms.defence_spec(name, config), clients_per_round=7,
                                     num_byzantine=config.num_byzantine)
    np.testing.assert_allclose(rule(points, weights, center), expected(points, weights, center), rtol=1e-6)
  median = algorithms.defence_stacked_rule('rfa', config, clients_per_round=7)(points, weights, center)
  assert np.linalg.norm(np.asarray(median) - [0.0, 1.0]) < 0.5  # the mean is (10.0, -9.1)


@pytest.mark.parametrize('algorithm, attack', [
    ('filtered_centered_clipping', 'rop(radius=0.3)'), ('bucketing_rfa', 'min_max(direction=sign)'),
    ('trimmed_mean', 'line_search(direction=alie,grid=3,refinements=2)'),
])
def test_an_adaptive_attack_composes_with_a_defence_of_the_runner(algorithm, attack):
  """One round on 4 digits clients, one corrupted: the process runs and counts the corrupted client."""
  from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
  task = digits.create_task(client_epochs=1, client_batch_size=16, seed=0)
  process = algorithms.build_learning_process(
      algorithm, task.model_fn, algorithms.AlgorithmConfig(num_byzantine=1), clients_per_round=4,
      update_attack=attack,
  )
  clients = task.train_data.client_ids[:4]
  data = [(task.client_dataset(c), update_corruption_process.corruption_flag_dataset(i == 0))
          for i, c in enumerate(clients)]
  output = process.next(process.initialize(), data)
  assert output.metrics['aggregator']['num_corrupted_clients'] == 1
  assert all(np.all(np.isfinite(w)) for w in process.get_model_weights(output.state).trainable)


def _flag(client_data):
  return bool(next(iter(client_data[1])))


def test_attackers_outside_their_window_of_rounds_get_the_honest_clients_data_and_flag():
  """Rounds 3-4 of --corruption_start_round=3 --corruption_end_round=4: the chosen clients' poisoned data and set
  flag (model replacement: both); every other round, their clean data and a flag the attack sees as honest."""
  task = digits.create_task(client_epochs=1, client_batch_size=8, seed=0)
  chosen = corruption.select_corrupted_clients(task, 0.2, seed=1)
  attacker, honest = sorted(chosen)[0], sorted(set(task.train_data.client_ids) - chosen)[0]
  window = corruption.AttackWindow(3, 4)
  for spec in ('model_replacement(target=1)', 'alie', 'label_flipping'):
    data_fn = corruption.make_client_data_fn(task, spec, chosen, window=window)
    assert isinstance(data_fn, client_pipelines.ByRound)
    for round_num in (2, 3, 5):  # before, in and after the window
      cohort = client_pipelines.cohort_client_data(task.train_data, data_fn, [attacker, honest], None, 0, round_num)
      attacking = round_num in (3, 4)
      clean_labels = _labels(task.client_dataset(attacker))
      if spec == 'alie':  # an update attack: clean data, the flag in the window only
        assert [_flag(c) for c in cohort] == [attacking, False]
        np.testing.assert_array_equal(_labels(cohort[0][0]), clean_labels)
        continue
      served = cohort[0][0] if spec.startswith('model') else cohort[0]
      if spec.startswith('model'):
        assert [_flag(c) for c in cohort] == [attacking, False]
      poisoned = (_labels(served) != clean_labels).any()
      assert poisoned == attacking, (spec, round_num)
      np.testing.assert_array_equal(_labels(cohort[1][0] if spec.startswith('model') else cohort[1]),
                                    _labels(task.client_dataset(honest)))
  assert corruption.make_client_data_fn(task, 'data', chosen, window=corruption.AttackWindow()) is not None
  assert not isinstance(corruption.make_client_data_fn(task, 'data', chosen, window=corruption.AttackWindow(1)),
                        client_pipelines.ByRound)  # the whole run: one function for every round


def test_a_targeted_attacks_update_half_is_model_replacements_boost_at_the_server_learning_rate():
  assert str(corruption.update_attack('model_replacement(target=2,boost=4)', 0.25)) == 'boost(gamma=4,eta=0.25)'
  assert corruption.update_attack('backdoor(target=2)') is None
  with pytest.raises(ValueError, match=r"targeted attack spec \(backdoor, model_replacement, constrain_and_scale, "
                                       r"neurotoxin, edge_case\): attack 'backdoor': share must be a number in "
                                       r"\(0, 1\]"):
    corruption.update_attack('backdoor(share=2)')
  with pytest.raises(ValueError, match="unknown attack 'backdor'"):
    corruption.update_attack('backdor')
