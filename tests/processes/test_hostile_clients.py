"""Hostile clients in every robust process: NaN or Inf features, an empty dataset, an overflowing update.

For each process, two rounds on a cohort of three honest clients, one with a NaN feature, one with an Inf
feature, one with no data and one with finite but huge features (|x| ~ 1e25: the loss of the broadcast
model is finite, ~1e25, but after one SGD step the weights are ~1e24 and the next batch's logits overflow,
so its update is not finite). After each round: every global weight (and every client state of the stateful
processes) is finite, the global model moved (the honest clients still trained, so the test cannot pass by
freezing the model), the training loss is finite (the hostile clients' metrics are left out) and the
metrics count the hostile clients exactly.

What is counted, per process:
  - NaN or Inf features make the loss and the local training non-finite, huge features the local training.
    Processes with TFF's model-delta client work (RFA, one-step RFA, FedAvg, the gather-based baselines,
    norm clipping), FedProx (whose client work leaves them out the same way) and the stateful ones (Fed+, local-only, personalized RFA) leave these three clients out
    (zero update, weight 0; a stateful client keeps its previous state) and count them in
    `client_work/num_nonfinite_updates` = 3; their robust aggregator then never sees a non-finite value,
    so its own `num_nonfinite_clients` is 0 (it is the second line of defence). Delta-FL evaluates the
    loss first: the NaN and Inf clients have a non-finite loss, are counted in
    `client_work/filter/num_nonfinite_losses` = 2 and are not kept, so they send no update; the huge-feature
    client has the cohort's largest finite loss, is kept, and its update is counted in
    `client_work/num_nonfinite_updates` = 1.
  - An empty dataset is not non-finite: it trains on nothing and sends a zero update (weight 0 under
    example weighting; Fed+'s unweighted mean gives it weight 1 and its unchanged local model, which is
    Fed+'s rule) and is counted in no non-finite metric but in `client_work/num_empty_datasets` = 1 (every
    process). The gather-based baselines are the exception by
    their documented definition: they drop and count every row that is non-finite *or has weight <= 0*, so
    their `aggregator/num_nonfinite_clients` is 4 (the NaN, Inf, overflowing and empty clients all arrive
    with weight 0) and they aggregate the 3 honest rows.
  - So the updates that counted (`counted_updates.count`, which the runner reads) are the 3 honest clients'
    in every process but Delta-FL (whose kept clients are its filter's count). A third round whose every client
    has a NaN feature counts none, in every process, and leaves the global model where it was.

The processes without TFF's client work, FedSGD (one gradient per client) and the sign processes (MtFEEL,
signSGD: every device in every round), get a cohort without the overflowing client (its finite gradient of
~1e25 is a valid FedSGD step that overflows the next round, and a valid sign): they count the NaN and Inf
clients (FedSGD in `client_work/num_nonfinite_updates`, the sign processes in `aggregator/num_nonfinite_clients`)
and the empty one, 3 updates count, and an all-NaN round counts none.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import privacy
from tff_robust.processes import delta_fl
from tff_robust.processes import fedplus
from tff_robust.processes import mtfeel
from tff_robust.processes import personalized_rfa
from tff_robust.processes import rfa
from tff_robust.processes import sign_sgd
from tff_robust.simulation import algorithms
from tff_robust.simulation import counted_updates
from tff_robust.simulation import metrics_utils
from tests.processes import small_model

_COHORT = ('honest', 'nan', 'honest', 'inf', 'empty', 'overflow', 'honest')
_NONFINITE = tuple(i for i, kind in enumerate(_COHORT) if kind in ('nan', 'inf', 'overflow'))
_ROUNDS = 2


def _client_dataset(kind, seed, num_examples=12):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, small_model.NUM_FEATURES)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  if kind == 'nan':
    x[5, 1] = np.nan
  elif kind == 'inf':
    x[2, 0] = np.inf
  elif kind == 'empty':
    x, y = x[:0], y[:0]
  elif kind == 'overflow':  # pairs of equal x with both labels: the first step's gradient is ~1e25, never 0
    x[1::2] = x[0::2]
    x *= np.float32(1e25)
    y = np.arange(num_examples, dtype=np.int32) % 2
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4)


def _cohort_data(round_num, cohort=_COHORT):
  return [_client_dataset(kind, seed=100 * round_num + i) for i, kind in enumerate(cohort)]


def _all_nan_data():
  return _cohort_data(_ROUNDS, cohort=('nan',) * len(_COHORT))


def _sgd(learning_rate=0.1):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


def _flat(weights):
  return np.concatenate([np.ravel(w) for w in weights])


# name -> (builder, expected metrics after every round). Counts as in the module docstring.
_HONEST = _COHORT.count('honest')
_TFF_CLIENT_WORK = {'client_work/num_nonfinite_updates': 3, 'counted': _HONEST}
_ROBUST_AGGREGATOR_SEES_NONE = {
    'client_work/num_nonfinite_updates': 3, 'aggregator/num_nonfinite_clients': 0, 'counted': _HONEST
}
_DELTA_FL = {
    'client_work/filter/num_nonfinite_losses': 2,
    'client_work/filter/num_clients': len(_COHORT),
    'client_work/num_nonfinite_updates': 1,
}
_GATHERING = {
    'client_work/num_nonfinite_updates': 3,
    'aggregator/num_nonfinite_clients': 4,  # weight-0 rows count too: the NaN, Inf, overflowing, empty clients
    'aggregator/num_clients_used': 3,
    'aggregator/insufficient_clients': 0,
    'counted': _HONEST,
}
# num_byzantine = 0 so that multi-Krum and Bulyan (which need 2f + 3 and 4f + 3 rows) run on the three
# honest rows; this test is about hostile data, not about Byzantine updates.
_CONFIG = algorithms.AlgorithmConfig(num_byzantine=0, trim_fraction=0.1)

_LEARNING_PROCESSES = {
    'rfa': (lambda: rfa.build_rfa_process(small_model.model_fn, _sgd()), _ROBUST_AGGREGATOR_SEES_NONE),
    'rfa_one_step': (lambda: rfa.build_rfa_process(small_model.model_fn, _sgd(), one_step=True),
                     _ROBUST_AGGREGATOR_SEES_NONE),
    'delta_fl_exact': (
        lambda: delta_fl.build_delta_fl_process(small_model.model_fn, _sgd(), conformity_level=0.5), _DELTA_FL
    ),
    'delta_fl_secure': (
        lambda: delta_fl.build_delta_fl_process(
            small_model.model_fn, _sgd(), conformity_level=0.5, quantile_method='secure', quantile_passes=5
        ),
        _DELTA_FL,
    ),
    **{
        name: (lambda name=name: algorithms.build_learning_process(name, small_model.model_fn, _CONFIG), expected)
        for name, expected in [
            ('fedavg', _TFF_CLIENT_WORK),
            ('fedprox', _TFF_CLIENT_WORK),
            ('norm_clipping', _TFF_CLIENT_WORK),
            ('coordinate_median', _GATHERING),
            ('trimmed_mean', _GATHERING),
            ('multi_krum', _GATHERING),
            ('bulyan', _GATHERING),
        ]
    },
}

_STATEFUL_PROCESSES = {
    'fedplus_avg': (
        lambda: fedplus.build_fedplus_process(small_model.model_fn, _sgd(), variant='avg', sigma=1.0), _TFF_CLIENT_WORK
    ),
    **{
        f'fedplus_{variant}': (
            lambda variant=variant: fedplus.build_fedplus_process(
                small_model.model_fn, _sgd(), variant=variant, sigma=1.0, max_iterations=5
            ),
            _ROBUST_AGGREGATOR_SEES_NONE,
        )
        for variant in ('geomed', 'comed')
    },
    'personalized_rfa': (
        lambda: personalized_rfa.build_personalized_rfa_process(small_model.model_fn, _sgd()), _ROBUST_AGGREGATOR_SEES_NONE
    ),
    'local_only': (
        lambda: algorithms.build_learning_process('local_only', small_model.model_fn, _CONFIG), _TFF_CLIENT_WORK
    ),
}


def _counts(metrics, cohort_size=len(_COHORT)) -> dict:
  """The flattened metrics, with `counted`: the updates that counted as the runner reads them."""
  flat = metrics_utils.flatten_metrics(metrics)
  return {**flat, 'counted': counted_updates.count(flat, cohort_size)}


def _check_round(name, metrics, expected, weights, previous_weights):
  assert np.all(np.isfinite(weights)), f'{name}: the global model is not finite'
  assert not np.allclose(weights, previous_weights), f'{name}: the global model did not move'
  flat = _counts(metrics)
  assert np.isfinite(flat['client_work/train/loss']), f'{name}: hostile clients reached the training loss'
  assert {key: flat[key] for key in expected} == expected, name
  assert flat['client_work/num_empty_datasets'] == _COHORT.count('empty'), name
  if 'client_work/filter/num_kept' in flat:  # Delta-FL: the filter's kept clients trained with weight > 0
    assert flat['counted'] == flat['client_work/filter/num_kept'] >= 1, name


def _check_all_nan_round(name, metrics, weights, previous_weights):
  """A cohort of NaN clients: no update counted, and the model stayed where it was."""
  assert _counts(metrics)['counted'] == 0, (name, metrics_utils.flatten_metrics(metrics))
  np.testing.assert_array_equal(weights, previous_weights, err_msg=name)


@pytest.mark.parametrize('name', sorted(_LEARNING_PROCESSES))
def test_learning_process_stays_finite_trains_and_counts_hostile_clients(name):
  build, expected = _LEARNING_PROCESSES[name]
  process = build()
  state = process.initialize()
  weights = _flat(process.get_model_weights(state).trainable)
  for round_num in range(_ROUNDS):
    output = process.next(state, _cohort_data(round_num))
    state, previous_weights = output.state, weights
    weights = _flat(process.get_model_weights(state).trainable)
    _check_round(name, output.metrics, expected, weights, previous_weights)
  output = process.next(state, _all_nan_data())
  _check_all_nan_round(name, output.metrics, _flat(process.get_model_weights(output.state).trainable), weights)


@pytest.mark.parametrize('name', sorted(_STATEFUL_PROCESSES))
def test_stateful_process_stays_finite_trains_and_counts_hostile_clients(name):
  build, expected = _STATEFUL_PROCESSES[name]
  process = build()
  state = process.initialize()
  weights = _flat(process.get_model_weights(state).trainable)
  client_states = [process.initial_client_state(state) for _ in _COHORT]
  for round_num in range(_ROUNDS):
    output = process.next(state, _cohort_data(round_num), client_states)
    state, previous_weights = output.state, weights
    weights = _flat(process.get_model_weights(state).trainable)
    _check_round(name, output.metrics, expected, weights, previous_weights)
    for i, (previous, new) in enumerate(zip(client_states, output.client_states)):
      assert np.all(np.isfinite(_flat(new))), f'{name}: client {i} ({_COHORT[i]}) has a non-finite state'
      if i in _NONFINITE:  # left out of the round: its state is kept
        np.testing.assert_array_equal(_flat(new), _flat(previous))
      elif _COHORT[i] == 'honest':
        assert not np.allclose(_flat(new), _flat(previous)), f'{name}: honest client {i} did not train'
    client_states = output.client_states
  output = process.next(state, _all_nan_data(), client_states)
  _check_all_nan_round(name, output.metrics, _flat(process.get_model_weights(output.state).trainable), weights)


_GRADIENT_COHORT = ('honest', 'nan', 'honest', 'inf', 'empty', 'honest')
_GRADIENT_PROCESSES = {  # name -> (builder, the metric counting the NaN and Inf clients)
    'fedsgd': (lambda: algorithms.build_learning_process('fedsgd', small_model.model_fn, _CONFIG),
               'client_work/num_nonfinite_updates'),
    'mtfeel': (lambda: mtfeel.build_mtfeel_process(small_model.model_fn, len(_GRADIENT_COHORT), learning_rate=0.01,
                                                   alpha_learning_rate=0.1),
               'aggregator/num_nonfinite_clients'),
    'signsgd': (lambda: sign_sgd.build_sign_sgd_process(small_model.model_fn, len(_GRADIENT_COHORT),
                                                        learning_rate=0.01),
                'aggregator/num_nonfinite_clients'),
}


def _all_models(process, state):
  """Every model the process holds, flattened: the global one, or each device's (MtFEEL)."""
  if process.get_model_weights(state) is not None:
    return _flat(process.get_model_weights(state).trainable)
  return np.concatenate([_flat(process.personal_model_weights(state, k).trainable)
                         for k in range(len(_GRADIENT_COHORT))])


