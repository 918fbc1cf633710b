"""Learning algorithms selectable by name (the runner's `--algorithm`)."""

import dataclasses
from typing import Optional, Union

import tensorflow_federated as tff

from tff_robust.aggregators import channels
from tff_robust.aggregators import defences
from tff_robust.aggregators.defences import registry as defence_registry
from tff_robust.aggregators import delta_median
from tff_robust.aggregators import gathering
from tff_robust.processes import composition
from tff_robust.processes import delta_fl
from tff_robust.processes import fedplus
from tff_robust.processes import fedprox
from tff_robust.processes import indexed_clients
from tff_robust.processes import mtfeel
from tff_robust.processes import personalized_rfa
from tff_robust.processes import rfa
from tff_robust.processes import sign_sgd
from tff_robust.processes import stateful_clients
from tff_robust.core.attacks import catalog
from tff_robust.simulation import algorithm_names
from tff_robust.simulation import update_corruption_process

# The names live in `algorithm_names` (no TensorFlow import, for the runner's flags).
ALGORITHM_NAMES = algorithm_names.ALGORITHM_NAMES
DEFENCE_ALGORITHM_NAMES = algorithm_names.DEFENCE_ALGORITHM_NAMES
STATEFUL_ALGORITHM_NAMES = algorithm_names.STATEFUL_ALGORITHM_NAMES
INDEXED_ALGORITHM_NAMES = algorithm_names.INDEXED_ALGORITHM_NAMES
FULL_GRADIENT_ALGORITHM_NAMES = algorithm_names.FULL_GRADIENT_ALGORITHM_NAMES
CLIENT_SCHEDULE_ALGORITHM_NAMES = algorithm_names.CLIENT_SCHEDULE_ALGORITHM_NAMES


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig:
  """Hyperparameters of every algorithm; each algorithm reads the ones it uses."""

  client_learning_rate: float = 0.1
  server_learning_rate: float = 1.0
  rfa_num_passes: int = 3
  rfa_smoothing: float = 1e-6
  personal_learning_rate: Optional[float] = None  # personalized_rfa's personal step; None: client_learning_rate
  trim_fraction: float = 0.1
  num_byzantine: int = 1
  num_selected: Optional[int] = None  # multi-Krum; None means m - num_byzantine
  clipping_norm: float = 1.0
  bucket_size: int = 2
  centered_clipping_radius: float = 1.0
  centered_clipping_iterations: int = 3
  norm_filter_multiplier: float = 2.0
  conformity_level: float = 0.5
  quantile_method: str = 'exact'
  quantile_passes: Optional[int] = None  # the secure quantile's default (delta_fl.DEFAULT_QUANTILE_PASSES)
  threshold_period: int = 1
  fedplus_sigma: float = 1.0
  fedplus_delta: float = fedplus.DEFAULT_DELTA
  local_init_mixing: float = 0.0
  fedplus_init_client_from: str = 'initial_global'
  fedplus_solver: str = 'irls'
  fedplus_max_iterations: int = delta_median.DEFAULT_MAX_ITERATIONS
  fedprox_mu: float = 0.01
  channel: str = 'none'
  snr_db: float = 10.0
  flip_probability: float = 0.0
  outage_rate: float = 1.0
  on_outage: str = 'drop'
  alpha_learning_rate: float = 0.1
  pen_scale: float = 1.0
  mtfeel_update_order: str = 'w_then_alpha'
  dde_steps: int = 20
  dde_learning_rate: float = 0.01
  dde_output: str = 'last'
  defence: Optional[str] = None  # a defence spec replacing fedavg's aggregator (`tff_robust.aggregators.defences`)

  def create_channel(self) -> channels.Channel:
    """The uplink of the sign-based algorithms (mtfeel, signsgd)."""
    return channels.create_channel(
        self.channel, snr_db=self.snr_db, flip_probability=self.flip_probability,
        outage_rate=self.outage_rate, on_outage=self.on_outage,
    )


