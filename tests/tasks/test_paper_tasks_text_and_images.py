"""The RFA and Delta-FL papers' EMNIST and Shakespeare tasks, loaded through TFF's real loaders from small
local SQLite files (no network: a download attempt fails the test; Shakespeare with `shakespeare_source='tff'`),
and their models' parameter counts."""

import dataclasses
import random
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.datasets import download

from tff_robust.simulation import algorithms
from tff_robust.simulation import training_loop
from tff_robust import tasks
from tff_robust.tasks import emnist_papers
from tff_robust.tasks import paper_models
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import tff_sql_files

_TRAINING = dict(client_epochs=1, client_batch_size=8, seed=0)

# EMNIST writers: (train examples, test examples); fewer than 100 in all are dropped by both papers.
_WRITERS = {'f0000_00': (95, 4), 'f0001_00': (50, 5), 'f0002_00': (90, 10)}
_WRITERS.update({f'f{k:04d}_00': (92 + k, 9 + k % 3) for k in range(3, 12)})
_EMNIST_ELIGIBLE = sorted(w for w, (a, b) in _WRITERS.items() if a + b >= 100)

# Shakespeare roles: (train snippets, test snippets).
_LINE = 'To be, or not to be:\nthat  is the question; Caf\u00e9 ROMEO!'
_ROLES = {
    'HAMLET': ([_LINE] * 3, [_LINE.upper()]),
    'SHORT_99': (['a' * 60], ['b' * 58]),  # 60 + 1 + 58 = 119 characters: 99 examples, dropped
    'EXACT_100': (['a' * 60], ['b' * 59]),  # 120 characters: 100 examples, kept
}
_ROLES.update({f'ROLE_{k}': ([f'{_LINE} {k}'] * (2 + k), ['Exeunt.']) for k in range(5)})
_SHAKESPEARE_ELIGIBLE = sorted(set(_ROLES) - {'SHORT_99'})


@pytest.fixture(scope='module', autouse=True)
def no_downloads():
  """TFF's loaders must find their file: any download attempt fails loudly."""
  def refuse(*args, **kwargs):
    raise AssertionError(f'a test tried to download {args}')
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(download, '_fetch_lzma_file', refuse)
    patch.setattr('urllib.request.urlopen', refuse)
    yield


def _pixels(writer: int, serial: int, split: int, rng) -> np.ndarray:
  """A random image whose first three pixels name its writer, serial number and split (0 train, 1 test)."""
  image = rng.uniform(size=(28, 28)).astype(np.float32)
  image[0, :3] = (writer / 100, serial / 1000, split)
  return image


@pytest.fixture(scope='module')
def emnist_dir(tmp_path_factory):
  rng = np.random.default_rng(0)
  clients = {}
  for index, (writer, counts) in enumerate(sorted(_WRITERS.items())):
    parts, serial = [], 0
    for split, count in enumerate(counts):
      pixels = np.stack([_pixels(index, serial + j, split, rng) for j in range(count)])
      parts.append((pixels, (np.arange(count) + serial + index) % 62))
      serial += count
    clients[writer] = tuple(parts)
  cache_dir = str(tmp_path_factory.mktemp('emnist_cache'))
  tff_sql_files.write_emnist(cache_dir, clients)
  return cache_dir


@pytest.fixture(scope='module')
def shakespeare_dir(tmp_path_factory):
  cache_dir = str(tmp_path_factory.mktemp('shakespeare_cache'))
  tff_sql_files.write_shakespeare(cache_dir, _ROLES)
  return cache_dir


def _tags(dataset) -> set:
  """(writer, serial, split) of every example, read from its first pixels."""
  return {tuple(np.round(e['x'][0, :3] * [100, 1000, 1]).astype(int)) for e in dataset.as_numpy_iterator()}


def _writer_tags(writer: str) -> set:
  index = sorted(_WRITERS).index(writer)
  num_train, num_test = _WRITERS[writer]
  return {(index, s, int(s >= num_train)) for s in range(num_train + num_test)}


