"""build_rfa_process is a drop-in replacement for build_weighted_fed_avg."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.processes import rfa
from tests.processes import small_model


def _client_dataset(seed, num_examples=12):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, small_model.NUM_FEATURES)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4)


def _sgd(learning_rate=0.1):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


def _flat_weights(process, state):
  return np.concatenate([np.ravel(w) for w in process.get_model_weights(state).trainable])


def _train(process, cohorts, initial_state=None):
  state = process.initialize() if initial_state is None else initial_state
  for cohort in cohorts:
    output = process.next(state, [_client_dataset(seed) for seed in cohort])
    state = output.state
  return state, output.metrics


def test_one_client_per_round_equals_fedavg():
  """The geometric median of one point is the point, so RFA and FedAvg take identical steps."""
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(small_model.model_fn, _sgd(), _sgd(1.0))
  robust = rfa.build_rfa_process(small_model.model_fn, _sgd(), _sgd(1.0))
  initial = fedavg.initialize()
  cohorts = [[1], [2], [3]]
  fedavg_state, _ = _train(fedavg, cohorts, initial)
  rfa_state, metrics = _train(robust, cohorts, initial)
  np.testing.assert_allclose(_flat_weights(robust, rfa_state), _flat_weights(fedavg, fedavg_state), atol=1e-6)
  assert not np.allclose(_flat_weights(fedavg, fedavg_state), _flat_weights(fedavg, initial))
  assert metrics['aggregator']['secure_average_calls'] == 3


def test_same_state_type_and_accessors_as_fedavg():
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(small_model.model_fn, _sgd())
  robust = rfa.build_rfa_process(small_model.model_fn, _sgd())
  assert isinstance(robust, tff.learning.templates.LearningProcess)
  assert robust.initialize.type_signature.result.member.global_model_weights == (
      fedavg.initialize.type_signature.result.member.global_model_weights
  )
  metric_names = lambda process: tff.structure.name_list(process.next.type_signature.result.metrics.member)
  assert metric_names(robust) == metric_names(fedavg)


def test_several_clients_give_the_median_of_their_models_not_the_mean():
  robust = rfa.build_rfa_process(small_model.model_fn, _sgd(), num_passes=30)
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(small_model.model_fn, _sgd())
  initial = fedavg.initialize()
  cohort = [[4, 5, 6, 7]]
  rfa_state, metrics = _train(robust, cohort, initial)
  fedavg_state, _ = _train(fedavg, cohort, initial)
  objectives = metrics['aggregator']['objective']
  assert len(objectives) == 29 and objectives[-1] < objectives[0]  # Weiszfeld descends on g
  assert not np.allclose(_flat_weights(robust, rfa_state), _flat_weights(fedavg, fedavg_state), atol=1e-6)


def test_one_step_rfa_uses_one_secure_average():
  process = rfa.build_rfa_process(small_model.model_fn, _sgd(), one_step=True)
  state, metrics = _train(process, [[1, 2, 3]])
  assert metrics['aggregator']['secure_average_calls'] == 1
  assert np.all(np.isfinite(_flat_weights(process, state)))


def test_runs_with_secure_sum_backed_mean_and_reveals_no_client_value():
  # Uniform client weights keep the Weiszfeld weights 1/max(nu, ||v - w_i||) <= 1/nu = 100 inside the
  # secure sum's bounds, and the weighted updates inside [-100, 100].
  secure_mean = tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0),
      weight_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0, lower_bound_threshold=0.0),
      no_nan_division=True,
  )
  uniform = tff.learning.ClientWeighting.UNIFORM
  process = rfa.build_rfa_process(
      small_model.model_fn, _sgd(), smoothing=1e-2, mean_factory=secure_mean, client_weighting=uniform
  )
  plain = rfa.build_rfa_process(small_model.model_fn, _sgd(), smoothing=1e-2, client_weighting=uniform)
  initial = plain.initialize()
  state, _ = _train(process, [[1, 2, 3]], initial)
  plain_state, _ = _train(plain, [[1, 2, 3]], initial)
  np.testing.assert_allclose(_flat_weights(process, state), _flat_weights(plain, plain_state), atol=1e-4)
  assert 'federated_secure_sum_bitwidth' in privacy.intrinsic_uris(process.next)


def test_with_secure_counts_and_metrics_every_client_value_is_securely_summed_and_the_round_agrees():
  """The secure mean of the test above, plus secure counts (client work and geometric median) and metrics: no
  client value reaches the server but through a secure sum; without `count_factory` the int32 counts do."""
  secure_mean = tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0),
      weight_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=100.0, lower_bound_threshold=0.0),
      no_nan_division=True,
  )
  arguments = dict(smoothing=1e-2, mean_factory=secure_mean, client_weighting=tff.learning.ClientWeighting.UNIFORM,
                   metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize)
  secure = rfa.build_rfa_process(
      small_model.model_fn, _sgd(), count_factory=tff.aggregators.SecureSumFactory(1, 0), **arguments)
  privacy.assert_client_values_aggregated_securely(secure.next)
  counts_plain = rfa.build_rfa_process(small_model.model_fn, _sgd(), **arguments)
  assert {a.client_value_type for a in privacy.plain_client_aggregations(counts_plain.next)} == {'int32', 'int32[2]'}
  initial = counts_plain.initialize()
  state, metrics = _train(secure, [[1, 2, 3]], initial)
  plain_state, plain_metrics = _train(counts_plain, [[1, 2, 3]], initial)
  np.testing.assert_array_equal(_flat_weights(secure, state), _flat_weights(counts_plain, plain_state))
  assert metrics['client_work']['num_nonfinite_updates'] == plain_metrics['client_work']['num_nonfinite_updates'] == 0


def test_rejects_model_aggregator_and_conflicting_one_step():
  with pytest.raises(TypeError, match='model_aggregator'):
    rfa.build_rfa_process(small_model.model_fn, _sgd(), model_aggregator=tff.aggregators.MeanFactory())
  with pytest.raises(ValueError, match='num_passes'):
    rfa.build_rfa_process(small_model.model_fn, _sgd(), one_step=True, num_passes=3)
  with pytest.raises(ValueError, match='smoothing'):
    rfa.build_rfa_process(small_model.model_fn, _sgd(), smoothing=0.0)