def defence_spec(name: str, config: AlgorithmConfig) -> str:
  """The defence chain (`tff_robust.aggregators.defences`) that algorithm `name`, one of `DEFENCE_ALGORITHM_NAMES`,
  is an alias of, with the config's parameters (`--defence` replaces it for `fedavg`)."""
  gm = f'gm(passes={config.rfa_num_passes},nu={config.rfa_smoothing!r})'
  centered = f'centered_clipping(tau={config.centered_clipping_radius!r},iters={config.centered_clipping_iterations})'
  return {
      'fedavg': 'mean',
      'rfa': gm,  # `build_rfa_process`'s aggregator
      'rfa_one_step': f'gm(passes=1,nu={config.rfa_smoothing!r},init=zero)',
      'coordinate_median': 'median',
      'trimmed_mean': f'trimmed_mean(beta={config.trim_fraction!r})',
      'multi_krum': f'krum(f={config.num_byzantine},select={config.num_selected or 0})',
      'bulyan': f'bulyan(f={config.num_byzantine})',
      'norm_clipping': f'clipping(c={config.clipping_norm!r})>mean',
      'bucketing_rfa': f'bucketing(s={config.bucket_size})>{gm}',
      'centered_clipping': centered,
      'filtered_centered_clipping': f'norm_filter(k={config.norm_filter_multiplier!r})>{centered}',
  }[name]


def _chain_spec(name: str, config: AlgorithmConfig) -> str:
  """The defence chain algorithm `name` (one of `DEFENCE_ALGORITHM_NAMES`) runs: `config.defence` if set, else its
  alias's (`defence_spec`)."""
  return config.defence if config.defence is not None else defence_spec(name, config)


def model_aggregator(
    name: str, config: AlgorithmConfig, clients_per_round: Optional[int] = None, seed: int = 0
) -> Optional[tff.aggregators.WeightedAggregationFactory]:
  """The server aggregation of algorithm `name` (None for the sign-vote algorithms, which build their own).

  The `DEFENCE_ALGORITHM_NAMES` build their chain of the defence registry (`defence_spec`; `config.defence` for
  `fedavg` if set) with f = `config.num_byzantine` and the run's `seed` (the noise of `weak_dp` and `flame` unless
  their spec sets one). Chains with bucketing or ARC need `clients_per_round`.
  """
  if name in DEFENCE_ALGORITHM_NAMES:
    return defences.build_factory(_chain_spec(name, config), clients_per_round=clients_per_round,
                                  num_byzantine=config.num_byzantine, seed=seed)
  if name in ('delta_fl', 'local_only', 'fedsgd', 'fedprox'):
    return tff.aggregators.MeanFactory(no_nan_division=True)
  if name.startswith('fedplus_'):
    return fedplus.fedplus_aggregator(
        name.removeprefix('fedplus_'), config.fedplus_delta, solver=config.fedplus_solver,
        max_iterations=config.fedplus_max_iterations,
    )
  if name == 'personalized_rfa':
    return rfa.rfa_aggregator(num_passes=config.rfa_num_passes, smoothing=config.rfa_smoothing)
  if name in INDEXED_ALGORITHM_NAMES:
    return None  # the sign vote is built into the process, with the config's channel
  raise ValueError(f'algorithm must be one of {ALGORITHM_NAMES}, got {name!r}')


def _chain_rule(name: str, config: AlgorithmConfig, clients_per_round: Optional[int], seed: int):
  """The rule that ends the defence chain of `name` (after its pre-aggregators, e.g. Krum in 'clipping(c=1)>krum'),
  built alone; None for an algorithm without a chain."""
  if name not in DEFENCE_ALGORITHM_NAMES:
    return None
  chain = defences.parse(_chain_spec(name, config))
  return defences.build_factory(defences.DefenceChain((), chain.rule), clients_per_round=clients_per_round,
                                num_byzantine=config.num_byzantine, seed=seed)


