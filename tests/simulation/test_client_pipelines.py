"""Per-round cohort transforms: RFA's minibatch SGD against NumPy, FedProx's stragglers, and both deterministic
given the seed across a kill-and-resume."""

import collections
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import algorithms
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.simulation import training_loop
from tff_robust.tasks import base
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import shakespeare_windows
from tff_robust.tasks import synthetic_regression

_BATCH = 8


def _dataset(x, y, epochs=1):
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).repeat(epochs).batch(_BATCH)


def _arrays(num_clients=3):
  clients, _, _ = synthetic_regression.make_client_arrays(num_clients=num_clients)
  return list(clients.values())


def _rows(dataset):
  return np.concatenate([batch['x'] for batch in dataset.as_numpy_iterator()])


def test_round_generators_depend_on_seed_and_round_only():
  draw = lambda seed, round_num: client_pipelines.round_generator(seed, round_num).integers(2**31, size=4)
  np.testing.assert_array_equal(draw(3, 5), draw(3, 5))
  assert not np.array_equal(draw(3, 5), draw(3, 6)) and not np.array_equal(draw(3, 5), draw(4, 5))
  assert not np.array_equal(draw(3, 0), np.random.default_rng(3).integers(2**31, size=4))  # not the sampler's


def test_a_minibatch_is_one_batch_of_distinct_examples_of_the_client_drawn_per_round():
  x, y = _arrays(1)[0]
  transform = client_pipelines.minibatch(0.1)
  (first,) = transform(client_pipelines.round_generator(0, 1), [_dataset(x, y)])
  (again,) = transform(client_pipelines.round_generator(0, 1), [_dataset(x, y)])
  (later,) = transform(client_pipelines.round_generator(0, 2), [_dataset(x, y)])
  rows = _rows(first)
  assert len(list(first)) == 1 and len(rows) == int(np.ceil(0.1 * len(x)))
  assert len({r.tobytes() for r in rows}) == len(rows) and {r.tobytes() for r in rows} <= {r.tobytes() for r in x}
  np.testing.assert_array_equal(_rows(again), rows)  # the same round draws the same minibatch
  np.testing.assert_array_equal(_rows(first), rows)  # and each iteration of it is the same sample
  assert not np.array_equal(_rows(later), rows)


@pytest.mark.parametrize('fraction', [0.0, -0.1, 1.5])
def test_a_minibatch_fraction_outside_0_1_is_refused(fraction):
  with pytest.raises(ValueError, match=r'minibatch_fraction must be in \(0, 1\]'):
    client_pipelines.minibatch(fraction)


def _epochs(x, y, epochs):
  """A client's data as the tasks build it (`tasks.base.batching`): shuffled per epoch, repeated, batched."""
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y))
  return base.batching(epochs=epochs, batch_size=_BATCH, seed=0)(dataset)


def _row_set(rows):
  return {r.tobytes() for r in rows}


@pytest.mark.parametrize('cap', [5, 10_000])
def test_a_capped_client_trains_every_epoch_on_min_cap_n_of_its_examples_drawn_per_round(cap):
  x, y = _arrays(1)[0]
  epochs = 2
  transform = client_pipelines.max_examples(cap, epochs=epochs, batch_size=_BATCH)
  draw = lambda seed, round_num: _rows(
      transform(client_pipelines.round_generator(seed, round_num), [_epochs(x, y, epochs)])[0])
  rows = draw(0, 1)
  size = min(cap, len(x))
  assert len(rows) == epochs * size
  first, second = rows[:size], rows[size:]
  assert len(_row_set(first)) == size and _row_set(first) == _row_set(second) <= _row_set(x)  # one sample, 2 epochs
  assert _row_set(draw(0, 1)) == _row_set(first)  # the same (seed, round): the same sample
  if cap < len(x):
    assert _row_set(draw(0, 2)) != _row_set(first) and _row_set(draw(1, 1)) != _row_set(first)


def test_a_cap_keeps_an_update_attack_flag():
  x, y = _arrays(1)[0]
  flag = tf.data.Dataset.from_tensors(True)
  ((dataset, kept),) = client_pipelines.max_examples(3, epochs=1, batch_size=_BATCH)(
      client_pipelines.round_generator(0, 0), [(_epochs(x, y, 1), flag)]
  )
  assert len(_rows(dataset)) == 3 and kept is flag


