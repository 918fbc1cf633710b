"""build_delta_fl_process against a NumPy simulation of Algorithm 2, FedAvg at theta = 1, the paper's
three-Gaussian illustration, and its secure variant's intrinsics."""

import collections
import functools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.core import superquantile
from tff_robust.processes import delta_fl

_DIMENSION = 4
_LEARNING_RATE = 0.05


_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, _DIMENSION], tf.float32), y=tf.TensorSpec([None, 1], tf.float32)
)


def _linear_keras_model():
  inputs = tf.keras.Input(shape=(_DIMENSION,))
  outputs = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer='zeros')(inputs)
  return tf.keras.Model(inputs, outputs)


def _linear_model_fn():
  return tff.learning.models.from_keras_model(
      _linear_keras_model(), loss=tf.keras.losses.MeanSquaredError(), input_spec=_INPUT_SPEC
  )


def _regression_clients(num_clients=8, seed=0):
  """Heterogeneous least squares: client k's optimum is shifted by k, its size varies."""
  rng = np.random.default_rng(seed)
  clients = []
  for k in range(num_clients):
    n = int(rng.integers(5, 20))
    x = rng.normal(size=(n, _DIMENSION)).astype(np.float32)
    y = (x @ (np.ones(_DIMENSION) * k / 2) + 0.1 * rng.normal(size=n)).astype(np.float32)[:, None]
    clients.append((x, y))
  return clients


def _dataset(x, y):
  """One full batch, one epoch: local training is one gradient step, so NumPy can replay it."""
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(len(x))


def _sgd(learning_rate):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


@functools.lru_cache(maxsize=None)
def _process(conformity_level, quantile_method='exact', threshold_period=1, quantile_passes=30):
  return delta_fl.build_delta_fl_process(
      _linear_model_fn, _sgd(_LEARNING_RATE), conformity_level=conformity_level,
      quantile_method=quantile_method, threshold_period=threshold_period, quantile_passes=quantile_passes,
  )


def _weights(process, state):
  return np.ravel(process.get_model_weights(state).trainable[0])


def _numpy_round(w, clients, theta):
  """Algorithm 2 in NumPy: losses F_k(w), eta = weighted (1-theta)-quantile (upper end), kept devices take
  one gradient step of the mean squared error, the new model is the example-weighted mean of theirs."""
  losses = np.array([np.mean((x @ w - y[:, 0]) ** 2) for x, y in clients])
  alphas = np.array([len(x) for x, _ in clients], np.float64)
  eta = superquantile.weighted_quantile(losses, alphas, 1 - theta, end='upper') if theta < 1 else -np.inf
  kept = losses >= eta
  local = [w - _LEARNING_RATE * 2 * x.T @ (x @ w - y[:, 0]) / len(x) for x, y in clients]
  new_w = sum(a * v for a, v, k in zip(alphas, local, kept) if k) / alphas[kept].sum()
  return new_w, eta, kept, alphas


@pytest.mark.parametrize('theta', [0.8, 0.5, 0.1])
def test_rounds_match_a_numpy_simulation_of_algorithm_2(theta):
  clients = _regression_clients()
  process = _process(theta)
  state = process.initialize()
  w = np.zeros(_DIMENSION)
  for _ in range(3):
    output = process.next(state, [_dataset(x, y) for x, y in clients])
    state = output.state
    w, eta, kept, alphas = _numpy_round(w, [(x.astype(np.float64), y.astype(np.float64)) for x, y in clients], theta)
    measured = output.metrics['client_work']['filter']
    assert measured['threshold'] == pytest.approx(eta, rel=1e-5)
    assert measured['num_kept'] == kept.sum()
    assert measured['kept_weight_share'] == pytest.approx(alphas[kept].sum() / alphas.sum(), rel=1e-6)
    assert alphas[kept].sum() / alphas.sum() >= theta - 1e-9  # the filter keeps at least theta of the weight
    np.testing.assert_allclose(_weights(process, state), w, rtol=1e-4, atol=1e-5)


def test_conformity_one_is_fedavg():
  clients = _regression_clients()
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(_linear_model_fn, _sgd(_LEARNING_RATE))
  process = _process(1.0)
  fedavg_state, state = fedavg.initialize(), process.initialize()
  for cohort in ([0, 1, 2], [3, 4, 5, 6], [7, 0]):
    data = [_dataset(*clients[k]) for k in cohort]
    fedavg_state = fedavg.next(fedavg_state, data).state
    output = process.next(state, data)
    state = output.state
    assert output.metrics['client_work']['filter']['num_kept'] == len(cohort)
  np.testing.assert_allclose(_weights(process, state), _weights(fedavg, fedavg_state), rtol=1e-6)
  assert np.linalg.norm(_weights(process, state)) > 0.1


