"""Sent140 through TFDS's real 'sentiment140' builder and loader, on a small Sentiment140 made here.

TFDS's own builder prepares the dataset in a temporary data_dir from two small CSV files in Sentiment140's
format (its download is pointed at them), so no network is used; the tasks then load it with `tfds.load`.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust import tasks
from tff_robust.tasks import base
from tff_robust.tasks import evaluation
from tff_robust.tasks import sent140
from tff_robust.tasks import sent140_data
from tff_robust.tasks import sent140_models
from tests.tasks import sent140_files

@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  """A TFDS data_dir holding 'sentiment140' prepared by TFDS's builder from the small CSV files."""
  return sent140_files.prepare_data_dir(
      tmp_path_factory.mktemp('sentiment140_csv'), tmp_path_factory.mktemp('tfds')
  )


@pytest.fixture(autouse=True)
def no_glove_from_the_environment(monkeypatch):
  monkeypatch.delenv(sent140.GLOVE_PATH_ENV, raising=False)


def _parameter_count(variables):
  return sum(int(np.prod(v.shape)) for v in variables)


def _labels(client_data, client_id):
  return np.array([e['y'] for e in client_data.create_tf_dataset_for_client(client_id).as_numpy_iterator()])


def test_devices_are_the_users_with_at_least_50_tweets(data_dir):
  devices = sent140_data.load_devices(data_dir)
  assert sorted(devices) == sent140_files.KEPT
  for user, pairs in sent140_files.expected_devices().items():
    texts, labels = devices[user]
    assert labels.dtype == np.int32
    assert list(zip(texts, labels.tolist())) == pairs
  assert len(devices['erin'][1]) == 48 and len(devices['heidi'][1]) == 52  # neutral dropped, both files
  assert sorted(sent140_data.load_devices(data_dir, min_tweets=100)) == ['carol']
  assert sent140_data.load_devices(data_dir, min_tweets=1000) == {}


def test_missing_data_says_how_to_provide_it(tmp_path):
  with pytest.raises(RuntimeError, match='TFDS_DATA_DIR'):
    sent140_data.load_devices(str(tmp_path))


def test_splits_within_and_by_device(data_dir):
  devices = sent140_data.load_devices(data_dir)
  train, test = sent140_data.split_within_devices(devices, seed=1)
  assert sorted(train) == sorted(test) == sent140_files.KEPT
  for user, (texts, labels) in devices.items():
    assert len(train[user][1]) == int(0.8 * len(labels))
    assert sorted(train[user][0] + test[user][0]) == sorted(texts)
    assert sorted(zip(train[user][0] + test[user][0], np.concatenate([train[user][1], test[user][1]]))) == (
        sorted(zip(texts, labels)))
  again, _ = sent140_data.split_within_devices(devices, seed=1)
  assert all(again[u][0] == train[u][0] for u in sent140_files.KEPT)
  train_devices, test_devices = sent140_data.split_by_device(devices, seed=0)
  assert len(train_devices) == 3 and len(test_devices) == 3
  assert sorted(list(train_devices) + list(test_devices)) == sent140_files.KEPT


def test_tokens_and_ids():
  assert sent140_data.tokenize("I'm SO good, really!! caf\xe9") == ["i'm", 'so', 'good', ',', 'really', '!', '!',
                                                                   'caf\xe9']
  counts = sent140_data.token_counts(['b a', 'a c', 'c'])
  assert sent140_data.most_frequent(counts) == ['a', 'c', 'b']
  assert sent140_data.most_frequent(counts, 2) == ['a', 'c']
  encoded = sent140_data.encode(['a zz b a', '---', 'c c c c c c'], ['a', 'b', 'c'], 5)
  np.testing.assert_array_equal(encoded, [[2, 1, 3, 2, 0], [1, 0, 0, 0, 0], [4, 4, 4, 4, 4]])
  assert encoded.dtype == np.int32


def test_parameter_counts_are_the_papers():
  full = sent140.VOCABULARY_SIZE + 2  # the default trainable embedding: 10,000 words, padding, out of vocabulary
  linear = sent140_models.create_keras_model('linear', num_tokens=full, sequence_length=140)
  lstm = sent140_models.create_keras_model('lstm', num_tokens=full, sequence_length=25)
  embedding = full * 50
  assert _parameter_count(linear.trainable_variables) == embedding + 50  # w in R^50, no bias
  assert _parameter_count(lstm.trainable_variables) == embedding + 4 * (50 * 50 + 50 * 50 + 50) + 51
  glove = np.ones((full, 50), np.float32)
  for kind, expected in (('linear', 50), ('lstm', 20_251)):
    model = sent140_models.create_keras_model(kind, num_tokens=full, sequence_length=25, pretrained=glove)
    assert _parameter_count(model.trainable_variables) == expected
    assert _parameter_count(model.non_trainable_variables) == embedding
  with pytest.raises(ValueError, match='pretrained must have shape'):
    sent140_models.create_keras_model('linear', num_tokens=3, sequence_length=5, pretrained=glove)


def test_linear_model_scores_the_mean_embedding_of_the_tokens():
  rng = np.random.default_rng(0)
  table = rng.normal(size=(6, 50)).astype(np.float32)
  model = sent140_models.create_keras_model('linear', num_tokens=6, sequence_length=5, pretrained=table)
  w = rng.normal(size=(50, 1)).astype(np.float32)
  model.layers[-1].kernel.assign(w)
  ids = np.array([[2, 3, 1, 0, 0], [5, 0, 0, 0, 0]], np.int32)
  expected = [table[[2, 3, 1]].mean(axis=0) @ w, table[[5]].mean(axis=0) @ w]
  np.testing.assert_allclose(model(ids).numpy(), expected, rtol=1e-5)


