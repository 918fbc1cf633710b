"""Which runner flags configure which algorithms, attacks and channels: one table and one rule over it.

A flag in `FLAG_USERS` configures a part of a run that the run may not have: an algorithm's hyperparameter, an
attack's parameter, a channel's. It maps to its selector, the flag whose value decides whether that part exists,
and the selector's values that use it. The rule (`refusal`): a run that sets such a flag to a value other than its
default (NaN included) while its selector has another value is refused, in one line naming the flag and the
values that use it, e.g. `--norm_filter_multiplier applies to --algorithm=filtered_centered_clipping, not
--algorithm=rfa`. A flag at its default changes nothing, so flagfiles may spell defaults out.

A new algorithm, attack or channel adds its flags here (and its name to the entries of the flags it shares); a
flag that parts chosen by different selectors read (e.g. an algorithm and a defence chain) maps to `AnyOf` their
`Users`. The flags every algorithm reads (learning rates, epochs, batch size, rounds) are not in the table;
MtFEEL, signSGD and FedSGD do not train with --client_learning_rate, which is not refused with them.

Imports neither absl nor TensorFlow: `experiments.train_flags` applies the rule, `experiments.paper_tables` reads
the table to tell an algorithm's settings from a run's.
"""

import dataclasses
from typing import Mapping, Optional

from tff_robust.simulation import algorithm_names


@dataclasses.dataclass(frozen=True)
class Users:
  """The values of flag `selector` that use a flag: those in `values`, or, with `all_but`, every value but those
  (`all_but=(None,)`: any value of a flag that is unset by default)."""

  selector: str
  values: tuple = ()
  all_but: tuple = ()

  @property
  def selectors(self) -> tuple[str, ...]:
    return (self.selector,)

  def use(self, flag_values: Mapping[str, object]) -> bool:
    """Whether a run with these flag values (its selector's among them) has the part that uses the flag."""
    value = flag_values[self.selector]
    return value not in self.all_but if self.all_but else value in self.values

  def __str__(self) -> str:
    if self.all_but == (None,):
      return f'a --{self.selector}'
    if self.all_but:
      return f'every --{self.selector} but {"|".join(map(str, self.all_but))}'
    return f'--{self.selector}={"|".join(map(str, self.values))}'


@dataclasses.dataclass(frozen=True)
class AnyOf:
  """A flag that several parts use, each chosen by its own selector: used where any of `alternatives` uses it."""

  alternatives: tuple[Users, ...]

  @property
  def selectors(self) -> tuple[str, ...]:
    return tuple(users.selector for users in self.alternatives)

  def use(self, flag_values: Mapping[str, object]) -> bool:
    return any(users.use(flag_values) for users in self.alternatives)

  def __str__(self) -> str:
    return ' or '.join(map(str, self.alternatives))


_RFA = Users('algorithm', ('rfa', 'bucketing_rfa', 'personalized_rfa'))
_CENTERED_CLIPPING = Users('algorithm', ('centered_clipping', 'filtered_centered_clipping'))
_FEDPLUS = Users('algorithm', ('fedplus_avg', 'fedplus_geomed', 'fedplus_comed'))
_DELTA_MEDIAN = Users('algorithm', ('fedplus_geomed', 'fedplus_comed'))
_DELTA_FL = Users('algorithm', ('delta_fl',))
_MTFEEL = Users('algorithm', ('mtfeel',))
_CLIENT_SCHEDULE = Users('algorithm', algorithm_names.CLIENT_SCHEDULE_ALGORITHM_NAMES)
_LOCAL_EPOCHS = Users('algorithm', all_but=algorithm_names.FULL_GRADIENT_ALGORITHM_NAMES)
_OUTAGE = Users('channel', ('outage',))

FLAG_USERS: dict[str, Users | AnyOf] = {
    'rfa_num_passes': _RFA,
    'rfa_smoothing': Users('algorithm', (*_RFA.values, 'rfa_one_step')),
    'personal_learning_rate': Users('algorithm', ('personalized_rfa',)),
    'trim_fraction': Users('algorithm', ('trimmed_mean',)),
    'num_byzantine': AnyOf((Users('algorithm', ('multi_krum', 'bulyan')), Users('defence', all_but=(None,)))),
    'num_selected': Users('algorithm', ('multi_krum',)),
    'clipping_norm': Users('algorithm', ('norm_clipping',)),
    'bucket_size': Users('algorithm', ('bucketing_rfa',)),
    'centered_clipping_radius': _CENTERED_CLIPPING,
    'centered_clipping_iterations': _CENTERED_CLIPPING,
    'norm_filter_multiplier': Users('algorithm', ('filtered_centered_clipping',)),
    'conformity_level': _DELTA_FL,
    'quantile_method': _DELTA_FL,
    'quantile_passes': Users('quantile_method', ('secure', 'secure_mm')),
    'threshold_period': _DELTA_FL,
    'fedplus_sigma': _FEDPLUS,
    'fedplus_delta': _FEDPLUS,
    'local_init_mixing': _FEDPLUS,
    'fedplus_init_client_from': _FEDPLUS,
    'fedplus_solver': _DELTA_MEDIAN,
    'fedplus_max_iterations': _DELTA_MEDIAN,
    'fedprox_mu': Users('algorithm', ('fedprox',)),
    'channel': Users('algorithm', algorithm_names.INDEXED_ALGORITHM_NAMES),
    'snr_db': Users('channel', ('rayleigh', 'outage')),
    'flip_probability': Users('channel', ('bsc',)),
    'outage_rate': _OUTAGE,
    'on_outage': _OUTAGE,
    'alpha_learning_rate': _MTFEEL,
    'pen_scale': _MTFEEL,
    'mtfeel_update_order': _MTFEEL,
    'dde_steps': _MTFEEL,
    'dde_learning_rate': _MTFEEL,
    'dde_output': _MTFEEL,
    'client_lr_decay': _CLIENT_SCHEDULE,
    'client_lr_decay_rounds': _CLIENT_SCHEDULE,
    'minibatch_fraction': Users('algorithm', algorithm_names.FULL_GRADIENT_ALGORITHM_NAMES),
    'straggler_fraction': _LOCAL_EPOCHS,
    'max_client_examples': _LOCAL_EPOCHS,
    'corruption_fraction': Users('corruption', all_but=('none',)),
    'corruption_start_round': Users('corruption', all_but=('none',)),
    'corruption_end_round': Users('corruption', all_but=('none',)),
    'alie_z': Users('corruption', ('alie',)),
    'ipm_epsilon': Users('corruption', ('ipm',)),
}


def is_used(flag: str, values: Mapping[str, object]) -> bool:
  """Whether the run whose flag values are `values` (its selectors' among them) uses `flag` (a flag outside the
  table: always)."""
  return flag not in FLAG_USERS or FLAG_USERS[flag].use(values)


def refusal(flag: str, values: Mapping[str, object], default) -> Optional[str]:
  """One line naming `flag` and the selector values that use it if `values` sets it away from `default` for a run
  that does not use it; else None."""
  if is_used(flag, values) or values[flag] == default or values[flag] is default:
    return None
  users = FLAG_USERS[flag]
  given = ', '.join(f'no --{s}' if values[s] is None else f'--{s}={values[s]}' for s in users.selectors)
  return f'--{flag} applies to {users}, not {given}'
