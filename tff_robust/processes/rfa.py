"""Robust Federated Aggregation (RFA) as a drop-in replacement for `build_weighted_fed_avg`.

RFA (Pillutla, Kakade, Harchaoui), Algorithm 1: FedAvg whose server aggregate, eq. (3), is replaced by the
weighted geometric median of the client updates (Algorithm 2, smoothed Weiszfeld). The geometric median is
translation-equivariant, so aggregating model deltas and applying them with server SGD at learning rate 1
gives the geometric median of the client models (the paper's App. B TFF template). One-step RFA
(Algorithm 3) is one Weiszfeld step from v^(0) = 0 on the model deltas.

A client whose local training ends in a non-finite model is left out by TFF's client work (zero update,
weight 0) and counted in `client_work/num_nonfinite_updates` (`composition.build_fed_avg_process`).
"""

from typing import Optional

import tensorflow_federated as tff

from tff_robust.aggregators import geometric_median
from tff_robust.processes import composition

_DEFAULT_NUM_PASSES = 3


def rfa_aggregator(
    *,
    num_passes: Optional[int] = None,
    smoothing: float = 1e-6,
    one_step: bool = False,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> geometric_median.GeometricMedianFactory:
  """RFA's aggregator: `num_passes` (default 3) from the mean, or one step from zero if `one_step`;
  `mean_factory` and `count_factory` (its non-finite count) as `GeometricMedianFactory` takes them.

  Raises:
    ValueError: if `one_step=True` is combined with `num_passes` other than 1.
  """
  if one_step:
    if num_passes not in (None, 1):
      raise ValueError(f'one_step=True means num_passes=1 (Algorithm 3), got num_passes={num_passes}')
    num_passes = 1
  elif num_passes is None:
    num_passes = _DEFAULT_NUM_PASSES
  return geometric_median.GeometricMedianFactory(
      num_passes=num_passes,
      smoothing=smoothing,
      init='zero' if one_step else 'mean',
      mean_factory=mean_factory,
      count_factory=count_factory,
  )


def build_rfa_process(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    num_passes: Optional[int] = None,
    smoothing: float = 1e-6,
    one_step: bool = False,
    mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
    **fed_avg_kwargs,
) -> tff.learning.templates.LearningProcess:
  """Builds RFA: `tff.learning.algorithms.build_weighted_fed_avg` with geometric-median aggregation.

  Built by `composition.build_fed_avg_process`: FedAvg's parts, plus a count of non-finite client updates.

  Args:
    model_fn: as for `build_weighted_fed_avg` (a no-arg callable returning a `tff.learning.models.
      VariableModel`, or a `tff.learning.models.FunctionalModel`).
    client_optimizer_fn: a `tff.learning.optimizers.Optimizer` for local training.
    server_optimizer_fn: a `tff.learning.optimizers.Optimizer` applied to the aggregated delta; defaults to
      SGD with learning rate 1.0, which makes the new model the geometric median of the client models.
    num_passes: secure-average calls per round, >= 1. Defaults to 3 (one mean and two Weiszfeld steps, the
      paper's budget), or to 1 with `one_step=True`.
    smoothing: Weiszfeld smoothing nu > 0 (the paper uses 1e-6).
    one_step: one-step RFA (Algorithm 3): a single Weiszfeld step from zero on the model deltas.
    mean_factory: inner weighted-mean factory of every pass; defaults to an exact weighted mean. For secure
      aggregation with bounds derived from nu, the client weights and a value bound, use
      `composition.build_fed_avg_process(..., model_aggregator=SecureGeometricMedianFactory(...))` instead.
    **fed_avg_kwargs: any other keyword argument of `build_weighted_fed_avg` (`client_weighting`,
      `model_distributor`, `metrics_aggregator`, `loop_implementation`), except `model_aggregator`; and
      `composition.build_fed_avg_process`'s `count_factory`, which also sums the geometric median's non-finite
      count. With a secure `mean_factory`, `count_factory=tff.aggregators.SecureSumFactory(1, 0)` and
      `metrics_aggregator=tff.learning.metrics.secure_sum_then_finalize`, every client value reaches the server
      through a secure sum (`privacy.assert_client_values_aggregated_securely(process.next)`).

  Returns:
    A `tff.learning.templates.LearningProcess` with FedAvg's state, metrics and `get_model_weights`; the
    geometric-median measurements appear under `metrics['aggregator']`, and the number of clients whose
    update was not finite (left out with weight 0) under `metrics['client_work']['num_nonfinite_updates']`.

  Raises:
    TypeError: if `model_aggregator` is passed (RFA is defined by its aggregator).
    ValueError: if `one_step=True` is combined with `num_passes` other than 1, or an aggregator argument is
      out of range (see `GeometricMedianFactory`).
  """
  if 'model_aggregator' in fed_avg_kwargs:
    raise TypeError(
        'build_rfa_process does not take model_aggregator: RFA aggregates with GeometricMedianFactory; '
        'pass num_passes, smoothing or mean_factory instead'
    )
  aggregator = rfa_aggregator(
      num_passes=num_passes, smoothing=smoothing, one_step=one_step, mean_factory=mean_factory,
      count_factory=fed_avg_kwargs.get('count_factory'),
  )
  return composition.build_fed_avg_process(
      model_fn,
      client_optimizer_fn,
      server_optimizer_fn,
      model_aggregator=aggregator,
      **fed_avg_kwargs,
  )
