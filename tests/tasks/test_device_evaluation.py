"""Per-device evaluation against NumPy: the digits MLP evaluated by hand, percentiles by NumPy's quantiles."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import base
from tff_robust.tasks import digits
from tff_robust.tasks import evaluation
from tff_robust.tasks import paper_models
from tff_robust.tasks import tff_baselines
from tests.simulation import numpy_classifiers


def _numpy_mlp_metrics(weights, x, y):
  logits = numpy_classifiers.mlp_logits(weights, x)
  return numpy_classifiers.mean_cross_entropy(logits, y), numpy_classifiers.error_rate(logits, y)


def test_every_digits_device_is_evaluated_on_its_own_data():
  task = digits.create_task(client_epochs=1, client_batch_size=16, seed=0)
  model_weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  results = task.device_evaluator(model_weights)
  clients, (x_test, y_test) = digits.load_client_arrays()
  test_devices = digits.split_test_devices(x_test, y_test)
  for group, arrays in (('train', clients), ('eval', test_devices)):
    metrics = results[group]
    assert metrics.device_ids == sorted(arrays)
    for index, device_id in enumerate(metrics.device_ids):
      x, y = arrays[device_id]
      loss, error = _numpy_mlp_metrics(model_weights.trainable, x, y)
      assert metrics.num_examples[index] == len(y)
      assert metrics.loss[index] == pytest.approx(loss, rel=1e-4)
      assert metrics.error[index] == pytest.approx(error, abs=1e-6)
  assert results['train'].weighted and not results['eval'].weighted


# Batches of 256 (as the paper tasks evaluate): several batches with a partial last one, no example, one
# example, exactly one full batch, one partial batch, three batches.
_DEVICE_SIZES = collections.OrderedDict(a=300, b=0, c=1, d=256, e=17, f=513)
_EVAL_BATCH = 256


def _devices_of_sizes(x, y):
  """({device: (x, y)}, ClientData of them): consecutive slices of (x, y) of `_DEVICE_SIZES`, served by a
  `serializable_dataset_fn` (TestClientData refuses a device without example)."""
  ends = np.cumsum(list(_DEVICE_SIZES.values()))
  arrays = {device: (x[end - size:end], y[end - size:end])
            for (device, size), end in zip(_DEVICE_SIZES.items(), ends)}
  table = lambda values: tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(list(_DEVICE_SIZES), tf.constant(values, tf.int64)), default_value=-1
  )
  starts, sizes = table(ends - list(_DEVICE_SIZES.values())), table(list(_DEVICE_SIZES.values()))
  pooled = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y))
  def dataset_fn(device):
    device = tf.convert_to_tensor(device)
    return pooled.skip(starts.lookup(device)).take(sizes.lookup(device))
  return arrays, tff.simulation.datasets.ClientData.from_clients_and_tf_fn(list(_DEVICE_SIZES), dataset_fn)


def _assert_equals_device_by_device(model_fn, x, y, logits_of):
  """One-pass DeviceEvaluator == `logits_of(weights, x)` scored by NumPy, and == the one-call-per-device
  path (PersonalEvaluator with the same weights for every device), on devices of `_DEVICE_SIZES`."""
  arrays, client_data = _devices_of_sizes(x, y)
  weights = tff.learning.models.ModelWeights.from_model(model_fn())
  batch = lambda dataset: dataset.batch(_EVAL_BATCH)
  evaluator = evaluation.DeviceEvaluator(model_fn, {'eval': evaluation.DeviceGroup(client_data, batch, False)}, {})
  one_pass = evaluator(weights)['eval']
  assert one_pass.device_ids == list(_DEVICE_SIZES)
  np.testing.assert_array_equal(one_pass.num_examples, list(_DEVICE_SIZES.values()))
  for index, (device, (x_device, y_device)) in enumerate(arrays.items()):
    if not len(y_device):  # no example: no loss or error is defined
      assert np.isnan(one_pass.loss[index]) and np.isnan(one_pass.error[index])
      continue
    logits = logits_of(weights, x_device)
    assert one_pass.loss[index] == pytest.approx(numpy_classifiers.mean_cross_entropy(logits, y_device), rel=1e-4)
    assert one_pass.error[index] == pytest.approx(numpy_classifiers.error_rate(logits, y_device), abs=1e-6)
  personal = evaluation.PersonalEvaluator(model_fn, client_data, {}, batch_size=_EVAL_BATCH)
  per_device = personal(lambda device: weights)['personal']
  np.testing.assert_array_equal(one_pass.num_examples, per_device.num_examples)
  np.testing.assert_allclose(one_pass.loss, per_device.loss, rtol=1e-6)  # NaN == NaN for the empty device
  np.testing.assert_allclose(one_pass.error, per_device.error, rtol=1e-6)
  one_model = personal.one_model(weights)['personal']  # the runner's personal metrics of a global model
  assert one_model.device_ids == per_device.device_ids and not one_model.weighted
  np.testing.assert_array_equal(one_model.num_examples, per_device.num_examples)
  np.testing.assert_allclose(one_model.loss, per_device.loss, rtol=1e-6)
  np.testing.assert_allclose(one_model.error, per_device.error, rtol=1e-6)
  assert per_device.pooled is None  # each device may have its own model there: no pooled metrics
  _assert_pooled_equals_one_pass_over_all_examples(model_fn, x, y, weights, logits_of, one_pass, one_model)
  summary = evaluation.distribution_summary({'eval': one_pass})
  assert summary['eval/loss_num_nonfinite'] == summary['eval/error_num_nonfinite'] == 1
  assert summary['eval/error_mean'] == pytest.approx(np.nanmean(one_pass.error))


def _assert_pooled_equals_one_pass_over_all_examples(model_fn, x, y, weights, logits_of, *groups):
  """Each group's `pooled` (its devices' summed metric states, finalized once) == `CentralizedEvaluator` over
  every example pooled in batches that cross devices, and == NumPy on all of (x, y); only `num_batches`
  differs: it counts each device's own batches."""
  pooled_pass = evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x, y, _EVAL_BATCH), {})(
      weights)
  logits = logits_of(weights, x)
  device_batches = sum(-(-size // _EVAL_BATCH) for size in _DEVICE_SIZES.values())
  for group in groups:
    assert set(group.pooled) == set(pooled_pass)
    for name, value in pooled_pass.items():
      if name == 'num_batches':
        assert group.pooled[name] == device_batches and value == -(-len(y) // _EVAL_BATCH)
      else:
        assert group.pooled[name] == pytest.approx(value, rel=1e-6), name
    assert group.pooled['num_examples'] == len(y)
    assert group.pooled['loss'] == pytest.approx(numpy_classifiers.mean_cross_entropy(logits, y), rel=1e-4)
    accuracy = next(value for name, value in group.pooled.items() if name.endswith('accuracy'))
    assert 1.0 - accuracy == pytest.approx(numpy_classifiers.error_rate(logits, y), abs=1e-6)


def test_indexed_batches_are_each_devices_own_batches_in_order():
  rng = np.random.default_rng(2)
  x = rng.normal(size=(sum(_DEVICE_SIZES.values()), 3)).astype(np.float32)
  arrays, client_data = _devices_of_sizes(x, np.arange(len(x), dtype=np.int32))
  group = evaluation.DeviceGroup(client_data, lambda dataset: dataset.batch(_EVAL_BATCH), weighted=False)
  batches = list(evaluation.indexed_batches(group).as_numpy_iterator())
  expected = [(index, x_device[start:start + _EVAL_BATCH], y_device[start:start + _EVAL_BATCH])
              for index, (x_device, y_device) in enumerate(arrays.values())
              for start in range(0, len(y_device), _EVAL_BATCH)]
  assert [index for index, _ in batches] == [index for index, _, _ in expected]
  for (_, batch), (_, x_batch, y_batch) in zip(batches, expected):
    np.testing.assert_array_equal(batch['x'], x_batch)
    np.testing.assert_array_equal(batch['y'], y_batch)


def test_indexed_batches_keep_a_tuple_batch_as_one_tuple():
  """TFF's baseline tasks batch (x, y) tuples, which `Dataset.map` passes as two arguments."""
  x = np.arange(sum(_DEVICE_SIZES.values()), dtype=np.float32)
  _, client_data = _devices_of_sizes(x, x.astype(np.int32))
  as_tuples = lambda dataset: dataset.map(lambda example: (example['x'], example['y'])).batch(_EVAL_BATCH)
  batches = list(evaluation.indexed_batches(evaluation.DeviceGroup(client_data, as_tuples, weighted=False))
                 .as_numpy_iterator())
  assert [index for index, _ in batches] == [0, 0, 2, 3, 4, 5, 5, 5]
  for _, (x_batch, y_batch) in batches:
    np.testing.assert_array_equal(x_batch.astype(np.int32), y_batch)
  np.testing.assert_array_equal(np.concatenate([x_batch for _, (x_batch, _) in batches]), x)


def test_one_pass_evaluation_equals_numpy_and_device_by_device_for_an_mlp():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(sum(_DEVICE_SIZES.values()), digits.NUM_FEATURES)).astype(np.float32)
  y = rng.integers(0, 10, len(x)).astype(np.int32)
  _assert_equals_device_by_device(
      digits.model_fn, x, y, lambda weights, x: numpy_classifiers.mlp_logits(weights.trainable, x)
  )


def test_one_pass_evaluation_equals_keras_and_device_by_device_for_the_shakespeare_gru():
  rng = np.random.default_rng(1)
  num_symbols = paper_models.SHAKESPEARE_SYMBOLS
  x = rng.integers(0, num_symbols, (sum(_DEVICE_SIZES.values()), paper_models.SEQUENCE_LENGTH)).astype(np.int32)
  y = rng.integers(0, num_symbols, len(x)).astype(np.int32)
  keras_model = paper_models.shakespeare_gru_dfl()

  def keras_logits(weights, x):
    weights.assign_weights_to(keras_model)
    return keras_model(x, training=False).numpy().astype(np.float64)

  model_fn = paper_models.classifier_model_fn(paper_models.shakespeare_gru_dfl, paper_models.shakespeare_input_spec())
  _assert_equals_device_by_device(model_fn, x, y, keras_logits)


def test_test_devices_partition_the_held_out_set_and_never_train():
  clients, (x_test, y_test) = digits.load_client_arrays()
  test_devices = digits.split_test_devices(x_test, y_test)
  assert sum(len(y) for _, y in test_devices.values()) == len(y_test)
  assert not set(test_devices) & set(clients)
  pooled = np.concatenate([x for x, _ in test_devices.values()])
  np.testing.assert_array_equal(np.sort(pooled, axis=0), np.sort(x_test, axis=0))  # exactly the held-out set
  assert min(len(y) for _, y in test_devices.values()) >= 10


def test_distribution_summary_matches_numpy_quantiles():
  rng = np.random.default_rng(0)
  loss, error = rng.lognormal(size=25), rng.uniform(size=25)
  counts = rng.integers(5, 50, 25).astype(float)
  loss[3] = np.nan
  results = {
      'train': evaluation.DeviceMetrics(list(range(25)), counts, loss, error, weighted=True),
      'eval': evaluation.DeviceMetrics(list(range(25)), counts, loss, error, weighted=False),
  }
  summary = evaluation.distribution_summary(results)
  finite = np.isfinite(loss)
  assert summary['train/loss_num_nonfinite'] == 1
  assert summary['train/loss_mean'] == pytest.approx(np.average(loss[finite], weights=counts[finite]))
  assert summary['eval/error_mean'] == pytest.approx(error.mean())
  for tau in evaluation.PERCENTILES:
    assert summary[f'eval/error_p{tau}'] == np.quantile(error, tau / 100, method='inverted_cdf')
    assert summary[f'train/loss_p{tau}'] == pytest.approx(np.quantile(
        np.repeat(loss[finite], counts[finite].astype(int)), tau / 100, method='inverted_cdf'))


def test_tff_task_clients_split_into_disjoint_training_and_test_devices():
  client_data = tff.simulation.datasets.TestClientData({f'c{i}': [float(i)] for i in range(10)})
  train, test = tff_baselines.split_by_device(client_data)
  assert len(test.client_ids) == 2 and len(train.client_ids) == 8
  assert set(train.client_ids) | set(test.client_ids) == set(client_data.client_ids)
  assert not set(train.client_ids) & set(test.client_ids)
  single = tff.simulation.datasets.TestClientData({'only': [1.0]})
  assert tff_baselines.split_by_device(single) == (single, None)



def test_bad_split_arguments_are_named():
  _, (x_test, y_test) = digits.load_client_arrays()
  with pytest.raises(ValueError, match='num_devices must be an integer >= 1'):
    digits.split_test_devices(x_test, y_test, num_devices=0)
  client_data = tff.simulation.datasets.TestClientData({f'c{i}': [float(i)] for i in range(4)})
  with pytest.raises(ValueError, match=r'test_fraction must be in \(0, 1\)'):
    tff_baselines.split_by_device(client_data, test_fraction=1.0)


def test_personal_test_data_follows_each_clients_label_mixture():
  clients, (x_test, y_test) = digits.load_client_arrays()
  personal = digits.split_personal_test_data(clients, x_test, y_test)
  assert sorted(personal) == sorted(clients)
  assert sum(len(y) for _, y in personal.values()) == len(y_test)  # every held-out example, once
  for client_id, (_, y) in personal.items():
    trained_labels = set(np.unique(clients[client_id][1]))
    assert set(np.unique(y)) <= trained_labels  # only labels the client has
  pooled = np.concatenate([x for x, _ in personal.values()])
  assert {row.tobytes() for row in pooled} == {row.tobytes() for row in x_test}


def test_personal_evaluator_scores_each_client_with_its_own_model():
  clients, (x_test, y_test) = digits.load_client_arrays()
  arrays = digits.split_personal_test_data(clients, x_test, y_test)
  evaluator = evaluation.PersonalEvaluator(digits.model_fn, base.client_data_from_arrays(arrays), {})
  rng = np.random.default_rng(0)
  template = tff.learning.models.ModelWeights.from_model(digits.model_fn())
  models = [tff.learning.models.ModelWeights(
      trainable=[rng.normal(size=w.shape).astype(np.float32) for w in template.trainable], non_trainable=[])
      for _ in range(2)]
  model_of = {cid: models[index % 2] for index, cid in enumerate(sorted(arrays))}  # alternating weights
  results = evaluator(model_of.__getitem__)['personal']
  assert results.device_ids == sorted(arrays) and not results.weighted
  for index, client_id in enumerate(results.device_ids):
    x, y = arrays[client_id]
    loss, error = _numpy_mlp_metrics(model_of[client_id].trainable, x, y)
    assert results.loss[index] == pytest.approx(loss, rel=1e-4)
    assert results.error[index] == pytest.approx(error, abs=1e-6)


def test_evaluations_show_a_progress_bar_only_when_asked(capsys):
  clients, (x_test, y_test) = digits.load_client_arrays()
  del clients
  evaluator = evaluation.CentralizedEvaluator(digits.model_fn, base.test_dataset_from_arrays(x_test, y_test, 8), {})
  weights = tff.learning.models.ModelWeights.from_model(digits.model_fn())
  quiet = evaluator(weights)
  assert 'evaluating' not in capsys.readouterr().err
  with evaluation.progress_bars():
    shown = evaluator(weights)
  bar = capsys.readouterr().err
  total = -(-len(y_test) // 8)
  assert 'evaluating' in bar and f'/{total} ' in bar  # a bar over the evaluation's batches
  assert shown == quiet


def test_split_honest_and_corrupted_separates_the_two_parts():
  metrics = evaluation.DeviceMetrics(
      device_ids=['a', 'b', 'c', 'd'], num_examples=np.array([1.0, 2.0, 3.0, 4.0]),
      loss=np.array([0.1, 0.2, 0.3, 0.4]), error=np.array([0.0, 0.5, 1.0, 0.25]), weighted=False,
  )
  parts = evaluation.split_honest_and_corrupted('personal', metrics, frozenset({'b', 'd', 'not_a_device'}))
  assert list(parts) == ['personal_honest', 'personal_corrupted']
  assert parts['personal_honest'].device_ids == ['a', 'c'] and parts['personal_corrupted'].device_ids == ['b', 'd']
  np.testing.assert_array_equal(parts['personal_corrupted'].num_examples, [2.0, 4.0])
  np.testing.assert_array_equal(parts['personal_corrupted'].loss, [0.2, 0.4])
  summary = evaluation.distribution_summary(parts)
  assert summary['personal_honest/error_mean'] == pytest.approx(0.5)  # unweighted, as the whole group
  assert summary['personal_corrupted/error_mean'] == pytest.approx(0.375)
  assert list(evaluation.split_honest_and_corrupted('personal', metrics, frozenset())) == ['personal_honest']
