"""The secure-aggregation check: every aggregation of client values goes through a secure-sum intrinsic.

`non_secure_intrinsics` only refuses intrinsics that gather individual values; it accepts `federated_sum`, so
it is empty for plain FedAvg too. `plain_client_aggregations` lists each aggregation of client values that
is not a secure sum, and `assert_client_values_aggregated_securely` refuses a computation with any.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import baselines
from tff_robust.aggregators import geometric_median
from tff_robust.aggregators import privacy
from tests.processes import small_model

_VALUE_TYPE = tff.to_type([(np.float32, [3]), (np.float32, [2])])
_WEIGHT_TYPE = tff.TensorType(np.float32)
_CLIENT_FLOAT = tff.FederatedType(np.float32, tff.CLIENTS)
_to_int = tff.tensorflow.computation(lambda x: tf.cast(x, tf.int32), np.float32)


def _secure_mean_factory(bound=100.0):
  return tff.aggregators.MeanFactory(
      value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=bound),
      weight_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=bound, lower_bound_threshold=0.0),
      no_nan_division=True,
  )


def test_plain_fedavg_passes_the_weak_check_but_is_reported_by_the_strong_one():
  process = tff.learning.algorithms.build_weighted_fed_avg(
      small_model.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1)
  )
  assert privacy.non_secure_intrinsics(process.next) == frozenset()  # why the weak check is not enough
  plain = privacy.plain_client_aggregations(process.next)
  assert {aggregation.intrinsic for aggregation in plain} == {'federated_sum'}
  # The model update (float32[3, 2] kernel and float32[2] bias) and its weight are summed in plain.
  summed_types = {aggregation.client_value_type for aggregation in plain}
  assert 'float32' in summed_types and any('float32[3,2]' in t for t in summed_types)
  with pytest.raises(privacy.NotSecurelyAggregatedError, match='federated_sum'):
    privacy.assert_client_values_aggregated_securely(process.next)


def test_each_plain_aggregation_of_client_values_is_reported_once():
  @tff.federated_computation(_CLIENT_FLOAT, _CLIENT_FLOAT)
  def mixed(values, weights):
    return (
        tff.federated_sum(values),
        tff.federated_mean(values),
        tff.federated_mean(values, weights),
        tff.federated_max(values),
        tff.federated_secure_sum_bitwidth(tff.federated_map(_to_int, values), 8),
        tff.federated_broadcast(tff.federated_sum(weights)),
    )

  reported = [aggregation.intrinsic for aggregation in privacy.plain_client_aggregations(mixed)]
  assert sorted(reported) == sorted(
      ['federated_sum', 'federated_mean', 'federated_weighted_mean', 'federated_max', 'federated_sum']
  )
  uris = [aggregation.intrinsic for aggregation in privacy.client_aggregations(mixed)]
  assert uris.count('federated_secure_sum_bitwidth') == 1 and len(uris) == 6


def test_a_gathering_baseline_is_reported():
  process = baselines.coordinate_median_factory().create(_VALUE_TYPE, _WEIGHT_TYPE)
  assert 'federated_aggregate' in {a.intrinsic for a in privacy.plain_client_aggregations(process.next)}


def test_mean_factory_with_secure_sums_passes_and_the_plain_one_does_not():
  secure = _secure_mean_factory().create(_VALUE_TYPE, _WEIGHT_TYPE)
  privacy.assert_client_values_aggregated_securely(secure.next)
  plain = tff.aggregators.MeanFactory().create(_VALUE_TYPE, _WEIGHT_TYPE)
  assert len(privacy.plain_client_aggregations(plain.next)) == 2  # the weighted values and the weights


def test_geometric_median_with_secure_sums_passes():
  factory = geometric_median.GeometricMedianFactory(
      smoothing=1e-2, mean_factory=_secure_mean_factory(),
      count_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=1, lower_bound_threshold=0),
  )
  process = factory.create(_VALUE_TYPE, _WEIGHT_TYPE)
  assert privacy.plain_client_aggregations(process.next) == []
  privacy.assert_client_values_aggregated_securely(process.next)
  secure_uris = {a.intrinsic for a in privacy.client_aggregations(process.next)}
  assert secure_uris == {'federated_secure_sum_bitwidth'}


def test_geometric_median_reports_what_the_default_factories_sum_in_plain():
  process = geometric_median.GeometricMedianFactory().create(_VALUE_TYPE, _WEIGHT_TYPE)
  plain = privacy.plain_client_aggregations(process.next)
  assert plain and {a.intrinsic for a in plain} == {'federated_sum'}