def check_settings(
    name: str, config: AlgorithmConfig, *, clients_per_round: Optional[int] = None,
    update_attack: Optional[str] = None, seed: int = 0,
) -> Optional[tff.aggregators.WeightedAggregationFactory]:
  """Raises ValueError if algorithm `name` cannot run with these settings; else returns its model aggregator
  (`model_aggregator`, built with `seed`).

  Builds no TFF computation, so a runner can reject a configuration before any compute is spent: an unknown
  name, a cohort of `clients_per_round` too small for a gather-based rule, an update attack on an algorithm
  whose client work has no corruption flag (`delta_fl`, `fedsgd`, `fedprox`, the stateful and sign-vote
  algorithms), a FedProx step that overshoots (client_learning_rate * fedprox_mu >= 1), a
  sign-vote algorithm without `clients_per_round`, the channel's parameters, a personal learning rate
  outside [0, inf) or for an algorithm other than `personalized_rfa`, and a `config.defence` (a spec the registry
  refuses, or one given to an algorithm other than `fedavg`).
  """
  if config.defence is not None and name != 'fedavg':
    raise ValueError(f'a defence ({config.defence!r}) is the aggregator of fedavg; {name} has its own')
  aggregator = model_aggregator(name, config, clients_per_round, seed)
  rule = _chain_rule(name, config, clients_per_round, seed)
  if isinstance(rule, gathering.GatheringRobustFactory) and clients_per_round is not None:
    try:
      rule.check_clients_per_round(clients_per_round)
    except ValueError as error:
      raise ValueError(f'clients_per_round={clients_per_round} is too small: {error}') from None
  if update_attack is not None and (
      name in ('delta_fl', 'fedsgd', 'fedprox') or name in STATEFUL_ALGORITHM_NAMES
      or name in INDEXED_ALGORITHM_NAMES):
    raise ValueError(f'{name} does not support update corruption ({update_attack!r}); use data corruption')
  learning_rate, mu = config.client_learning_rate, config.fedprox_mu
  if name == 'fedprox' and not (learning_rate >= 0 and mu >= 0 and learning_rate * mu < 1):
    raise ValueError(
        'fedprox needs client_learning_rate >= 0, fedprox_mu >= 0 and client_learning_rate * fedprox_mu < 1 (at '
        'client_learning_rate * fedprox_mu >= 1 the proximal step alone overshoots w_t), got '
        f'client_learning_rate={learning_rate} and fedprox_mu={mu}'
    )
  if config.personal_learning_rate is not None and name != 'personalized_rfa':
    raise ValueError(f'personal_learning_rate applies to personalized_rfa, not {name}')
  if config.personal_learning_rate is not None and not 0 <= config.personal_learning_rate < float('inf'):
    raise ValueError(f'personal_learning_rate must be finite and >= 0, got {config.personal_learning_rate}')
  if name in INDEXED_ALGORITHM_NAMES:
    if clients_per_round is None:
      raise ValueError(f'{name} needs clients_per_round: the number of devices, all of which train every round')
    config.create_channel()
  return aggregator


def defence_stacked_rule(name: str, config: AlgorithmConfig, clients_per_round: Optional[int]):
  """The white-box attacker's view of algorithm `name`'s defence (one of `DEFENCE_ALGORITHM_NAMES`): its chain's
  stacked TensorFlow rule (`defences.stacked_rule`)."""
  if clients_per_round is None:
    raise ValueError(f'a white-box attack on {name} needs clients_per_round (its defence is simulated on the cohort)')
  return defences.stacked_rule(_chain_spec(name, config), clients_per_round=clients_per_round,
                               num_byzantine=config.num_byzantine)