def _expected_windows(role: str) -> list[tuple]:
  """The notes' windows by hand: 20 symbols -> the next, over the role's text as LEAF normalises it."""
  text = re.sub(' {2,}', ' ', ' '.join(_ROLES[role][0] + _ROLES[role][1]).replace('\n', ' '))
  ids = [max(0, shakespeare_papers.VOCABULARY.find(c)) for c in text]
  return [(tuple(ids[i:i + 20]), ids[i + 20]) for i in range(len(ids) - 20)]


def _windows(dataset) -> list[tuple]:
  return [(tuple(e['x'].tolist()), int(e['y'])) for e in dataset.as_numpy_iterator()]


def _is_subsequence(part, whole) -> bool:
  remaining = iter(whole)
  return all(item in remaining for item in part)


def _test_devices(task) -> list[str]:
  return task.device_evaluator._groups['eval'].client_data.client_ids  # pylint: disable=protected-access


def _parameter_count(keras_model) -> int:
  return sum(int(np.prod(v.shape)) for v in keras_model.trainable_variables)


# Expected counts from the layer sizes written out in the notes (rfa.md §3.4, superquantile_fl.md §3.4).
_CONV = (5 * 5 * 1 * 32 + 32) + (5 * 5 * 32 * 64 + 64)
_EXPECTED_PARAMETERS = {
    'emnist_linear': 62 * 28 * 28,  # w_1..w_62 in R^{28x28}, no bias
    'emnist_cnn_rfa': _CONV + (7 * 7 * 64 * 2048 + 2048) + (2048 * 62 + 62),  # 'same': flatten 3136
    'emnist_cnn_dfl': _CONV + (4 * 4 * 64 * 62 + 62),  # 'valid' (authors' code): flatten 1024, no FC-2048
    'shakespeare_lstm_rfa': 53 * 8 + 4 * (128 * (8 + 128) + 128) + (128 * 53 + 53),  # embedding 8, LSTM 128
    'shakespeare_gru_dfl': 3 * (128 * (53 + 128) + 2 * 128) + (128 * 53 + 53),  # one-hot 53, GRU 128 (2 biases)
}


@pytest.mark.parametrize('name, expected_output', [
    ('emnist_linear', 62), ('emnist_cnn_rfa', 62), ('emnist_cnn_dfl', 62), ('shakespeare_lstm_rfa', 53),
    ('shakespeare_gru_dfl', 53),
])
def test_models_have_the_notes_parameter_counts(name, expected_output):
  keras_model = getattr(paper_models, name)()
  assert _parameter_count(keras_model) == _EXPECTED_PARAMETERS[name]
  assert keras_model.output_shape == (None, expected_output)


def test_parameter_counts_in_numbers():
  assert _EXPECTED_PARAMETERS['emnist_linear'] == 48_608
  assert _EXPECTED_PARAMETERS['emnist_cnn_rfa'] == 6_603_710  # the notes' "about 6.6M"
  assert _EXPECTED_PARAMETERS['emnist_cnn_dfl'] == 115_646
  assert _EXPECTED_PARAMETERS['shakespeare_lstm_rfa'] == 77_405
  assert _EXPECTED_PARAMETERS['shakespeare_gru_dfl'] == 77_109


def test_linear_l2_regularisation_is_half_lambda_squared_norm():
  keras_model = paper_models.emnist_linear(l2_regularization=0.1)
  (kernel,) = keras_model.trainable_variables
  kernel.assign(tf.ones_like(kernel))
  assert float(tf.add_n(keras_model.losses)) == pytest.approx(0.05 * 62 * 784, rel=1e-6)


def test_emnist_rfa_keeps_writers_with_100_examples_and_splits_within_each(emnist_dir):
  task = emnist_papers.create_rfa_task('linear', cache_dir=emnist_dir, num_devices=None, **_TRAINING)
  assert task.name == 'emnist_linear_rfa'
  assert task.train_data.client_ids == task.personal_test_data.client_ids == _EMNIST_ELIGIBLE
  assert 'f0000_00' not in _EMNIST_ELIGIBLE and 'f0002_00' in _EMNIST_ELIGIBLE  # 99 and 100 examples
  assert task.train_data.element_type_structure == {
      'x': tf.TensorSpec([28, 28], tf.float32), 'y': tf.TensorSpec([], tf.int32)}
  assert task.client_dataset('f0002_00').element_spec == {
      'x': tf.TensorSpec([None, 28, 28], tf.float32), 'y': tf.TensorSpec([None], tf.int32)}
  assert task.device_evaluator is None
  for writer in ('f0002_00', 'f0007_00'):
    train = _tags(task.train_data.create_tf_dataset_for_client(writer))
    test = _tags(task.personal_test_data.create_tf_dataset_for_client(writer))
    assert train | test == _writer_tags(writer) and not train & test  # the writer's own examples, split
    assert {split for _, _, split in train} == {0} and {split for _, _, split in test} == {1}  # TFF's split
  corrupted = next(iter(task.corrupt_train(task.train_data.create_tf_dataset_for_client('f0002_00'))))
  clean = next(iter(task.train_data.create_tf_dataset_for_client('f0002_00')))
  np.testing.assert_allclose(corrupted['x'], 1.0 - clean['x'])  # RFA's negative image
  assert int(corrupted['y']) == int(clean['y'])