def _functional_linear_model():
  return tff.learning.models.functional_model_from_keras(
      _linear_keras_model, tf.keras.losses.MeanSquaredError(), _INPUT_SPEC
  )


def test_a_functional_model_is_taken_as_build_weighted_fed_avg_takes_it():
  clients = _regression_clients()
  functional = _functional_linear_model()
  fedavg = tff.learning.algorithms.build_weighted_fed_avg(functional, _sgd(_LEARNING_RATE))
  process = delta_fl.build_delta_fl_process(functional, _sgd(_LEARNING_RATE), conformity_level=0.5)
  assert process.initialize.type_signature.result.member.global_model_weights == (
      fedavg.initialize.type_signature.result.member.global_model_weights
  )
  state, w = process.initialize(), np.zeros(_DIMENSION)
  for _ in range(2):  # the same rounds as the NumPy simulation of Algorithm 2 (and the VariableModel's)
    output = process.next(state, [_dataset(x, y) for x, y in clients])
    state = output.state
    w, eta, kept, _ = _numpy_round(w, [(x.astype(np.float64), y.astype(np.float64)) for x, y in clients], 0.5)
    assert output.metrics['client_work']['filter']['num_kept'] == kept.sum()
    assert output.metrics['client_work']['filter']['threshold'] == pytest.approx(eta, rel=1e-5)
  np.testing.assert_allclose(_weights(process, state), w, rtol=1e-4, atol=1e-5)


def test_a_model_distributor_is_used_as_build_weighted_fed_avg_uses_it():
  weights_type = tff.learning.models.weights_type_from_model(_linear_model_fn)

  @tff.federated_computation()
  def init_fn():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(init_fn.type_signature.result, tff.FederatedType(weights_type, tff.SERVER))
  def next_fn(state, weights):
    return tff.templates.MeasuredProcessOutput(
        state, tff.federated_broadcast(weights), tff.federated_value(np.int32(7), tff.SERVER)
    )

  distributor = tff.learning.templates.DistributionProcess(init_fn, next_fn)
  process = delta_fl.build_delta_fl_process(
      _linear_model_fn, _sgd(_LEARNING_RATE), conformity_level=0.5, model_distributor=distributor
  )
  clients = _regression_clients()
  output = process.next(process.initialize(), [_dataset(x, y) for x, y in clients])
  assert output.metrics['distributor'] == 7
  w, _, _, _ = _numpy_round(np.zeros(_DIMENSION), [(x.astype(np.float64), y.astype(np.float64)) for x, y in clients], 0.5)
  np.testing.assert_allclose(_weights(process, output.state), w, rtol=1e-4, atol=1e-5)


def test_secure_quantile_takes_the_same_step_as_the_exact_one():
  clients = _regression_clients()
  data = [_dataset(x, y) for x, y in clients]
  exact, secure = _process(0.5), _process(0.5, 'secure')
  exact_output = exact.next(exact.initialize(), data)
  secure_output = secure.next(secure.initialize(), data)
  assert secure_output.metrics['client_work']['filter']['num_kept'] == (
      exact_output.metrics['client_work']['filter']['num_kept'])
  np.testing.assert_allclose(
      _weights(secure, secure_output.state), _weights(exact, exact_output.state), rtol=1e-5, atol=1e-6)
  assert secure_output.metrics['client_work']['filter']['secure_average_calls'] == 30
  assert exact_output.metrics['client_work']['filter']['secure_average_calls'] == 0


def test_mm_quantile_takes_the_same_step_as_the_exact_one_and_reveals_no_loss():
  data = [_dataset(x, y) for x, y in _regression_clients()]
  exact, mm = _process(0.5), _process(0.5, 'secure_mm')
  exact_output, mm_output = exact.next(exact.initialize(), data), mm.next(mm.initialize(), data)
  assert mm_output.metrics['client_work']['filter']['num_kept'] == (
      exact_output.metrics['client_work']['filter']['num_kept'])
  np.testing.assert_allclose(
      _weights(mm, mm_output.state), _weights(exact, exact_output.state), rtol=1e-5, atol=1e-6)
  assert mm_output.metrics['client_work']['filter']['secure_average_calls'] == 30
  assert privacy.non_secure_intrinsics(mm.next) == frozenset()


def test_secure_variant_reveals_no_loss_or_update_and_the_exact_one_gathers():
  assert privacy.non_secure_intrinsics(_process(0.5, 'secure').next) == frozenset()
  assert privacy.non_secure_intrinsics(_process(0.5).next) == {'federated_aggregate'}


def _secure_mean():
  return tff.aggregators.MeanFactory(
      tff.aggregators.SecureSumFactory(1e3), tff.aggregators.SecureSumFactory(1e3), no_nan_division=True)


_SECURE_EVERYWHERE_PASSES = 8