@pytest.mark.parametrize('cap', [0, -3, 2.5, True])
def test_a_cap_below_one_or_not_an_integer_is_refused(cap):
  with pytest.raises(ValueError, match=r'max_client_examples must be an integer >= 1, got'):
    client_pipelines.max_examples(cap, epochs=1, batch_size=_BATCH)


def test_fedsgd_on_minibatches_is_one_sgd_step_on_the_union_of_the_samples():
  """FedSGD's server step with learning rate eta: w - eta sum_k n_k g_k / sum_k n_k, g_k the mean-squared-error
  gradient on client k's sample of n_k = ceil(0.25 N_k) examples: the gradient of the samples' pooled loss."""
  learning_rate, arrays = 0.05, _arrays()
  config = algorithms.AlgorithmConfig(server_learning_rate=learning_rate)
  process = algorithms.build_learning_process('fedsgd', synthetic_regression.model_fn, config)
  data = client_pipelines.minibatch(0.25)(client_pipelines.round_generator(1, 1), [_dataset(x, y) for x, y in arrays])
  state = process.next(process.initialize(), data).state
  xs = np.concatenate([batch['x'] for d in data for batch in d.as_numpy_iterator()]).astype(np.float64)
  ys = np.concatenate([batch['y'] for d in data for batch in d.as_numpy_iterator()]).astype(np.float64)
  assert len(xs) == sum(int(np.ceil(0.25 * len(x))) for x, _ in arrays)
  w = np.zeros((synthetic_regression.DIMENSION, 1))
  expected = w - learning_rate * 2.0 / len(xs) * xs.T @ (xs @ w - ys)
  np.testing.assert_allclose(process.get_model_weights(state).trainable[0], expected, atol=1e-5)


def test_stragglers_train_a_uniform_number_of_the_epochs_on_the_first_epochs_of_their_data():
  epochs, arrays = 4, _arrays(4)
  cohort = [_dataset(x, y, epochs) for x, y in arrays]
  transform = client_pipelines.stragglers(0.5, epochs=epochs, batch_size=_BATCH)
  seen = set()
  for round_num in range(1, 30):
    changed = transform(client_pipelines.round_generator(0, round_num), cohort)
    done = [len(_rows(d)) / len(x) for d, (x, _) in zip(changed, arrays)]
    assert sorted(e == epochs for e in done).count(False) <= 2 and all(e in (1, 2, 3, 4) for e in done)
    for d, (x, _), e in zip(changed, arrays, done):
      np.testing.assert_array_equal(_rows(d), np.tile(x, (int(e), 1)))  # the first e epochs, in order
      assert all(len(b['x']) == _BATCH for b in list(d.as_numpy_iterator())[:-1])
    seen.update(done)
    assert sum(d is original for d, original in zip(changed, cohort)) == 2  # round(0.5 * 4) stragglers
  assert seen == {1, 2, 3, 4}  # x ~ U{1..E}: a straggler may also draw all E epochs
  assert client_pipelines.stragglers(0.0, epochs=epochs, batch_size=_BATCH)(
      client_pipelines.round_generator(0, 1), cohort) == cohort


def test_stragglers_need_two_epochs_and_a_cohort_with_one_is_logged(caplog):
  with pytest.raises(ValueError, match='straggler_fraction 0.5 needs epochs >= 2'):
    client_pipelines.stragglers(0.5, epochs=1, batch_size=_BATCH)
  arrays = _arrays(4)
  cohort = [_dataset(x, y, 2) for x, y in arrays]
  transform = client_pipelines.stragglers(0.1, epochs=2, batch_size=_BATCH)  # round(0.4) = 0
  assert transform(client_pipelines.round_generator(0, 1), cohort) == cohort
  assert 'rounds to 0 stragglers' in caplog.text


@pytest.mark.parametrize('name', ['max_examples', 'stragglers', 'minibatch'])
def test_given_counts_that_agree_a_transform_gives_the_same_data_without_counting(name, monkeypatch):
  epochs, arrays = (1 if name == 'minibatch' else 3), _arrays(3)
  cohort = [_dataset(x, y, epochs) for x, y in arrays]
  transform = {'max_examples': lambda: client_pipelines.max_examples(5, epochs=epochs, batch_size=_BATCH),
               'stragglers': lambda: client_pipelines.stragglers(1.0, epochs=epochs, batch_size=_BATCH),
               'minibatch': lambda: client_pipelines.minibatch(0.25, batch_size=_BATCH)}[name]()
  counted = transform(client_pipelines.round_generator(0, 1), cohort)
  monkeypatch.setattr(client_pipelines, '_num_examples', lambda _: pytest.fail('counted a client\'s examples'))
  given = transform(client_pipelines.round_generator(0, 1), cohort, [len(x) for x, _ in arrays])
  for counted_data, given_data in zip(counted, given):
    np.testing.assert_array_equal(_rows(given_data), _rows(counted_data))