def test_emnist_rfa_samples_its_devices_as_the_authors_code(emnist_dir):
  task = emnist_papers.create_rfa_task('cnn', cache_dir=emnist_dir, num_devices=4, **_TRAINING)
  assert task.train_data.client_ids == sorted(random.Random(25).sample(_EMNIST_ELIGIBLE, 4))
  assert _parameter_count(task.model_fn()) == _EXPECTED_PARAMETERS['emnist_cnn_rfa']
  with pytest.raises(ValueError, match='cannot sample 11 devices from 10'):
    emnist_papers.create_rfa_task('linear', cache_dir=emnist_dir, num_devices=11, **_TRAINING)


def test_emnist_dfl_splits_by_writer(emnist_dir):
  task = emnist_papers.create_dfl_task('cnn', cache_dir=emnist_dir, **_TRAINING)
  groups = task.device_evaluator._groups  # pylint: disable=protected-access
  train_writers, test_writers = groups['train'].client_data.client_ids, groups['eval'].client_data.client_ids
  assert train_writers == task.train_data.client_ids
  assert len(train_writers) == 2 and len(test_writers) == 3  # half of 10 eligible, then half and half
  assert not set(train_writers) & set(test_writers) and set(train_writers + test_writers) <= set(_EMNIST_ELIGIBLE)
  assert groups['train'].weighted and not groups['eval'].weighted
  assert task.personal_test_data is None
  for writer in train_writers:  # a device's data is all its examples (TFF's train and test)
    assert _tags(task.train_data.create_tf_dataset_for_client(writer)) == _writer_tags(writer)
  again = emnist_papers.create_dfl_task('linear', cache_dir=emnist_dir, **_TRAINING)
  assert again.train_data.client_ids == train_writers  # fixed across runs and models
  assert _parameter_count(task.model_fn()) == _EXPECTED_PARAMETERS['emnist_cnn_dfl']