@pytest.mark.parametrize('quantile_method', ['secure', 'secure_mm'])
def test_with_secure_factories_everywhere_every_client_value_is_securely_summed_and_the_rounds_agree(
    quantile_method):
  """The filter's counts and share, the quantile, the model mean and the metrics all secure sums; two rounds
  take the same steps and report the same counts as the default (plain-sum) factories.

  Both run 8 quantile passes, not the default 30: the property is that the secure and the plain paths agree
  pass for pass (30 passes are checked against the exact quantile above), and each pass is one more secure
  sum for TFF to trace and compile (30 passes made this the suite's slowest test)."""
  secure = delta_fl.build_delta_fl_process(
      _linear_model_fn, _sgd(_LEARNING_RATE), conformity_level=0.5, quantile_method=quantile_method,
      quantile_passes=_SECURE_EVERYWHERE_PASSES, mean_factory=_secure_mean(), count_factory=tff.aggregators.SecureSumFactory(1, 0),
      model_aggregator=_secure_mean(), metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize,
  )
  privacy.assert_client_values_aggregated_securely(secure.next)
  plain = _process(0.5, quantile_method, quantile_passes=_SECURE_EVERYWHERE_PASSES)
  assert {str(a.intrinsic) for a in privacy.plain_client_aggregations(plain.next)} == {'federated_sum'}
  data = [_dataset(x, y) for x, y in _regression_clients()]
  secure_state, plain_state = secure.initialize(), plain.initialize()
  for _ in range(2):
    secure_output, plain_output = secure.next(secure_state, data), plain.next(plain_state, data)
    secure_state, plain_state = secure_output.state, plain_output.state
    secure_filter, plain_filter = (o.metrics['client_work']['filter'] for o in (secure_output, plain_output))
    for name in ('num_clients', 'num_kept', 'num_nonfinite_losses'):
      assert secure_filter[name] == plain_filter[name], name
    assert 0 < plain_filter['num_kept'] < plain_filter['num_clients'] == 8
    np.testing.assert_allclose(secure_filter['kept_weight_share'], plain_filter['kept_weight_share'], atol=1e-5)
    np.testing.assert_allclose(_weights(secure, secure_state), _weights(plain, plain_state), atol=1e-4)


def _quantile_calls(factory) -> int:
  process = factory.create(tff.TensorType(np.float32), tff.TensorType(np.float32))
  return process.next(process.initialize(), [1.0, 2.0, 3.0], [1.0, 1.0, 1.0]).measurements['secure_average_calls']


@pytest.mark.parametrize('quantile_method, passes', [('secure', 2), ('secure_mm', 30)])
def test_each_secure_quantile_runs_its_own_default_passes(quantile_method, passes):
  # The smallest pass counts with >= 98% agreement with the exact filter (benchmarks/quantile_passes.py): the
  # histogram search's 2 would leave MM at ~88-93% (until 2026-12-05 both methods defaulted to 2).
  assert _quantile_calls(delta_fl.quantile_factory(0.5, quantile_method)) == passes
  assert delta_fl.DEFAULT_QUANTILE_PASSES[quantile_method] == passes
  assert _quantile_calls(delta_fl.quantile_factory(0.5, quantile_method, quantile_passes=3)) == 3


def test_threshold_is_recomputed_every_threshold_period_rounds():
  clients = _regression_clients()
  process = _process(0.5, threshold_period=3)
  state, thresholds = process.initialize(), []
  for _ in range(4):
    output = process.next(state, [_dataset(x, y) for x, y in clients])
    state = output.state
    thresholds.append(output.metrics['client_work']['filter']['threshold'])
  assert thresholds[0] == thresholds[1] == thresholds[2] != thresholds[3]


def test_nonfinite_losses_are_counted_and_a_round_that_keeps_nobody_is_a_no_op():
  clients = _regression_clients(num_clients=3)
  poisoned = [(np.full_like(x, np.nan), y) for x, y in clients]
  process = _process(0.5)
  state = process.initialize()
  output = process.next(state, [_dataset(x, y) for x, y in poisoned])
  measured = output.metrics['client_work']['filter']
  assert measured['num_nonfinite_losses'] == 3
  assert (measured['num_kept'], measured['empty_round'], measured['empty_rounds']) == (0, 1, 1)
  np.testing.assert_array_equal(_weights(process, output.state), _weights(process, state))
  mixed = process.next(output.state, [_dataset(*poisoned[0])] + [_dataset(x, y) for x, y in clients[1:]])
  assert mixed.metrics['client_work']['filter']['num_nonfinite_losses'] == 1
  assert mixed.metrics['client_work']['filter']['empty_rounds'] == 1
  assert np.all(np.isfinite(_weights(process, mixed.state)))