def test_a_count_that_disagrees_with_the_number_of_batches_is_not_trusted():
  (x, y), epochs = _arrays(1)[0], 2
  transform = client_pipelines.max_examples(len(x) + 100, epochs=epochs, batch_size=_BATCH)
  (data,) = transform(client_pipelines.round_generator(0, 1), [_dataset(x, y, epochs)], [len(x) + 3 * _BATCH])
  assert len(_rows(data)) == epochs * len(x)  # trusted, the count would take 24 examples of the second epoch too
  assert client_pipelines.known_example_count(_dataset(x, y, epochs).unbatch()) is None


def test_update_attack_client_data_keeps_its_flag():
  x, y = _arrays(1)[0]
  flag = tf.data.Dataset.from_tensors(True)
  ((data, kept_flag),) = client_pipelines.minibatch(0.5)(client_pipelines.round_generator(0, 1),
                                                         [(_dataset(x, y), flag)])
  assert kept_flag is flag and len(_rows(data)) == int(np.ceil(0.5 * len(x)))


class _Interrupted(Exception):
  pass


def _train(task, process, output_dir, transform, client_data_fn=None):
  training_loop.run_training(
      process, task, client_data_fn or task.client_dataset, total_rounds=4, clients_per_round=5,
      rounds_per_eval=4, seed=2, output_dir=output_dir, show_progress=False, rounds_per_checkpoint=2,
      cohort_transform=transform,
  )
  with np.load(f'{output_dir}/model_weights.npz') as weights:
    return weights['trainable_0']


def test_a_resumed_run_draws_the_same_stragglers_as_an_uninterrupted_one(tmp_path):
  task = synthetic_regression.create_task(client_epochs=3, client_batch_size=_BATCH, seed=0)
  process = algorithms.build_learning_process('fedavg', task.model_fn, algorithms.AlgorithmConfig())
  stragglers = client_pipelines.stragglers(0.6, epochs=3, batch_size=_BATCH)
  reference = _train(task, process, str(tmp_path / 'reference'), stragglers)
  calls = {'n': 0}

  def killing_in_round_4(client_id):
    calls['n'] += 1
    if calls['n'] > 3 * 5:
      raise _Interrupted()
    return task.client_dataset(client_id)

  with pytest.raises(_Interrupted):
    _train(task, process, str(tmp_path / 'resumed'), stragglers, killing_in_round_4)  # checkpoint at round 2
  np.testing.assert_allclose(_train(task, process, str(tmp_path / 'resumed'), stragglers), reference, atol=1e-6)
  assert np.max(np.abs(_train(task, process, str(tmp_path / 'no_stragglers'), None) - reference)) > 1e-3


@pytest.mark.parametrize('resumed', [False, True])
def test_a_killed_rerun_leaves_no_finished_looking_outputs_of_an_earlier_run(tmp_path, resumed):
  """A rerun over a finished run's directory (afresh, or resumed to more rounds) killed before it ends: no
  summary.json says the directory finished; a fresh start leaves none of the earlier run's outputs either."""
  task = synthetic_regression.create_task(client_epochs=1, client_batch_size=_BATCH, seed=0)
  process = algorithms.build_learning_process('fedavg', task.model_fn, algorithms.AlgorithmConfig())
  output_dir = str(tmp_path)
  _train(task, process, output_dir, None)  # finished: 4 rounds, checkpoints at rounds 2 and 4
  if not resumed:
    for name in os.listdir(output_dir):  # no checkpoint: the rerun starts afresh
      if name not in ('summary.json', 'model_weights.npz', 'metrics.csv'):
        shutil.rmtree(os.path.join(output_dir, name))

  def killed_in_the_first_round(client_id):
    raise _Interrupted()

  with pytest.raises(_Interrupted):
    training_loop.run_training(
        process, task, killed_in_the_first_round, total_rounds=6, clients_per_round=5, rounds_per_eval=4, seed=2,
        output_dir=output_dir, show_progress=False, rounds_per_checkpoint=2)
  left = set(os.listdir(output_dir))
  assert 'summary.json' not in left and ('model_weights.npz' in left) == resumed, left
  with open(os.path.join(output_dir, 'metrics.csv')) as f:  # the resumed run's rounds 1-4; the fresh one's none
    assert len(f.read().splitlines()) == (5 if resumed else 1)  # with its header