def test_loss_is_binary_logistic_and_a_positive_logit_predicts_1():
  model_fn = sent140_models.make_model_fn('linear', num_tokens=4, sequence_length=3,
                                          pretrained=np.ones((4, 50), np.float32))
  weights = tff.learning.models.ModelWeights.from_model(model_fn())
  weights = tff.learning.models.ModelWeights([np.full((50, 1), 0.01, np.float32)], weights.non_trainable)
  y = np.array([1, 0, 0, 1, 1], np.int32)
  x = np.array([[2, 0, 0], [3, 2, 0], [1, 1, 1], [2, 3, 1], [3, 0, 0]], np.int32)
  metrics = evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x, y), {})(weights)
  softplus = lambda z: np.log1p(np.exp(z))  # every logit is 50 * 0.01 = 0.5
  assert metrics['loss'] == pytest.approx(np.mean(np.where(y == 1, softplus(-0.5), softplus(0.5))), rel=1e-5)
  assert metrics['accuracy'] == pytest.approx(0.6)


def test_within_device_linear_task_through_the_registry_trains_one_round(data_dir, monkeypatch):
  monkeypatch.setenv('TFDS_DATA_DIR', data_dir)  # the runner's route to a data_dir
  task = tasks.create_task('sent140_linear', client_epochs=1, client_batch_size=10, seed=0)
  assert task.name == 'sent140_linear' and 'sent140_linear' in tasks.TASK_NAMES
  assert task.device_evaluator is None
  assert task.train_data.client_ids == task.personal_test_data.client_ids == sent140_files.KEPT
  (batch, *_) = task.client_dataset('alice').as_numpy_iterator()
  assert batch['x'].shape == (10, 140) and batch['x'].dtype == batch['y'].dtype == np.int32
  flipped = task.client_dataset('bob', corrupted=True)
  np.testing.assert_array_equal(
      np.sort(np.concatenate([b['y'] for b in flipped.as_numpy_iterator()])),
      np.sort(1 - _labels(task.train_data, 'bob')),
  )
  sizes = [len(_labels(task.personal_test_data, u)) for u in sent140_files.KEPT]
  assert sizes == [len(p) - int(0.8 * len(p)) for p in sent140_files.expected_devices().values()]
  initial = task.evaluate(tff.learning.models.ModelWeights.from_model(task.model_fn()))
  assert set(initial) >= {'loss', 'accuracy'} and 0.0 <= initial['accuracy'] <= 1.0
  process = tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.5)
  )
  output = process.next(process.initialize(), [task.client_dataset(u) for u in sent140_files.KEPT])
  assert output.metrics['client_work']['train']['num_examples'] == sum(int(0.8 * len(p)) for p in
                                                                       sent140_files.expected_devices().values())
  trained = task.evaluate(process.get_model_weights(output.state))
  assert np.isfinite(trained['loss'])


def test_by_device_lstm_task_trains_one_round_and_evaluates_each_device(data_dir):
  task = sent140.create_task('sent140_lstm_by_device', client_epochs=1, client_batch_size=10, seed=0,
                             data_dir=data_dir, download=False)
  assert task.personal_test_data is None
  train_ids = task.train_data.client_ids
  assert len(train_ids) == 3 and all(len(_labels(task.train_data, u)) == len(sent140_files.expected_devices()[u])
                                     for u in train_ids)
  (batch, *_) = task.client_dataset(train_ids[0]).as_numpy_iterator()
  assert batch['x'].shape == (10, 25)
  process = tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.5)
  )
  output = process.next(process.initialize(), [task.client_dataset(u) for u in train_ids])
  weights = process.get_model_weights(output.state)
  assert np.isfinite(task.evaluate(weights)['loss'])
  results = task.device_evaluator(weights)
  assert results['train'].device_ids == train_ids and results['train'].weighted
  assert sorted(results['eval'].device_ids + train_ids) == sent140_files.KEPT and not results['eval'].weighted
  np.testing.assert_array_equal(results['eval'].num_examples,
                                [len(sent140_files.expected_devices()[u]) for u in results['eval'].device_ids])


def test_glove_vectors_are_a_frozen_embedding(data_dir, tmp_path, monkeypatch):
  glove = tmp_path / 'glove.50d.txt'
  vectors = {'good': 1.0, 'tweet': 2.0, 'absent_from_the_data': 3.0, 'bad': -1.0}
  glove.write_text(''.join(f'{w} ' + ' '.join([f'{v:g}'] * 50) + '\n' for w, v in vectors.items()))
  monkeypatch.setenv(sent140.GLOVE_PATH_ENV, str(glove))
  task = sent140.create_task('sent140_linear', client_epochs=1, client_batch_size=10, seed=0,
                             data_dir=data_dir, download=False)
  model = task.model_fn()
  assert _parameter_count(model.trainable_variables) == 50
  (table,) = model.non_trainable_variables
  assert table.shape == (2 + 3, 50)  # padding, out of vocabulary, and the three GloVe words in the tweets
  np.testing.assert_array_equal(np.sort(table.numpy()[:, 0]), [-1.0, 0.0, 0.0, 1.0, 2.0])
  bad = tmp_path / 'bad.txt'
  bad.write_text('good 1 2 3\n')
  with pytest.raises(ValueError, match='expected 50 numbers'):
    sent140.create_task('sent140_linear', client_epochs=1, client_batch_size=10, seed=0, data_dir=data_dir,
                        download=False, glove_path=str(bad))
  with pytest.raises(ValueError, match='name must be one of'):
    sent140.create_task('sent140_gru', client_epochs=1, client_batch_size=10, seed=0, data_dir=data_dir)
