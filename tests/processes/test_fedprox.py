"""FedProx (`build_fedprox_process`, the runner's `--algorithm=fedprox`) against NumPy FedProx and FedAvg,
and TFF 0.87's `build_weighted_fed_prox`, whose proximal term has the wrong sign."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.processes import composition
from tff_robust.processes import fedprox
from tff_robust.simulation import algorithms
from tff_robust.tasks import synthetic_regression
from tests.processes.regression_clients import (
    LEARNING_RATE, client_arrays, datasets, numpy_fedprox, run_learning_process, sgd,
)

_MU = 2.0


@pytest.mark.parametrize('client_weighting, example_weighted', [
    (tff.learning.ClientWeighting.NUM_EXAMPLES, True), (tff.learning.ClientWeighting.UNIFORM, False),
])
def test_fedprox_is_numpy_fedprox(client_weighting, example_weighted):
  arrays = client_arrays()
  process = fedprox.build_fedprox_process(
      synthetic_regression.model_fn, _MU, sgd(), client_weighting=client_weighting
  )
  actual = run_learning_process(process, datasets(arrays)).trainable[0]
  expected = numpy_fedprox(arrays, _MU, LEARNING_RATE, example_weighted=example_weighted)
  np.testing.assert_allclose(actual, expected, atol=1e-5)
  assert np.max(np.abs(expected - numpy_fedprox(arrays, 0.0, LEARNING_RATE, example_weighted=example_weighted))) > 1e-2
  other_weighting = numpy_fedprox(arrays, _MU, LEARNING_RATE, example_weighted=not example_weighted)
  assert np.max(np.abs(expected - other_weighting)) > 1e-3


def test_proximal_strength_0_is_tffs_fedavg_with_any_client_optimizer():
  client_datasets = datasets(client_arrays())
  adam = tff.learning.optimizers.build_adam(learning_rate=0.01)
  actual = run_learning_process(
      fedprox.build_fedprox_process(synthetic_regression.model_fn, 0.0, adam, sgd(1.0)), client_datasets
  )
  expected = run_learning_process(
      tff.learning.algorithms.build_weighted_fed_avg(synthetic_regression.model_fn, adam, sgd(1.0)), client_datasets
  )
  np.testing.assert_allclose(actual.trainable[0], expected.trainable[0], atol=1e-6)


def test_a_client_with_non_finite_features_is_left_out_and_counted():
  arrays = client_arrays()
  x, y = arrays[1]
  poisoned = (np.where(np.arange(x.shape[0])[:, None] == 0, np.nan, x).astype(np.float32), y)
  process = fedprox.build_fedprox_process(synthetic_regression.model_fn, _MU, sgd())
  state = process.initialize()
  client_datasets = datasets(arrays[:1] + [poisoned] + arrays[2:])
  output = process.next(state, client_datasets)
  assert output.metrics['client_work']['num_nonfinite_updates'] == 1
  assert output.metrics['client_work']['num_empty_datasets'] == 0
  actual = process.get_model_weights(output.state).trainable[0]
  finite = arrays[:1] + arrays[2:]
  np.testing.assert_allclose(actual, numpy_fedprox(finite, _MU, LEARNING_RATE, rounds=1), atol=1e-5)
  assert output.metrics['client_work']['train']['num_examples'] == sum(2 * len(x) for x, _ in finite)


def test_an_empty_client_is_counted_and_adds_nothing():
  arrays = client_arrays()
  process = fedprox.build_fedprox_process(synthetic_regression.model_fn, _MU, sgd())
  empty = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=arrays[0][0][:0], y=arrays[0][1][:0])
  ).batch(8)
  output = process.next(process.initialize(), datasets(arrays) + [empty])
  assert output.metrics['client_work']['num_empty_datasets'] == 1
  assert output.metrics['client_work']['num_nonfinite_updates'] == 0
  actual = process.get_model_weights(output.state).trainable[0]
  np.testing.assert_allclose(actual, numpy_fedprox(arrays, _MU, LEARNING_RATE, rounds=1), atol=1e-5)


def test_with_secure_counts_model_and_metrics_every_client_value_is_securely_summed_and_the_round_agrees():
  """`count_factory=SecureSumFactory(1, 0)`, a secure mean and secure metrics: no client value reaches the server
  but through a secure sum, and a round with a non-finite client and an empty one counts and trains as the plain
  process does; without `count_factory` the int32 [2] counts are the one plain sum left."""
  arrays = client_arrays()
  x, y = arrays[1]
  poisoned = (np.where(np.arange(x.shape[0])[:, None] == 0, np.nan, x).astype(np.float32), y)
  empty = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x[:0], y=y[:0])).batch(8)
  client_datasets = datasets(arrays[:1] + [poisoned] + arrays[2:]) + [empty]
  secure_mean = tff.aggregators.MeanFactory(
      tff.aggregators.SecureSumFactory(1e3), tff.aggregators.SecureSumFactory(1e3, 0.0), no_nan_division=True)
  arguments = dict(model_aggregator=secure_mean, metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize)
  secure = fedprox.build_fedprox_process(synthetic_regression.model_fn, _MU, sgd(),
                                         count_factory=tff.aggregators.SecureSumFactory(1, 0), **arguments)
  privacy.assert_client_values_aggregated_securely(secure.next)
  plain_counts = fedprox.build_fedprox_process(synthetic_regression.model_fn, _MU, sgd(), **arguments)
  assert [a.client_value_type for a in privacy.plain_client_aggregations(plain_counts.next)] == ['int32[2]']
  secure_output = secure.next(secure.initialize(), client_datasets)
  plain_output = plain_counts.next(plain_counts.initialize(), client_datasets)
  for output in (secure_output, plain_output):
    assert output.metrics['client_work']['num_nonfinite_updates'] == 1
    assert output.metrics['client_work']['num_empty_datasets'] == 1
  finite = arrays[:1] + arrays[2:]
  for process, output in ((secure, secure_output), (plain_counts, plain_output)):
    np.testing.assert_allclose(process.get_model_weights(output.state).trainable[0],
                               numpy_fedprox(finite, _MU, LEARNING_RATE, rounds=1), atol=1e-4)


@pytest.mark.parametrize('kwargs, message', [
    (dict(proximal_strength=-1.0), 'proximal_strength must be a finite number >= 0'),
    (dict(proximal_strength=float('nan')), 'proximal_strength'),
    (dict(proximal_strength=float('inf')), 'proximal_strength'),
    (dict(proximal_strength='0.1'), 'proximal_strength'),
    (dict(proximal_strength=0.1, client_weighting=lambda metrics: 1.0), 'client_weighting must be one of'),
])
def test_bad_arguments_are_rejected_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    fedprox.build_fedprox_process(synthetic_regression.model_fn, client_optimizer_fn=sgd(), **kwargs)


def test_the_runners_fedprox_is_numpy_fedprox_with_the_client_learning_rate_and_mu():
  """`--algorithm=fedprox`: SGD with learning rate eta on f_k + (mu/2)||w - w_t||^2, example-weighted mean."""
  arrays = client_arrays()
  config = algorithms.AlgorithmConfig(client_learning_rate=LEARNING_RATE, fedprox_mu=_MU)
  process = algorithms.build_learning_process('fedprox', synthetic_regression.model_fn, config)
  assert isinstance(process, tff.learning.templates.LearningProcess)
  actual = run_learning_process(process, datasets(arrays)).trainable[0]
  np.testing.assert_allclose(actual, numpy_fedprox(arrays, _MU, LEARNING_RATE), atol=1e-5)


@pytest.mark.parametrize('learning_rate, mu', [(0.5, 2.0), (1.0, 1.5), (-0.1, 1.0), (0.1, -1.0)])
def test_the_runners_fedprox_refuses_a_proximal_step_that_overshoots(learning_rate, mu):
  config = algorithms.AlgorithmConfig(client_learning_rate=learning_rate, fedprox_mu=mu)
  with pytest.raises(ValueError, match=r'client_learning_rate \* fedprox_mu < 1'):
    algorithms.check_settings('fedprox', config)


def test_tff_0_87_fedprox_adds_its_proximal_gradient_with_the_wrong_sign():
  """TFF's proximal client work adds mu (w_t - w), the negative of the gradient of (mu/2)||w - w_t||^2, so
  `build_weighted_fed_prox` pushes clients away from the global model: it is NumPy FedProx with -mu. This
  test fails once TFF fixes it; then `build_fedprox_process` can defer to TFF."""
  arrays = client_arrays()
  tff_fedprox = tff.learning.algorithms.build_weighted_fed_prox(
      synthetic_regression.model_fn, proximal_strength=_MU, client_optimizer_fn=sgd(), server_optimizer_fn=sgd(1.0),
  )
  actual = run_learning_process(tff_fedprox, datasets(arrays)).trainable[0]
  np.testing.assert_allclose(actual, numpy_fedprox(arrays, -_MU, LEARNING_RATE), atol=1e-5)
  assert np.max(np.abs(actual - numpy_fedprox(arrays, _MU, LEARNING_RATE))) > 1e-2


def test_tff_0_87_fedprox_is_ours_with_the_proximal_strength_negated():
  """The sign is the only difference: our client work at -mu, composed with FedAvg's parts, is TFF's
  `build_weighted_fed_prox` at mu, to 1e-6 over three rounds."""
  client_datasets = datasets(client_arrays())
  tff_fedprox = tff.learning.algorithms.build_weighted_fed_prox(
      synthetic_regression.model_fn, proximal_strength=_MU, client_optimizer_fn=sgd(), server_optimizer_fn=sgd(1.0),
  )
  negated = composition.compose_with_fedavg_parts(
      synthetic_regression.model_fn,
      fedprox.build_fedprox_client_work(
          synthetic_regression.model_fn, sgd(), -_MU, tff.learning.ClientWeighting.NUM_EXAMPLES,
          tff.learning.metrics.sum_then_finalize,
      ),
      tff.aggregators.MeanFactory(), sgd(1.0),
  )
  np.testing.assert_allclose(
      run_learning_process(negated, client_datasets).trainable[0],
      run_learning_process(tff_fedprox, client_datasets).trainable[0], atol=1e-6,
  )
