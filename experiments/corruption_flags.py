"""The runner's flags of corrupted clients: the data corruptions, update attacks and targeted attacks, the corrupted
share, the rounds in which they attack, and the attacks' own parameters.

Imports no TensorFlow (the attack names are `core.attacks.catalog`'s and `core.attacks.targeted_catalog`'s).
"""

from absl import flags

from tff_robust.core import corruption as core_corruption
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import targeted_catalog

# `simulation.corruption`'s data corruptions.
DATA_CORRUPTIONS = ('none', 'data', 'label_flipping')
DEFAULT_IPM_EPSILON = catalog.DEFAULT_IPM_EPSILON

CORRUPTION = flags.DEFINE_string(
    'corruption', 'none',
    'Corrupted clients: none; data (the task\'s data poisoning) or label_flipping (y -> C - 1 - y, tasks with '
    'class labels); or an update attack spec, name(key=value,...), e.g. alie(z=1), ipm(eps=2), '
    'norm_aware(direction=ipm,c=1.4), min_max(direction=sign); or a targeted attack spec (a backdoor, digits only; '
    'eval/attack_success_rate reports it), e.g. backdoor(target=0,share=0.5,size=2), model_replacement(target=0), '
    'constrain_and_scale(target=0,alpha=0.7), edge_case(target=1,tail=0.1). '
    'Attacks (parameter=default): ' + catalog.describe() + '. Targeted attacks: ' + targeted_catalog.describe() + '.',
)
CORRUPTION_FRACTION = flags.DEFINE_float(
    'corruption_fraction', 0.0, 'Share rho of the training examples held by corrupted clients, in [0, 1).',
    lower_bound=0.0, upper_bound=0.9999999,
)
CORRUPTION_START_ROUND = flags.DEFINE_integer(
    'corruption_start_round', 1,
    'First round (1-based) in which the corrupted clients attack; before it they behave as honest clients.',
    lower_bound=1,
)
CORRUPTION_END_ROUND = flags.DEFINE_integer(
    'corruption_end_round', None,
    'Last round in which the corrupted clients attack (>= --corruption_start_round); after it they behave as honest '
    'clients (a backdoor\'s durability). Unset: to the last round.',
    lower_bound=1,
)
ALIE_Z = flags.DEFINE_float(
    'alie_z', None,
    'alie: a fixed finite z of the corrupted update mu - z sigma; unset: the paper\'s z_max = Phi^{-1}((n - s)/n), '
    's = floor(n/2 + 1) - m, each round (n the cohort, m its corrupted clients).',
)
IPM_EPSILON = flags.DEFINE_float(
    'ipm_epsilon', DEFAULT_IPM_EPSILON,
    'ipm: corrupted clients send -epsilon times the honest clients\' mean update; epsilon finite >= 0.',
    lower_bound=0.0,
)


def _corruption_is_valid(value: str) -> bool:
  if value not in DATA_CORRUPTIONS:
    try:
      if targeted_catalog.lookup(value) is None:
        catalog.parse(value)
    except ValueError as error:
      raise flags.ValidationError(
          f'--corruption must be one of {", ".join(DATA_CORRUPTIONS)}, an update attack spec or a targeted attack '
          f'spec ({", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)}): {error}') from None
  return True


flags.register_validator('corruption', _corruption_is_valid)


def _window_is_valid(flag_values: dict) -> bool:
  try:
    core_corruption.AttackWindow(flag_values['corruption_start_round'], flag_values['corruption_end_round'])
  except ValueError as error:
    raise flags.ValidationError(f'--corruption_{error}') from None  # "--corruption_end_round must be ..."
  return True


flags.register_multi_flags_validator(('corruption_start_round', 'corruption_end_round'), _window_is_valid)


def attack_window() -> core_corruption.AttackWindow:
  """The rounds in which the corrupted clients attack (--corruption_start_round, --corruption_end_round)."""
  return core_corruption.AttackWindow(CORRUPTION_START_ROUND.value, CORRUPTION_END_ROUND.value)


def attacker_alpha():
  """constrain-and-scale's alpha if --corruption is that attack (its attackers' weight of their class loss), else
  None."""
  targeted = targeted_catalog.lookup(CORRUPTION.value)
  return None if targeted is None else targeted.attacker_alpha()


def update_attack_spec(server_learning_rate: float = 1.0):
  """The canonical spec of the update attack --corruption runs (with --alie_z / --ipm_epsilon folded in; a targeted
  attack's update half, whose attacker assumes `server_learning_rate`), or None for the data corruptions, 'none' and
  the targeted attacks without one."""
  targeted = targeted_catalog.lookup(CORRUPTION.value)
  if targeted is not None:
    return targeted.update_attack(server_learning_rate)
  attack = catalog.lookup(CORRUPTION.value)
  if attack is None:
    return None
  if attack.name == 'alie' and ALIE_Z.value is not None:
    attack = catalog.parse(f'alie(z={ALIE_Z.value!r})')
  if attack.name == 'ipm' and CORRUPTION.value == 'ipm':
    attack = catalog.parse(f'ipm(eps={IPM_EPSILON.value!r})')
  return str(attack)
