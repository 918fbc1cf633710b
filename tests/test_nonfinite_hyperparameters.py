"""Every public builder and factory refuses a NaN or infinite float hyperparameter with a ValueError naming it.

The callables are found, not listed: every public function and class of `tff_robust.processes` and
`tff_robust.aggregators` with a parameter annotated `float`, `Optional[float]` or `Sequence[float]`. Each such
parameter is given NaN, +inf and -inf (in a sequence: as one entry), the other arguments valid ones
(`_VALID_ARGUMENTS`); the call must raise ValueError before any TFF computation is built, its message naming the
parameter. A new builder with a float parameter fails `test_every_float_parameter_has_valid_arguments` until it
has its valid arguments here, so it is covered too.
"""

import importlib
import inspect
import math
import pkgutil
import typing

import numpy as np
import pytest
import tensorflow_federated as tff

import tff_robust.aggregators
import tff_robust.processes
from tests.processes import small_model

_NUM_CLIENTS = 3

# Not builders or factories: TensorFlow functions called inside computations on checked values, and the checker.
_NOT_BUILDERS = frozenset({
    'tff_robust.processes.local_training.train_locally',  # kappa, proximal_strength: inside the client work
    'tff_robust.aggregators.prox_ops.clip_factor',  # delta: DeltaMedianFactory's, inside its computation
    'tff_robust.aggregators.prox_ops.prox',  # the same
    'tff_robust.aggregators.type_checks.check_number',  # its bounds (tests/aggregators/test_type_checks.py)
})


def _sgd():
  return tff.learning.optimizers.build_sgdm(learning_rate=0.1)


def _mean():
  return tff.aggregators.MeanFactory()


# Callable -> valid arguments for every required parameter (floats at a valid value too).
_VALID_ARGUMENTS = {
    'tff_robust.processes.dde.build_dde_process': lambda: dict(
        model_fn=small_model.model_fn, num_clients=_NUM_CLIENTS, learning_rate=0.1),
    'tff_robust.processes.delta_fl.quantile_factory': lambda: dict(conformity_level=0.5, quantile_method='secure_mm'),
    'tff_robust.processes.delta_fl.build_delta_fl_process': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd(), conformity_level=0.5),
    'tff_robust.processes.constrained_attack_client_work.build_constrained_attack_client_work': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd(), alpha=0.7,
        client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
        metrics_aggregator=tff.learning.metrics.sum_then_finalize),
    'tff_robust.processes.fedplus.fedplus_aggregator': lambda: dict(variant='geomed'),
    'tff_robust.processes.fedplus.build_fedplus_process': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd(), sigma=1.0),
    'tff_robust.processes.fedprox.build_fedprox_client_work': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd(), proximal_strength=0.1,
        client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
        metrics_aggregator=tff.learning.metrics.sum_then_finalize),
    'tff_robust.processes.fedprox.build_fedprox_process': lambda: dict(
        model_fn=small_model.model_fn, proximal_strength=0.1, client_optimizer_fn=_sgd()),
    'tff_robust.processes.mtfeel.build_mtfeel_process': lambda: dict(
        model_fn=small_model.model_fn, num_clients=_NUM_CLIENTS, learning_rate=0.1, alpha_learning_rate=0.1,
        lambdas=[1.0] * _NUM_CLIENTS),
    'tff_robust.processes.personalized_rfa.build_personalized_rfa_process': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd()),
    'tff_robust.processes.rfa.rfa_aggregator': dict,
    'tff_robust.processes.rfa.build_rfa_process': lambda: dict(
        model_fn=small_model.model_fn, client_optimizer_fn=_sgd()),
    'tff_robust.processes.sign_sgd.build_sign_sgd_process': lambda: dict(
        model_fn=small_model.model_fn, num_clients=_NUM_CLIENTS, learning_rate=0.1),
    'tff_robust.aggregators.baselines.trimmed_mean_factory': lambda: dict(trim_fraction=0.1),
    'tff_robust.aggregators.baselines.norm_clipping_factory': lambda: dict(clipping_norm=1.0),
    'tff_robust.aggregators.centered_clipping.secure_mean_factory': lambda: dict(
        clip_radius=1.0, max_client_weight=10.0),
    'tff_robust.aggregators.centered_clipping.CenteredClippingFactory': lambda: dict(clip_radius=1.0),
    'tff_robust.aggregators.channels.RayleighBPSKChannel': lambda: dict(snr_db=10.0),
    'tff_robust.aggregators.channels.BlockOutageChannel': lambda: dict(snr_db=10.0),
    'tff_robust.aggregators.channels.BinarySymmetricChannel': lambda: dict(flip_probability=0.1),
    'tff_robust.aggregators.channels.create_channel': lambda: dict(name='outage'),
    'tff_robust.aggregators.delta_median.DeltaMedianFactory': lambda: dict(norm='l2', delta=0.1),
    'tff_robust.aggregators.flame.FlameFactory': dict,
    'tff_robust.aggregators.gaussian_noise.GaussianNoiseFactory': lambda: dict(inner_factory=_mean(), noise_stddev=0.1),
    'tff_robust.aggregators.gaussian_noise.noise_generator': lambda: dict(
        leaf_types=[tff.TensorType(np.float32, [2])], noise_stddev=0.1, seed=0),
    'tff_robust.aggregators.geometric_median.GeometricMedianFactory': dict,
    'tff_robust.aggregators.histogram_quantile.SecureHistogramQuantileFactory': lambda: dict(level=0.5),
    'tff_robust.aggregators.norm_clipping.NormClippingFactory': lambda: dict(clipping_norm=1.0),
    'tff_robust.aggregators.norm_filter.NormFilterFactory': lambda: dict(inner_factory=_mean(), multiplier=2.0),
    'tff_robust.aggregators.quantile.exact_quantile_factory': lambda: dict(level=0.5),
    'tff_robust.aggregators.quantile.SecureQuantileFactory': lambda: dict(level=0.5),
    'tff_robust.aggregators.secure_geometric_median.secure_sum_bounds': lambda: dict(
        value_bound=1.0, max_client_weight=10.0, smoothing=1e-6, num_elements=4),
    'tff_robust.aggregators.secure_geometric_median.SecureGeometricMedianFactory': lambda: dict(
        value_bound=1.0, max_client_weight=10.0, smoothing=1e-6),
    'tff_robust.aggregators.update_corruption.UpdateCorruptionFactory': lambda: dict(
        attack='alie', inner_factory=_mean(), alie_z=1.0),
    'tff_robust.aggregators.weak_dp.norm_bounded_dp_factory': lambda: dict(norm_bound=1.0, noise_stddev=0.1),
}