def _windows_task(epochs: int) -> base.Task:
  """A task over made-up roles held as `shakespeare_windows` (in memory), corrupted by reversing windows."""
  rng = np.random.default_rng(11)
  texts = {f'play:R{i}': ''.join(rng.choice(list('abcXYZ ,'), size=size))
           for i, size in enumerate([25, 130, 1500, 2600])}
  symbols = shakespeare_windows.Symbols.from_texts(texts)
  train_data = shakespeare_windows.WindowsClientData(symbols, {role: symbols.window_positions(role) for role in texts})
  return base.Task('windows', None, train_data, base.batching(epochs=epochs, batch_size=_BATCH, seed=4),
                   shakespeare_papers.reverse_windows, evaluate=None)


def _all_rows(client_data):
  dataset = client_data[0] if isinstance(client_data, tuple) else client_data
  return [np.concatenate([batch['x'], batch['y'][:, np.newaxis]], axis=1) for batch in dataset.as_numpy_iterator()]


@pytest.mark.parametrize('epochs', [1, 2])
@pytest.mark.parametrize('corruption_name', ['none', 'data', 'omniscient'])
def test_in_memory_clients_give_the_dataset_pipelines_batches_capped_or_not(epochs, corruption_name):
  tf.random.set_seed(1)
  task = _windows_task(epochs)
  corrupted = frozenset(task.train_data.client_ids[1::2])
  cohort = list(task.train_data.client_ids)
  for cap in (None, 5, 64, 10_000):
    transform = None if cap is None else client_pipelines.max_examples(cap, epochs=epochs, batch_size=_BATCH)
    data = {
        in_memory: client_pipelines.cohort_client_data(
            task.train_data, corruption.make_client_data_fn(task, corruption_name, corrupted, in_memory=in_memory),
            cohort, transform, seed=3, round_num=2)
        for in_memory in (False, True)
    }
    for old, new in zip(data[False], data[True]):
      old_rows, new_rows = _all_rows(old), _all_rows(new)
      assert len(old_rows) == len(new_rows)  # the same batches: same sizes, same rows in the same order
      for old_batch, new_batch in zip(old_rows, new_rows):
        np.testing.assert_array_equal(new_batch, old_batch)
      if isinstance(old, tuple):
        assert list(old[1].as_numpy_iterator()) == list(new[1].as_numpy_iterator())


def _poison_every_third_window(dataset):
  """A position-wise poisoning, as the targeted attacks' (`tasks.backdoor`): the label of examples 0, 3, 6, ... of
  the client's dataset becomes 0."""
  return dataset.enumerate().map(
      lambda j, element: {**element, 'y': tf.where(j % 3 == 0, tf.zeros_like(element['y']), element['y'])})


def test_a_targeted_attack_poisons_the_same_positions_capped_in_memory_or_not(monkeypatch):
  """`capped_in_memory` selects examples before poisoning them; a position-wise poisoning must see the client's
  whole dataset, so a targeted attack's clients never come in memory."""
  monkeypatch.setattr(corruption, '_poison_of', lambda task, targeted: _poison_every_third_window)
  tf.random.set_seed(1)
  task = _windows_task(1)
  corrupted = frozenset(task.train_data.client_ids[1::2])
  transform = client_pipelines.max_examples(64, epochs=1, batch_size=_BATCH)
  data = {
      in_memory: client_pipelines.cohort_client_data(
          task.train_data, corruption.make_client_data_fn(task, 'backdoor', corrupted, in_memory=in_memory),
          list(task.train_data.client_ids), transform, seed=3, round_num=2)
      for in_memory in (False, True)
  }
  for old, new in zip(data[False], data[True]):
    for old_batch, new_batch in zip(_all_rows(old), _all_rows(new), strict=True):
      np.testing.assert_array_equal(new_batch, old_batch)