def test_shakespeare_windows_are_20_characters_then_the_next(shakespeare_dir):
  task = shakespeare_papers.create_dfl_task(cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  # SHORT_99 (99 examples) is dropped, EXACT_100 kept.
  assert sorted(task.train_data.client_ids + _test_devices(task)) == _SHAKESPEARE_ELIGIBLE
  assert task.train_data.element_type_structure == {
      'x': tf.TensorSpec([20], tf.int32), 'y': tf.TensorSpec([], tf.int32)}
  test_data = task.device_evaluator._groups['eval'].client_data  # pylint: disable=protected-access
  for client_data in (task.train_data, test_data):
    for role in client_data.client_ids:
      assert _windows(client_data.create_tf_dataset_for_client(role)) == _expected_windows(role)
  exact_100 = _expected_windows('EXACT_100')
  assert len(exact_100) == 100
  assert exact_100[41] == ((27,) * 19 + (0,), 28)  # 'a' x 19 and the joining space, then 'b'
  assert exact_100[-1] == ((28,) * 20, 28)
  hamlet = _expected_windows('HAMLET')
  normalised_line = 'To be, or not to be: that is the question; Caf\u00e9 ROMEO!'  # by hand
  assert len(hamlet) == 4 * len(normalised_line) + 3 - 20
  symbols = lambda text: tuple(max(0, shakespeare_papers.VOCABULARY.find(c)) for c in text)
  assert hamlet[0] == (symbols('To be, or not to be:'), 0)  # then the newline, made a space
  assert hamlet[1] == (symbols('o be, or not to be: '), symbols('t')[0])


def test_shakespeare_symbols():
  ids = shakespeare_papers.symbol_ids('aZz A\u00e9!9\n').tolist()
  assert ids == [27, 26, 52, 0, 1, 0, 0, 0, 0]  # 53 symbols: "other" 0, A-Z 1-26, a-z 27-52
  assert len(shakespeare_papers.VOCABULARY) == paper_models.SHAKESPEARE_SYMBOLS == 53


def test_shakespeare_dfl_splits_by_role(shakespeare_dir):
  task = shakespeare_papers.create_dfl_task(cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  train_roles, test_roles = task.train_data.client_ids, _test_devices(task)
  assert (len(train_roles), len(test_roles)) == (3, 4)  # 7 roles: 544 / 545 in the paper's rounding
  assert not set(train_roles) & set(test_roles)
  assert task.client_dataset(train_roles[0]).element_spec == {
      'x': tf.TensorSpec([None, 20], tf.int32), 'y': tf.TensorSpec([None], tf.int32)}
  assert _parameter_count(task.model_fn()) == _EXPECTED_PARAMETERS['shakespeare_gru_dfl']


def test_shakespeare_rfa_splits_90_10_within_each_role(shakespeare_dir):
  task = shakespeare_papers.create_rfa_task(cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  assert task.train_data.client_ids == task.personal_test_data.client_ids == _SHAKESPEARE_ELIGIBLE
  for role in ('HAMLET', 'EXACT_100'):
    expected = _expected_windows(role)
    train = _windows(task.train_data.create_tf_dataset_for_client(role))
    test = _windows(task.personal_test_data.create_tf_dataset_for_client(role))
    assert len(train) == len(expected) * 9 // 10 and len(train) + len(test) == len(expected)
    assert sorted(train + test) == sorted(expected)
    assert _is_subsequence(train, expected) and _is_subsequence(test, expected)  # text order kept
  hamlet_train = _windows(task.train_data.create_tf_dataset_for_client('HAMLET'))
  assert hamlet_train != _expected_windows('HAMLET')[:len(hamlet_train)]  # a random 90%, not the first
  again = shakespeare_papers.create_rfa_task(cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  assert _windows(again.train_data.create_tf_dataset_for_client('HAMLET')) == hamlet_train  # fixed split
  other = shakespeare_papers.create_rfa_task(
      cache_dir=shakespeare_dir, shakespeare_source='tff', split_seed=1, **_TRAINING)
  assert _windows(other.train_data.create_tf_dataset_for_client('HAMLET')) != hamlet_train
  assert _parameter_count(task.model_fn()) == _EXPECTED_PARAMETERS['shakespeare_lstm_rfa']


def test_shakespeare_corruption_reverses_the_window_and_its_next_character():
  element = {'x': tf.range(20, dtype=tf.int32), 'y': tf.constant(20, tf.int32)}
  (corrupted,) = list(shakespeare_papers.reverse_windows(tf.data.Dataset.from_tensors(element)).as_numpy_iterator())
  assert corrupted['x'].tolist() == list(range(20, 0, -1)) and int(corrupted['y']) == 0


def test_without_the_file_the_loader_would_download_and_the_task_says_so(tmp_path):
  with pytest.raises(RuntimeError, match='Could not load EMNIST.*AssertionError'):
    emnist_papers.create_dfl_task('linear', cache_dir=str(tmp_path), **_TRAINING)
  with pytest.raises(RuntimeError, match='Could not load Shakespeare.*AssertionError'):
    shakespeare_papers.create_rfa_task(cache_dir=str(tmp_path), shakespeare_source='tff', **_TRAINING)


def test_registered_names_and_synthetic_data(emnist_dir):
  names = emnist_papers.TASK_NAMES + shakespeare_papers.TASK_NAMES
  assert set(names) <= set(tasks.TASK_NAMES) and len(set(names)) == 6
  task = tasks.create_task('emnist_linear_dfl', cache_dir=emnist_dir, **_TRAINING)
  assert task.name == 'emnist_linear_dfl' and task.device_evaluator is not None
  for name in ('shakespeare_lstm_rfa', 'emnist_cnn_rfa'):  # a small random file, through the same loader
    synthetic = tasks.create_task(name, use_synthetic_data=True, **_TRAINING)
    assert synthetic.train_data.client_ids and synthetic.personal_test_data is not None


def test_one_round_of_rfa_on_emnist_linear(emnist_dir, tmp_path):
  task = emnist_papers.create_rfa_task('linear', cache_dir=emnist_dir, num_devices=None, **_TRAINING)
  process = algorithms.build_learning_process('rfa', task.model_fn, algorithms.AlgorithmConfig())
  summary = training_loop.run_training(
      process, task, task.client_dataset, total_rounds=1, clients_per_round=2, rounds_per_eval=1, seed=0,
      output_dir=str(tmp_path), show_progress=False,
  )
  assert 0 <= summary['eval/accuracy'] <= 1 and np.isfinite(summary['personal/loss_mean'])


def test_one_round_of_delta_fl_on_shakespeare_gru(shakespeare_dir, tmp_path):
  task = tasks.create_task('shakespeare_gru_dfl', cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  process = algorithms.build_learning_process('delta_fl', task.model_fn, algorithms.AlgorithmConfig())
  summary = training_loop.run_training(
      process, task, task.client_dataset, total_rounds=1, clients_per_round=2, rounds_per_eval=1, seed=0,
      output_dir=str(tmp_path), show_progress=False,
  )
  assert np.isfinite(summary['train/loss_p90']) and 0 <= summary['eval/error_p90'] <= 1


def _saved_weights(output_dir) -> tff.learning.models.ModelWeights:
  """The final global model the runner wrote to `output_dir/model_weights.npz`."""
  arrays = np.load(f'{output_dir}/model_weights.npz')
  collect = lambda kind: [arrays[f'{kind}_{i}'] for i in range(sum(k.startswith(kind) for k in arrays.files))]
  return tff.learning.models.ModelWeights(collect('trainable'), collect('non_trainable'))


@pytest.mark.parametrize('name, algorithm', [('emnist_linear_rfa', 'fedavg'), ('shakespeare_gru_dfl', 'delta_fl')])
def test_the_runner_scores_the_pooled_test_examples_in_the_per_device_pass(name, algorithm, emnist_dir,
                                                                            shakespeare_dir, tmp_path):
  """`eval/*` of a paper task comes from the per-device pass over the same test examples (the pooled group's
  summed states, `Task.pooled_evaluation_group`), not from a second pass: `evaluate` is never called, and the
  metrics equal what it gives on the final model to float tolerance (`num_batches` counts per-device batches)."""
  if name.startswith('emnist'):  # every one of the file's writers (the task's default samples 1,000)
    task = emnist_papers.create_rfa_task('linear', cache_dir=emnist_dir, num_devices=None, **_TRAINING)
  else:
    task = tasks.create_task(name, cache_dir=shakespeare_dir, shakespeare_source='tff', **_TRAINING)
  assert task.pooled_evaluation_group == ('personal' if name.endswith('_rfa') else 'eval')

  def second_pass(model_weights):
    raise AssertionError('the pooled test examples were scored a second time')

  process = algorithms.build_learning_process(algorithm, task.model_fn, algorithms.AlgorithmConfig())
  summary = training_loop.run_training(
      process, dataclasses.replace(task, evaluate=second_pass), task.client_dataset, total_rounds=1,
      clients_per_round=2, rounds_per_eval=1, seed=0, output_dir=str(tmp_path), show_progress=False,
  )
  expected = task.evaluate(_saved_weights(tmp_path))
  assert {key for key in summary if key.startswith('eval/') and '/error' not in key and '/loss_' not in key} == {
      f'eval/{key}' for key in expected}
  for key, value in expected.items():
    if key != 'num_batches':
      assert summary[f'eval/{key}'] == pytest.approx(value, rel=1e-5), key


def test_a_sample_of_test_devices_leaves_the_pooled_evaluation_to_its_own_pass(shakespeare_dir):
  task = tasks.create_task('shakespeare_gru_dfl', cache_dir=shakespeare_dir, shakespeare_source='tff',
                           max_evaluated_devices=1, **_TRAINING)
  assert task.pooled_evaluation_group is None  # 'eval' holds a sample, `evaluate` every test device
