"""counting_client_work's client works are TFF's own, plus two counts, in one client call per client and round.

Reference: TFF's client works on the same cohort (an ordinary client, a client with a NaN feature whose update TFF
drops, an empty client, a client whose dataset reshuffles at each iteration); the counts are known from the cohort
(1 dropped, 1 empty).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.learning.algorithms import fed_sgd

from tests.client_data_calls import data_reading_client_maps
from tests.processes import small_model
from tff_robust.aggregators import privacy
from tff_robust.processes import client_loop
from tff_robust.processes import counting_client_work

_LOOP = client_loop.LOOP_IMPLEMENTATION
_SUM_THEN_FINALIZE = tff.learning.metrics.sum_then_finalize


def _dataset(features, labels, reshuffle=False):
  examples = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=np.asarray(features, np.float32).reshape(-1, small_model.NUM_FEATURES), y=np.asarray(labels, np.int32)
  ))
  if reshuffle:  # a new order at each iteration: training must see the same (first) one as in TFF's client work
    examples = examples.shuffle(len(labels), seed=7, reshuffle_each_iteration=True)
  return examples.batch(2)


_COHORT = [
    _dataset([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0], [3.0, 0.0, 1.0]], [1, 0, 1]),
    _dataset([[1.0, np.nan, 0.0], [2.0, 1.0, 1.0]], [0, 1]),
    _dataset(np.zeros((0, small_model.NUM_FEATURES)), []),
    _dataset([[-2.0, 1.0, 0.5], [1.0, 1.0, 1.0], [0.0, -3.0, 2.0], [2.5, 0.5, -1.0], [1.5, -0.5, 0.0]],
             [0, 1, 1, 0, 1], reshuffle=True),
]


_INITIAL_WEIGHTS = tff.learning.models.ModelWeights(
    trainable=(np.array([[0.5, -0.25], [0.1, 0.3], [-0.4, 0.2]], np.float32), np.array([0.05, -0.05], np.float32)),
    non_trainable=(),
)


def _one_round(client_work, cohort=_COHORT, weights=_INITIAL_WEIGHTS):
  return client_work.next(client_work.initialize(), [weights] * len(cohort), cohort)


def _assert_same_results(ours, theirs):
  assert len(ours) == len(theirs)
  for our_result, their_result in zip(ours, theirs):
    tf.nest.map_structure(np.testing.assert_array_equal, our_result.update, their_result.update)
    assert our_result.update_weight == their_result.update_weight


def _assert_tffs_round_plus_the_counts(ours, theirs):
  """Same arguments, results and training metrics as TFF's client work on `_COHORT`, its dropped (NaN) and
  empty clients counted, in one data-reading client call."""
  assert list(ours.next.type_signature.parameter) == list(theirs.next.type_signature.parameter)
  our_output, their_output = _one_round(ours), _one_round(theirs)
  _assert_same_results(our_output.result, their_output.result)
  np.testing.assert_equal(our_output.measurements['train'], their_output.measurements['train'])  # NaN == NaN
  assert (our_output.measurements['num_nonfinite_updates'], our_output.measurements['num_empty_datasets']) == (1, 1)
  assert data_reading_client_maps(ours.next) == 1


@pytest.mark.parametrize('weighting', [tff.learning.ClientWeighting.NUM_EXAMPLES, tff.learning.ClientWeighting.UNIFORM])
def test_model_delta_client_work_is_tffs_with_the_dropped_and_empty_clients_counted(weighting):
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.3)
  ours = counting_client_work.build_model_delta_client_work(
      small_model.model_fn, optimizer, weighting, _SUM_THEN_FINALIZE, loop_implementation=_LOOP
  )
  theirs = tff.learning.templates.build_model_delta_client_work(
      small_model.model_fn, optimizer, weighting, _SUM_THEN_FINALIZE, loop_implementation=_LOOP
  )
  _assert_tffs_round_plus_the_counts(ours, theirs)
  assert data_reading_client_maps(theirs.next) == 1


def test_secure_counts_count_the_same_and_leave_no_plain_sum():
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.3)
  weighting, secure_metrics = tff.learning.ClientWeighting.NUM_EXAMPLES, tff.learning.metrics.secure_sum_then_finalize
  ours = counting_client_work.build_model_delta_client_work(
      small_model.model_fn, optimizer, weighting, secure_metrics, loop_implementation=_LOOP,
      count_factory=tff.aggregators.SecureSumFactory(1, 0),
  )
  theirs = tff.learning.templates.build_model_delta_client_work(
      small_model.model_fn, optimizer, weighting, secure_metrics, loop_implementation=_LOOP
  )
  _assert_tffs_round_plus_the_counts(ours, theirs)
  privacy.assert_client_values_aggregated_securely(ours.next)


def test_model_delta_client_work_keeps_tffs_optimizer_hyperparameters_as_state():
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.3)
  ours = counting_client_work.build_model_delta_client_work(
      small_model.model_fn, optimizer, tff.learning.ClientWeighting.NUM_EXAMPLES, _SUM_THEN_FINALIZE,
      loop_implementation=_LOOP,
  )
  theirs = tff.learning.templates.build_model_delta_client_work(
      small_model.model_fn, optimizer, tff.learning.ClientWeighting.NUM_EXAMPLES, _SUM_THEN_FINALIZE,
      loop_implementation=_LOOP,
  )
  state = ours.initialize()
  assert state == theirs.initialize() and ours.get_hparams(state) == state
  slower = ours.set_hparams(state, collections.OrderedDict(learning_rate=0.1))
  weights = [_INITIAL_WEIGHTS] * 2
  ours_slow = ours.next(slower, weights, _COHORT[:1] + _COHORT[3:])
  theirs_slow = theirs.next(theirs.set_hparams(theirs.initialize(), slower), weights, _COHORT[:1] + _COHORT[3:])
  _assert_same_results(ours_slow.result, theirs_slow.result)


def test_client_flags_ride_with_the_update_from_the_same_call():
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.3)
  plain = counting_client_work.build_model_delta_client_work(
      small_model.model_fn, optimizer, tff.learning.ClientWeighting.NUM_EXAMPLES, _SUM_THEN_FINALIZE,
      loop_implementation=_LOOP,
  )
  flagged = counting_client_work.build_model_delta_client_work(
      small_model.model_fn, optimizer, tff.learning.ClientWeighting.NUM_EXAMPLES, _SUM_THEN_FINALIZE,
      loop_implementation=_LOOP, client_flags=True,
  )
  flags = [True, False, True, False]
  flag_datasets = [tf.data.Dataset.from_tensors(tf.constant(flag)) for flag in flags]
  flagged_output = _one_round(flagged, list(zip(_COHORT, flag_datasets)))
  plain_output = _one_round(plain)
  updates = [result.update[0] for result in flagged_output.result]
  assert [bool(result.update[1]) for result in flagged_output.result] == flags
  for update, plain_result in zip(updates, plain_output.result):
    tf.nest.map_structure(np.testing.assert_array_equal, update, plain_result.update)
  assert flagged_output.measurements == plain_output.measurements
  assert data_reading_client_maps(flagged.next) == 1


def test_an_empty_flag_dataset_reads_as_not_flagged():
  assert not counting_client_work.first_flag(tf.data.Dataset.from_tensors(tf.constant(True)).take(0))
  assert counting_client_work.first_flag(tf.data.Dataset.from_tensors(tf.constant(True)))


def _functional_model():
  inputs = tf.keras.Input(shape=(small_model.NUM_FEATURES,))
  keras_model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, kernel_initializer='glorot_uniform')(inputs))
  return tff.learning.models.functional_model_from_keras(
      keras_model, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      small_model.model_fn().input_spec,
  )


def test_functional_model_delta_client_work_is_tffs_with_the_counts():
  model = _functional_model()
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=0.3)
  ours = counting_client_work.build_functional_model_delta_client_work(
      model, optimizer, tff.learning.ClientWeighting.NUM_EXAMPLES, _SUM_THEN_FINALIZE, loop_implementation=_LOOP
  )
  theirs = tff.learning.templates.build_functional_model_delta_client_work(
      model=model, optimizer=optimizer, client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
      metrics_aggregator=_SUM_THEN_FINALIZE, loop_implementation=_LOOP,
  )
  _assert_tffs_round_plus_the_counts(ours, theirs)


def test_fed_sgd_client_work_is_tffs_with_the_counts():
  ours = counting_client_work.build_fed_sgd_client_work(
      small_model.model_fn, _SUM_THEN_FINALIZE, loop_implementation=_LOOP
  )
  theirs = fed_sgd._build_fed_sgd_client_work(  # pylint: disable=protected-access
      small_model.model_fn, _SUM_THEN_FINALIZE, loop_implementation=_LOOP
  )
  _assert_tffs_round_plus_the_counts(ours, theirs)