# The paper's Sec. 3 illustration: mean estimation over three equally weighted Gaussians whose means form
# an obtuse triangle (notes, section 2.8: the midpoint claim needs a non-acute triangle), moved off the
# origin so that the initial model (zero) is no vertex.
_MEANS = np.array([[0.0, 0.0], [1.0, 0.8], [4.0, 0.0]], np.float32) + np.array([0.37, -0.61], np.float32)


class _Location(tf.keras.layers.Layer):
  """Outputs one trainable point w for every input row: the mean-estimation model f(w; x) = ||x - w||^2."""

  def build(self, input_shape):
    self.location = self.add_weight(name='location', shape=(2,), initializer='zeros')

  def call(self, inputs):
    return tf.zeros_like(inputs) + self.location


def _location_model_fn():
  inputs = tf.keras.Input(shape=(2,))
  return tff.learning.models.from_keras_model(
      tf.keras.Model(inputs, _Location()(inputs)),
      loss=tf.keras.losses.MeanSquaredError(),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, 2], tf.float32), y=tf.TensorSpec([None, 2], tf.float32)
      ),
  )


def _gaussian_datasets():
  """Samples mu_k +/- z_j: unit covariance, and empirical means exactly mu_k."""
  z = np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32)
  datasets = []
  for mean in _MEANS:
    samples = np.concatenate([mean + z, mean - z])
    datasets.append(tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=samples, y=samples)).batch(len(samples)))
  return datasets


_MIDPOINT = (_MEANS[0] + _MEANS[2]) / 2


@pytest.mark.slow
@pytest.mark.parametrize('theta, expected, num_kept', [
    (0.4, _MIDPOINT, 2),
    (0.5, _MIDPOINT, 2),
    (2 / 3, _MIDPOINT, 2),  # a third of the weight sits at the quantile: the two worst are kept
    (float(np.float32(2 / 3)), _MIDPOINT, 2),
    (1.0, _MEANS.mean(axis=0), 3),
])
def test_three_gaussians_converge_to_the_longest_side_midpoint_or_the_centroid(theta, expected, num_kept):
  process = delta_fl.build_delta_fl_process(_location_model_fn, _sgd(0.5), conformity_level=theta)
  state, datasets = process.initialize(), _gaussian_datasets()
  for _ in range(40):
    output = process.next(state, datasets)
    state = output.state
  np.testing.assert_allclose(process.get_model_weights(state).trainable[0], expected, atol=1e-2)
  assert output.metrics['client_work']['filter']['num_kept'] == num_kept


@pytest.mark.slow
def test_below_one_third_one_device_is_kept_and_decaying_steps_reach_the_midpoint():
  # theta < 1/3 keeps only the worst device: the w-step is a subgradient step on max_k F_k, whose minimiser
  # is still the midpoint. Constant steps cycle between the two far vertices; a step decay converges.
  decaying = tff.learning.optimizers.schedule_learning_rate(
      _sgd(1.0), lambda round_num: 0.95 ** tf.cast(round_num, tf.float32))
  process = delta_fl.build_delta_fl_process(_location_model_fn, _sgd(0.5), decaying, conformity_level=0.2)
  state, datasets = process.initialize(), _gaussian_datasets()
  for _ in range(100):
    output = process.next(state, datasets)
    state = output.state
    assert output.metrics['client_work']['filter']['num_kept'] == 1
  np.testing.assert_allclose(process.get_model_weights(state).trainable[0], _MIDPOINT, atol=1e-2)


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(conformity_level=0.0), ValueError, r'conformity_level must be a finite number in \(0, 1\]'),
    (dict(conformity_level=1.5), ValueError, 'conformity_level must be a finite number in'),
    (dict(conformity_level='high'), TypeError, 'conformity_level must be a number'),
    (dict(conformity_level=0.5, quantile_method='approximate'), ValueError, 'quantile_method must be one of'),
    (dict(conformity_level=0.5, quantile_passes=0), ValueError, 'quantile_passes must be an integer >= 1'),
    (dict(conformity_level=0.5, threshold_period=0), ValueError, 'threshold_period must be an integer >= 1'),
    (dict(conformity_level=0.5, quantile_smoothing=2.0), ValueError, 'quantile_smoothing must be a finite number in'),
    (dict(conformity_level=0.5, mean_factory=tff.aggregators.MeanFactory()), ValueError, 'mean_factory'),
])
def test_bad_arguments_are_named(kwargs, error, message):
  with pytest.raises(error, match=message):
    delta_fl.build_delta_fl_process(_linear_model_fn, _sgd(0.1), **kwargs)


def test_public_names():
  import tff_robust  # pylint: disable=g-import-not-at-top
  assert tff_robust.processes.build_delta_fl_process is delta_fl.build_delta_fl_process
  assert tff_robust.aggregators.SecureQuantileFactory.__module__ == 'tff_robust.aggregators.quantile'