def process_draws_from_seed(name: str, config: AlgorithmConfig, update_attack: Optional[str]) -> bool:
  """Whether `build_learning_process(name, ..., config, update_attack=..., seed=...)` draws random numbers from its
  `seed`: the noise of `config.defence` (`weak_dp`, `flame`: `registry.uses_run_seed`), `update_attack`'s draws
  (`gaussian`, `fang_trimmed_mean`: `catalog.AttackInfo.draws_random_numbers`) or a sign algorithm's noisy uplink
  (`mtfeel`, `signsgd` with a channel other than 'none'). A process for which it is False may be shared by runs of
  several seeds."""
  noisy_defence = config.defence is not None and defence_registry.uses_run_seed(config.defence)
  random_attack = update_attack is not None and catalog.parse(update_attack).info.draws_random_numbers
  noisy_uplink = name in ('mtfeel', 'signsgd') and config.channel != 'none'
  return noisy_defence or random_attack or noisy_uplink


def build_learning_process(
    name: str,
    model_fn,
    config: AlgorithmConfig,
    *,
    clients_per_round: Optional[int] = None,
    update_attack: Optional[str] = None,
    seed: int = 0,
    attacker_alpha: Optional[float] = None,
) -> Union[tff.learning.templates.LearningProcess, stateful_clients.StatefulClientProcess,
           indexed_clients.IndexedClientsProcess]:
  """Builds algorithm `name` with client and server SGD.

  The `DEFENCE_ALGORITHM_NAMES` (`fedavg`, `rfa`, `rfa_one_step`, the gather-based baselines, norm clipping,
  `bucketing_rfa`, `centered_clipping`, `filtered_centered_clipping`) are `composition.build_fed_avg_process`
  (`build_weighted_fed_avg` that also counts non-finite client updates) with the factory of their defence chain
  (`defence_spec`: e.g. `bucketing_rfa` is `bucketing(s=bucket_size)>gm`, `filtered_centered_clipping` is
  `norm_filter(k=norm_filter_multiplier)>centered_clipping(tau=centered_clipping_radius,
  iters=centered_clipping_iterations)`), or `fedavg` with `config.defence`; `rfa` is the aggregator of
  `build_rfa_process` (`rfa.rfa_aggregator`), so it is that process. With `update_attack`
  (an attack spec, `tff_robust.core.attacks.catalog`, e.g. 'alie(z=1)') the process takes `(dataset, flag
  dataset)` per client and poisons the flagged clients' updates before the aggregator
  (`update_corruption_process`); white-box attacks get the chain's stacked rule (`defences.stacked_rule`).
  `attacker_alpha` (with `update_attack` only) makes the flagged clients train constrain-and-scale's objective
  (`update_corruption_process`, `constrained_attack_client_work`).

  `delta_fl` is `tff_robust.processes.delta_fl.build_delta_fl_process` with the config's conformity level,
  quantile method, passes and threshold period.

  The `STATEFUL_ALGORITHM_NAMES` return a `StatefulClientProcess`: `fedplus_<variant>` is
  `build_fedplus_process` (sigma, delta, lambda = local_init_mixing, init_client_from, the paper's unweighted
  mean),
  `personalized_rfa` is `build_personalized_rfa_process` (RFA's passes and smoothing; the personal step
  at `personal_learning_rate` when set, else at the client learning rate as in the paper) and `local_only`
  is Fed+ with sigma = 0 and lambda = 0 (Table 1: local training, the global model plays no part).

  `fedprox` is `tff_robust.processes.fedprox.build_fedprox_process` (Li et al. 2020, Algorithm 2 with SGD
  as the local solver, the example-weighted mean of the FedProx code) with proximal strength mu =
  `fedprox_mu` and learning rate `client_learning_rate`. TFF 0.87's `build_weighted_fed_prox` is not used:
  its proximal term has the wrong sign (NOTES.md).

  `fedsgd` is `tff.learning.algorithms.build_fed_sgd` (server SGD with the server learning rate) whose client work
  also counts non-finite updates and empty datasets (`composition.build_fed_sgd_process`).
  The `INDEXED_ALGORITHM_NAMES` train every one of `clients_per_round` devices in every round and send
  gradient signs over the config's channel: `mtfeel` is `build_mtfeel_process` (eta = the server learning
  rate; mu, pen_scale, update order and `dde_steps` of discrepancy estimation from the config) and `signsgd`
  is `build_sign_sgd_process` with majority vote.

  Raises:
    ValueError: for settings `check_settings` rejects.
  """
  aggregator = check_settings(name, config, clients_per_round=clients_per_round, update_attack=update_attack,
                              seed=seed)
  if attacker_alpha is not None and update_attack is None:
    raise ValueError('attacker_alpha (constrain-and-scale\'s attackers) needs an update attack (their boost)')
  client_optimizer = tff.learning.optimizers.build_sgdm(learning_rate=config.client_learning_rate)
  server_optimizer = tff.learning.optimizers.build_sgdm(learning_rate=config.server_learning_rate)
  if name in ('local_only',) or name.startswith('fedplus_'):
    return fedplus.build_fedplus_process(
        model_fn, client_optimizer, variant='avg' if name == 'local_only' else name.removeprefix('fedplus_'),
        sigma=0.0 if name == 'local_only' else config.fedplus_sigma, delta=config.fedplus_delta,
        local_init_mixing=0.0 if name == 'local_only' else config.local_init_mixing,
        init_client_from=config.fedplus_init_client_from, model_aggregator=aggregator,
        server_optimizer_fn=server_optimizer,
    )
  if name == 'fedprox':
    return fedprox.build_fedprox_process(
        model_fn, config.fedprox_mu, client_optimizer, server_optimizer, model_aggregator=aggregator
    )
  if name == 'personalized_rfa':
    return personalized_rfa.build_personalized_rfa_process(
        model_fn, client_optimizer, server_optimizer, num_passes=config.rfa_num_passes,
        smoothing=config.rfa_smoothing,
        personal_optimizer_fn=None if config.personal_learning_rate is None else tff.learning.optimizers.build_sgdm(
            learning_rate=config.personal_learning_rate
        ),
    )
  if name == 'mtfeel':
    return mtfeel.build_mtfeel_process(
        model_fn, clients_per_round, learning_rate=config.server_learning_rate,
        alpha_learning_rate=config.alpha_learning_rate, pen_scale=config.pen_scale,
        update_order=config.mtfeel_update_order, channel=config.create_channel(), seed=seed,
        discrepancy_steps=config.dde_steps, discrepancy_learning_rate=config.dde_learning_rate,
        discrepancy_output=config.dde_output,
    )
  if name == 'signsgd':
    return sign_sgd.build_sign_sgd_process(
        model_fn, clients_per_round, learning_rate=config.server_learning_rate, channel=config.create_channel(),
        seed=seed,
    )
  if name == 'fedsgd':
    return composition.build_fed_sgd_process(model_fn, server_optimizer, model_aggregator=aggregator)
  if name == 'delta_fl':
    return delta_fl.build_delta_fl_process(
        model_fn, client_optimizer, server_optimizer, conformity_level=config.conformity_level,
        quantile_method=config.quantile_method, quantile_passes=config.quantile_passes,
        threshold_period=config.threshold_period, model_aggregator=aggregator,
    )
  if update_attack is not None:
    return update_corruption_process.build_update_corruption_process(
        model_fn, client_optimizer, server_optimizer,
        model_aggregator=aggregator, attack=update_attack, seed=seed,
        stacked_rule=defence_stacked_rule(name, config, clients_per_round)
        if catalog.parse(update_attack).info.needs_stacked_rule else None, attacker_alpha=attacker_alpha,
    )
  return composition.build_fed_avg_process(
      model_fn, client_optimizer, server_optimizer, model_aggregator=aggregator
  )