@pytest.mark.parametrize('name', sorted(_GRADIENT_PROCESSES))
def test_gradient_and_sign_processes_count_hostile_clients_and_an_all_nan_round(name):
  build, nonfinite_metric = _GRADIENT_PROCESSES[name]
  process = build()
  state = process.initialize()
  cohort_size = len(_GRADIENT_COHORT)
  weights = _all_models(process, state)
  output = process.next(state, _cohort_data(0, cohort=_GRADIENT_COHORT))
  flat, moved = _counts(output.metrics, cohort_size), _all_models(process, output.state)
  assert np.all(np.isfinite(moved)) and not np.allclose(moved, weights), name
  assert flat[nonfinite_metric] == 2 and flat['client_work/num_empty_datasets'] == 1, flat
  assert flat['counted'] == _GRADIENT_COHORT.count('honest'), flat
  output = process.next(output.state, _cohort_data(1, cohort=('nan',) * cohort_size))
  assert _counts(output.metrics, cohort_size)['counted'] == 0, name
  np.testing.assert_array_equal(_all_models(process, output.state), moved, err_msg=name)


_SECURE_MEAN = tff.aggregators.MeanFactory(
    tff.aggregators.SecureSumFactory(1e3), tff.aggregators.SecureSumFactory(1e3, 0.0), no_nan_division=True)