def _is_float_annotation(annotation) -> bool:
  """float, Optional[float], or a sequence of floats."""
  if annotation is float:
    return True
  arguments = typing.get_args(annotation)
  return bool(arguments) and (float in arguments or any(_is_float_annotation(a) for a in arguments))


def _float_parameters() -> dict:
  """{'module.callable': (callable, [float parameter names])} of every public builder and factory."""
  found = {}
  for package in (tff_robust.processes, tff_robust.aggregators):
    for module_info in pkgutil.iter_modules(package.__path__):
      module = importlib.import_module(f'{package.__name__}.{module_info.name}')
      for name, member in vars(module).items():
        qualified = f'{module.__name__}.{name}'
        if (name.startswith('_') or getattr(member, '__module__', None) != module.__name__
            or not callable(member) or qualified in _NOT_BUILDERS):
          continue
        try:
          parameters = inspect.signature(member).parameters.values()
        except (TypeError, ValueError):
          continue
        floats = [p.name for p in parameters if _is_float_annotation(p.annotation)]
        if floats:
          found[qualified] = (member, floats)
  return found


_FOUND = _float_parameters()


def test_the_scan_finds_the_issue_s_hyperparameters():
  names = {f'{qualified}.{parameter}' for qualified, (_, parameters) in _FOUND.items() for parameter in parameters}
  assert {
      'tff_robust.processes.rfa.build_rfa_process.smoothing',  # nu
      'tff_robust.aggregators.centered_clipping.CenteredClippingFactory.clip_radius',  # tau
      'tff_robust.processes.fedprox.build_fedprox_process.proximal_strength',  # mu
      'tff_robust.processes.fedplus.build_fedplus_process.sigma',  # sigma
      'tff_robust.processes.delta_fl.build_delta_fl_process.conformity_level',  # theta
      'tff_robust.aggregators.delta_median.DeltaMedianFactory.delta',  # delta
      'tff_robust.aggregators.baselines.trimmed_mean_factory.trim_fraction',
      'tff_robust.aggregators.channels.RayleighBPSKChannel.snr_db',
      'tff_robust.processes.mtfeel.build_mtfeel_process.lambdas',
  } <= names


def test_every_float_parameter_has_valid_arguments():
  assert set(_FOUND) <= set(_VALID_ARGUMENTS), sorted(set(_FOUND) - set(_VALID_ARGUMENTS))


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize('qualified, parameter', [
    (qualified, parameter) for qualified, (_, parameters) in sorted(_FOUND.items()) for parameter in parameters
])
def test_a_nonfinite_hyperparameter_is_refused_naming_it(qualified, parameter, value):
  member, _ = _FOUND[qualified]
  arguments = _VALID_ARGUMENTS[qualified]()
  given = arguments.get(parameter, inspect.signature(member).parameters[parameter].default)
  if isinstance(given, (list, tuple)):  # a sequence of floats: one entry non-finite
    value = [value, *given[1:]]
  arguments[parameter] = value
  with pytest.raises(ValueError, match=parameter):
    member(**arguments)


@pytest.mark.parametrize('text', ['nan', 'inf', '-inf'])
def test_every_numeric_parameter_of_an_attack_or_defence_spec_refuses_non_finite_values(text):
  """Attack and defence parameters (ALIE's z, IPM's epsilon, tau, k, ...) arrive as specs; the spec parsers name them."""
  from tff_robust.aggregators.defences import registry  # pylint: disable=g-import-not-at-top
  from tff_robust.core.attacks import catalog  # pylint: disable=g-import-not-at-top
  attack_parameters = [(info.name, p.name) for info in catalog.ATTACKS.values() for p in info.parameters
                       if p.kind is float]
  assert ('alie', 'z') in attack_parameters and ('ipm', 'eps') in attack_parameters
  for attack, parameter in attack_parameters:
    with pytest.raises(ValueError, match=f"attack '{attack}': {parameter} must be"):
      catalog.parse(f'{attack}({parameter}={text})')
  defence_parameters = [(name, p.name) for name, entry in registry.REGISTRY.items() for p in entry.params
                        if p.kind in (int, float)]
  assert ('centered_clipping', 'tau') in defence_parameters
  for component, parameter in defence_parameters:
    with pytest.raises(ValueError, match=rf'{component}\({parameter}={text}\): {parameter} must be'):
      registry.parse(f'{component}({parameter}={text})' + ('' if registry.REGISTRY[component].kind == registry.RULE
                                                               else '>mean'))
