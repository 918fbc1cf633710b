"""Superquantile FL (Delta-FL) as a drop-in replacement for `build_weighted_fed_avg`.

Laguel, Pillutla, Malick, Harchaoui, "Device Heterogeneity in Federated Learning: A Superquantile
Approach". For a conformity level theta in (0, 1], Delta-FL minimises eq. (3),
    min_{w, eta} eta + (1/theta) sum_k alpha_k (F_k(w) - eta)_+,
by alternating an eta-step (eta_t = the weighted (1 - theta)-quantile of the sampled devices' losses,
Property 7) and a w-step (one FedAvg round over the devices with F_k(w_t) >= eta_t): Algorithm 2 with the
exact quantile, Algorithm 3 with the quantile from secure averages (MM, corrected eq. 17; or, by default, the
histogram search of the notes' section 2.6, far fewer passes for the same filter), devices filtering themselves
by returning weight 0. theta = 1 keeps every device: FedAvg.

Ties: when cumulative weight equals (1 - theta) exactly at some loss, the minimisers of eq. (3) in eta form
an interval; the process takes its upper end, so the filter keeps exactly the worst theta of the weight
(e.g. three equally weighted devices at theta = 2/3 keep the two worst). Property 7's min{j : C_j >= tau}
would take the lower end and keep all three.
"""

import functools
from typing import Optional

import tensorflow_federated as tff

from tff_robust.aggregators import histogram_quantile
from tff_robust.aggregators import quantile
from tff_robust.aggregators import type_checks
from tff_robust.processes import client_loop
from tff_robust.processes import composition
from tff_robust.processes import delta_fl_client_work

QUANTILE_METHODS = ('exact', 'secure', 'secure_mm')
# Secure passes per round of each secure quantile by default: the smallest pass count whose filter agrees with the
# exact one on >= 98% of devices in every column of `python -m benchmarks.quantile_passes` (cohorts of 10 and 100,
# theta 0.8 / 0.5 / 0.1): 2 for the histogram search, 30 for MM (warm-started).
DEFAULT_QUANTILE_PASSES = {'secure': 2, 'secure_mm': 30}


def default_quantile_passes(quantile_method: str, quantile_passes: Optional[int]) -> Optional[int]:
  """`quantile_passes`, or the secure `quantile_method`'s default (`DEFAULT_QUANTILE_PASSES`) when it is None."""
  return DEFAULT_QUANTILE_PASSES.get(quantile_method) if quantile_passes is None else quantile_passes


def _check_quantile_numbers(conformity_level, quantile_smoothing) -> None:
  """theta in (0, 1]; the MM quantile's relative smoothing in (0, 1) (`quantile.SecureQuantileFactory`)."""
  type_checks.check_real_type('conformity_level', conformity_level)
  type_checks.check_number('conformity_level', conformity_level, minimum=0.0, strict=True, maximum=1.0)
  type_checks.check_real_type('quantile_smoothing', quantile_smoothing)
  type_checks.check_number(
      'quantile_smoothing', quantile_smoothing, minimum=0.0, strict=True, maximum=1.0, strict_maximum=True
  )