_SECURE_STATEFUL_PROCESSES = {  # name -> (builder taking the count_factory, expected metrics after the round)
    'fedplus_avg': (lambda count: fedplus.build_fedplus_process(
        small_model.model_fn, _sgd(), variant='avg', sigma=1.0, model_aggregator=_SECURE_MEAN, count_factory=count,
        metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize), _TFF_CLIENT_WORK),
    'personalized_rfa': (lambda count: personalized_rfa.build_personalized_rfa_process(  # 1 pass: each traces
        small_model.model_fn, _sgd(), num_passes=1, mean_factory=_SECURE_MEAN, count_factory=count,
        metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize), _ROBUST_AGGREGATOR_SEES_NONE),
}


@pytest.mark.parametrize('name', sorted(_SECURE_STATEFUL_PROCESSES))
def test_with_secure_counts_a_stateful_process_sums_every_client_value_securely_and_counts_hostile_clients(name):
  """`count_factory=SecureSumFactory(1, 0)` with a secure mean and secure metrics: no client value reaches the
  server but through a secure sum (without `count_factory`, the counts are plain sums: the test fails if the
  builder drops it), and a hostile round stays finite, trains and counts as the plain processes above do."""
  build, expected = _SECURE_STATEFUL_PROCESSES[name]
  process = build(tff.aggregators.SecureSumFactory(1, 0))
  privacy.assert_client_values_aggregated_securely(process.next_computation)
  state = process.initialize()
  output = process.next(state, _cohort_data(0), [process.initial_client_state(state) for _ in _COHORT])
  _check_round(name, output.metrics, expected, _flat(process.get_model_weights(output.state).trainable),
               _flat(process.get_model_weights(state).trainable))
