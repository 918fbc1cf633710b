"""The runner's flags of corrupted clients: the data corruptions and update attacks, the corrupted share, and
the attacks' own parameters.

Imports no TensorFlow (the attack names are `core.attacks.catalog`'s).
"""

from absl import flags

from tff_robust.core.attacks import catalog

# `simulation.corruption`'s data corruptions.
DATA_CORRUPTIONS = ('none', 'data', 'label_flipping')
DEFAULT_IPM_EPSILON = catalog.DEFAULT_IPM_EPSILON

CORRUPTION = flags.DEFINE_string(
    'corruption', 'none',
    'Corrupted clients: none; data (the task\'s data poisoning) or label_flipping (y -> C - 1 - y, tasks with '
    'class labels); or an update attack spec, name(key=value,...), e.g. alie(z=1), ipm(eps=2), '
    'norm_aware(direction=ipm,c=1.4), min_max(direction=sign). Attacks (parameter=default): '
    + catalog.describe() + '.',
)
CORRUPTION_FRACTION = flags.DEFINE_float(
    'corruption_fraction', 0.0, 'Share rho of the training examples held by corrupted clients, in [0, 1).',
    lower_bound=0.0, upper_bound=0.9999999,
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
      catalog.parse(value)
    except ValueError as error:
      raise flags.ValidationError(f'--corruption must be one of {", ".join(DATA_CORRUPTIONS)} or an update attack '
                                  f'spec: {error}') from None
  return True


flags.register_validator('corruption', _corruption_is_valid)


def update_attack_spec():
  """The canonical attack spec of --corruption (with --alie_z / --ipm_epsilon folded in), or None for the data
  corruptions and 'none'."""
  attack = catalog.lookup(CORRUPTION.value)
  if attack is None:
    return None
  if attack.name == 'alie' and ALIE_Z.value is not None:
    attack = catalog.parse(f'alie(z={ALIE_Z.value!r})')
  if attack.name == 'ipm' and CORRUPTION.value == 'ipm':
    attack = catalog.parse(f'ipm(eps={IPM_EPSILON.value!r})')
  return str(attack)

