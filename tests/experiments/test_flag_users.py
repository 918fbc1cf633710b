"""`experiments.flag_users`: one table of the runner flags that configure one algorithm, attack or channel, and one
rule over it: such a flag set away from its default for a run without that part is refused at parsing, in one line
naming the flag and the values that use it; for a run with it, the flag parses."""

import pytest

from experiments import flag_users

# A valid value other than the default, for every flag of the table (a new entry needs one here).
_SAMPLES = {
    'rfa_num_passes': '5', 'rfa_smoothing': '0.01', 'personal_learning_rate': '0.05', 'trim_fraction': '0.2',
    'num_byzantine': '2', 'num_selected': '3', 'clipping_norm': '2', 'bucket_size': '3',
    'centered_clipping_radius': '0.5', 'centered_clipping_iterations': '5', 'norm_filter_multiplier': '3',
    'conformity_level': '0.8', 'quantile_method': 'secure', 'quantile_passes': '5', 'threshold_period': '2',
    'fedplus_sigma': '2', 'fedplus_delta': '0.5', 'local_init_mixing': '0.5',
    'fedplus_init_client_from': 'current_global', 'fedplus_solver': 'fixed_point', 'fedplus_max_iterations': '5',
    'fedprox_mu': '0.1', 'channel': 'bsc', 'snr_db': '0', 'flip_probability': '0.1',
    'outage_rate': '2', 'on_outage': 'random', 'alpha_learning_rate': '0.2', 'pen_scale': '2',
    'mtfeel_update_order': 'alpha_then_w', 'dde_steps': '3', 'dde_learning_rate': '0.1', 'dde_output': 'max',
    'client_lr_decay': '0.5', 'client_lr_decay_rounds': '3', 'minibatch_fraction': '0.1', 'straggler_fraction': '0.5',
    'max_client_examples': '10', 'corruption_fraction': '0.2', 'alie_z': '1', 'ipm_epsilon': '1',
    'corruption_start_round': '2', 'corruption_end_round': '5',
}
# What a sample needs besides its selector (stragglers need E >= 2).
_COMPANIONS = {'straggler_fraction': ['--client_epochs_per_round=2']}


@pytest.fixture
def runner_flags():
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import train_flags  # pylint: disable=g-import-not-at-top,unused-import  (defines the flags)
  flags.FLAGS.unparse_flags()
  yield flags.FLAGS
  flags.FLAGS.unparse_flags()


def _choices(runner_flags, selector) -> list[str]:
  """An enum selector's choices; --corruption's are its data corruptions and the attack names (a spec flag)."""
  if selector == 'corruption':
    from experiments import corruption_flags  # pylint: disable=g-import-not-at-top
    from tff_robust.core.attacks import catalog  # pylint: disable=g-import-not-at-top
    return [*corruption_flags.DATA_CORRUPTIONS, *catalog.ATTACK_NAMES]
  return list(runner_flags[selector].parser.enum_values)


def _setting(runner_flags, flag, use: bool) -> list[str]:
  """Flags that give `flag`'s selector a value that uses `flag` (or not), and the selector's own selector one that
  uses the selector."""
  users = flag_users.FLAG_USERS[flag]
  value = next(v for v in _choices(runner_flags, users.selector) if users.use({users.selector: v}) == use)
  prerequisite = _setting(runner_flags, users.selector, True) if users.selector in flag_users.FLAG_USERS else []
  return [*prerequisite, f'--{users.selector}={value}']


def _parse_error(runner_flags, argv) -> str:
  from absl import flags  # pylint: disable=g-import-not-at-top
  runner_flags.unparse_flags()
  try:
    runner_flags(['train', *argv])
  except flags.Error as error:
    return str(error)
  return ''


def _alternatives(users) -> tuple:
  return users.alternatives if isinstance(users, flag_users.AnyOf) else (users,)


def test_the_table_names_runner_flags_and_choices_of_their_selectors(runner_flags):
  from experiments import train_flags  # pylint: disable=g-import-not-at-top
  defined = {flag.name for flag in train_flags.runner_flags(runner_flags)}
  assert set(flag_users.FLAG_USERS) <= defined and set(_SAMPLES) == set(flag_users.FLAG_USERS)
  for flag, users in flag_users.FLAG_USERS.items():
    assert _SAMPLES[flag] != str(runner_flags[flag].default), flag
    for part in _alternatives(users):
      assert part.selector in defined and bool(part.values) != bool(part.all_but), flag
      if part.all_but != (None,):  # an enum selector: the values are its choices, some use the flag, some do not
        choices = _choices(runner_flags, part.selector)
        assert set(part.values) | set(part.all_but) <= set(choices), flag
        uses = [part.use({part.selector: v}) for v in choices]
        assert any(uses) and not all(uses), flag


@pytest.mark.parametrize(  # (an AnyOf entry: test_a_flag_several_parts_use_is_refused_only_where_none_does)
    'flag', sorted(flag for flag, users in flag_users.FLAG_USERS.items() if isinstance(users, flag_users.Users)))
def test_a_flag_is_refused_in_one_line_for_a_run_that_does_not_use_it_and_parses_for_one_that_does(runner_flags,
                                                                                                      flag):
  users = flag_users.FLAG_USERS[flag]
  without = _setting(runner_flags, flag, use=False)
  companions = _COMPANIONS.get(flag, [])
  error = _parse_error(runner_flags, [*without, *companions, f'--{flag}={_SAMPLES[flag]}'])
  assert error.endswith(f': --{flag} applies to {users}, not {without[-1]}') and '\n' not in error, error
  if runner_flags[flag].default is not None:  # a flag at its default changes nothing, so it may be spelt out
    assert _parse_error(runner_flags, [*without, f'--{flag}={runner_flags[flag].default}']) == ''
  assert _parse_error(runner_flags, [*_setting(runner_flags, flag, use=True), *companions,
                                     f'--{flag}={_SAMPLES[flag]}']) == ''


def test_a_flag_several_parts_use_is_refused_only_where_none_does(monkeypatch):
  # E.g. f, which multi-Krum and Bulyan take, and a defence chain too: `AnyOf` both parts' Users.
  users = flag_users.AnyOf((flag_users.Users('algorithm', ('multi_krum', 'bulyan')),
                            flag_users.Users('defence', all_but=(None,))))
  monkeypatch.setitem(flag_users.FLAG_USERS, 'num_byzantine', users)
  assert users.selectors == ('algorithm', 'defence')
  assert flag_users.refusal('num_byzantine', {'algorithm': 'fedavg', 'defence': None, 'num_byzantine': 2}, 1) == (
      '--num_byzantine applies to --algorithm=multi_krum|bulyan or a --defence, not --algorithm=fedavg, no --defence')
  assert flag_users.refusal('num_byzantine', {'algorithm': 'fedavg', 'defence': 'krum', 'num_byzantine': 2}, 1) is None
  assert flag_users.refusal('num_byzantine', {'algorithm': 'bulyan', 'defence': None, 'num_byzantine': 2}, 1) is None


def test_a_nan_is_a_setting_too():
  values = {'algorithm': 'rfa', 'clipping_norm': float('nan')}
  assert flag_users.refusal('clipping_norm', values, 1.0) == (
      '--clipping_norm applies to --algorithm=norm_clipping, not --algorithm=rfa')
  assert flag_users.refusal('clipping_norm', {**values, 'clipping_norm': 1.0}, 1.0) is None
  assert flag_users.is_used('client_learning_rate', values)  # outside the table: every run uses it