def quantile_factory(
    conformity_level: float,
    quantile_method: str,
    *,
    quantile_passes: Optional[int] = None,
    quantile_smoothing: float = 1e-2,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> Optional[tff.aggregators.WeightedAggregationFactory]:
  """The factory of eta_t: the (1 - theta)-quantile of the losses; None for theta = 1 (keep everyone).

  `quantile_passes`: the secure quantile's passes per round; None: its default (`DEFAULT_QUANTILE_PASSES`).
  `mean_factory` and `count_factory` (the non-finite count) go to the secure quantiles; the exact one gathers.

  Raises:
    TypeError: for a `conformity_level` or `quantile_smoothing` that is not a number.
    ValueError: for a `conformity_level` outside (0, 1] or a `quantile_smoothing` outside (0, 1) (NaN included).
  """
  _check_quantile_numbers(conformity_level, quantile_smoothing)
  if conformity_level == 1:
    return None
  if quantile_method == 'exact':
    return quantile.exact_quantile_factory(1.0 - conformity_level)
  quantile_passes = default_quantile_passes(quantile_method, quantile_passes)
  if quantile_method == 'secure':
    return histogram_quantile.SecureHistogramQuantileFactory(
        1.0 - conformity_level, num_passes=quantile_passes, mean_factory=mean_factory, count_factory=count_factory
    )
  return quantile.SecureQuantileFactory(
      1.0 - conformity_level,
      num_passes=quantile_passes,
      relative_smoothing=quantile_smoothing,
      mean_factory=mean_factory,
      count_factory=count_factory,
  )


def build_delta_fl_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    conformity_level: float,
    quantile_method: str = 'exact',
    quantile_passes: Optional[int] = None,
    quantile_smoothing: float = 1e-2,
    threshold_period: int = 1,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
    model_aggregator: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    model_distributor: Optional[tff.learning.templates.DistributionProcess] = None,
    metrics_aggregator=None,
    loop_implementation: tff.learning.LoopImplementation = client_loop.LOOP_IMPLEMENTATION,
) -> tff.learning.templates.LearningProcess:
  """Builds Delta-FL (Algorithm 2 or 3) as a `tff.learning.templates.LearningProcess`.

  Args:
    model_fn: as for `build_weighted_fed_avg`: a no-arg callable returning a `tff.learning.models.
      VariableModel`, or a `tff.learning.models.FunctionalModel`. A functional model runs as
      `tff.learning.models.model_from_functional(model_fn)` (the same weights, predictions and loss; the
      training metrics are its `loss`, since that conversion drops the functional model's own metrics).
    client_optimizer_fn: a `tff.learning.optimizers.Optimizer` for local training.
    server_optimizer_fn: a `tff.learning.optimizers.Optimizer` applied to the averaged delta of the kept
      clients; defaults to SGD with learning rate 1.0 (Algorithm 2, line 9).
    conformity_level: theta in (0, 1]; the filter keeps the devices whose loss is at least the weighted
      (1 - theta)-quantile. 1 keeps everyone (FedAvg); the paper uses 0.8, 0.5, 0.1.
    quantile_method: 'exact' (Algorithm 2: the losses are gathered at the server, which sees them),
      'secure' (`quantile_passes` secure weighted means of 258 indicators per device: the histogram search of
      `histogram_quantile.SecureHistogramQuantileFactory`) or 'secure_mm' (Algorithm 3: `quantile_passes`
      MM passes, secure weighted means of 3 scalars per device); no loss leaves a device with either.
    quantile_passes: secure passes of the quantile per round, >= 1; None (the default): 2 for 'secure' and 30
      for 'secure_mm' (warm-started from the previous round), the smallest with which each agrees with the exact
      filter on >= 98% of devices (`DEFAULT_QUANTILE_PASSES`, `benchmarks/quantile_passes.py`).
    quantile_smoothing: relative smoothing of 'secure_mm', in (0, 1).
    threshold_period: recompute eta every this many rounds (T_eta, App. C.3), >= 1; in between, devices
      filter against the stored eta with their current loss. The secure passes still run on the other
      rounds (a TFF computation cannot skip federated calls), and their result is not used.
    mean_factory: inner weighted-mean factory of the secure quantile's passes (e.g. a `SecureSumFactory`-
      backed `MeanFactory`), also the weighted mean of the kept flags (`kept_weight_share`); only with a
      secure `quantile_method`. A mean without `no_nan_division` gives a NaN share when no weight is positive.
    count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing the clients' int32 0/1 flags
      (the filter's counts, the secure quantile's non-finite count); defaults to `tff.aggregators.SumFactory()`.
      With `tff.aggregators.SecureSumFactory(1, 0)` here, a secure `quantile_method` with a secure
      `mean_factory`, a secure `model_aggregator` and `tff.learning.metrics.secure_sum_then_finalize` as
      `metrics_aggregator`, every client value reaches the server through a secure sum
      (`privacy.assert_client_values_aggregated_securely` holds for `next`).
    model_aggregator: aggregation of the kept clients' deltas; defaults to
      `tff.aggregators.MeanFactory(no_nan_division=True)`, so a round that keeps nobody is a zero update.
    client_weighting: alpha_k: `NUM_EXAMPLES` (the paper) or `UNIFORM`, for the quantile and the mean.
    model_distributor: as for `build_weighted_fed_avg`: a `tff.learning.templates.DistributionProcess`;
      defaults to `tff.learning.templates.build_broadcast_process`.
    metrics_aggregator: as for `build_weighted_fed_avg`.
    loop_implementation: as for `build_weighted_fed_avg`; default `DATASET_ITERATOR` (`client_loop`).

  Returns:
    A `LearningProcess` with FedAvg's state accessors. `metrics['client_work']['filter']` holds the
    threshold, the number and weight share of kept devices, empty-round counts, the devices whose loss was
    not finite (`num_nonfinite_losses`: left out) and the quantile's secure-average calls;
    `metrics['client_work']['num_nonfinite_updates']` the kept devices whose update was not finite (left out
    with weight 0). See `delta_fl_client_work`.

  Raises:
    TypeError: for arguments of the wrong type (e.g. a `model_fn` that is neither callable nor functional).
    ValueError: for arguments outside their range.
  """
  _check_quantile_numbers(conformity_level, quantile_smoothing)
  if quantile_method not in QUANTILE_METHODS:
    raise ValueError(f'quantile_method must be one of {QUANTILE_METHODS}, got {quantile_method!r}')
  if quantile_passes is not None:
    type_checks.check_integer('quantile_passes', quantile_passes, minimum=1)
  type_checks.check_integer('threshold_period', threshold_period, minimum=1)
  if mean_factory is not None and quantile_method == 'exact':
    raise ValueError("mean_factory is used by quantile_method='secure' or 'secure_mm' only")
  if isinstance(model_fn, tff.learning.models.FunctionalModel):
    model_fn = functools.partial(tff.learning.models.model_from_functional, model_fn)
  elif not callable(model_fn):
    raise TypeError(
        'model_fn must be a no-arg callable returning a tff.learning.models.VariableModel, or a '
        f'tff.learning.models.FunctionalModel, got {model_fn!r}'
    )
  if server_optimizer_fn is None:
    server_optimizer_fn = tff.learning.optimizers.build_sgdm(learning_rate=1.0)
  if model_aggregator is None:
    model_aggregator = tff.aggregators.MeanFactory(no_nan_division=True)
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize

  client_work = delta_fl_client_work.build_filtering_client_work(
      model_fn,
      client_optimizer_fn,
      quantile_factory=quantile_factory(
          conformity_level, quantile_method, quantile_passes=quantile_passes,
          quantile_smoothing=quantile_smoothing, mean_factory=mean_factory, count_factory=count_factory,
      ),
      uses_tolerance=quantile_method != 'exact',
      threshold_period=threshold_period,
      client_weighting=client_weighting,
      metrics_aggregator=metrics_aggregator,
      loop_implementation=loop_implementation,
      count_factory=count_factory,
      share_factory=mean_factory,
  )
  return composition.compose_with_fedavg_parts(
      model_fn, client_work, model_aggregator, server_optimizer_fn, model_distributor=model_distributor
  )
