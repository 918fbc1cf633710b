"""The update attacks by name: their parameters, defaults and allowed ranges, and the spelling of an attack spec.

An attack spec is a name with optional parameters in brackets, e.g. `alie`, `alie(z=1)`, `ipm(eps=2)`,
`norm_aware(direction=ipm,c=1.4)`, `min_max(direction=sign)`. `parse` checks it (a ValueError names the bad
part and lists what is allowed); `AttackSpec.__str__` is its canonical form: the parameters that differ from
their defaults, in declaration order, numbers written shortest (`alie(z=1.0)` and `alie(z=1)` are one attack,
`ipm(eps=0.1)` is `ipm`). The sweep keys its results by the canonical form.

Published defaults used (each attack's module says more): ALIE z = the paper's z_max (Baruch et al. 2019,
Algorithm 3); IPM eps = 0.1 (Karimireddy, He, Jaggi 2021/2022; Blades uses 0.5, ByzFL 2); min-max / min-sum
gamma_init = 10 and tau = 1e-5 and the inverse unit vector (Shejwalkar & Houmansadr's released code); Fang et al.'s
b = 2 and Krum search threshold 1e-5 (their paper); ROP pi = 1, lam = 0.9, theta = 90 degrees (Ozfatura et al.'s
main setting), radius 1 (the runner's default centered-clipping tau, not the paper's: it scales by ALIE's z); line
search: a grid of 11 scales on [0, 10] and 12 golden-section steps (ours; ByzFL: 20 evaluations from 0, step 10,
contraction 0.8); boost: Bagdasaryan et al.'s replacement factor gamma = n / eta, weighted (W / (eta W_C)), at
eta = 1 (the runner's `model_replacement` sets eta to its server learning rate); masked: top = 0.1 (ours). The
sweep's grids: ALIE z in {z_max, 1, 2}, IPM eps in {0.1, 1, 2} (issue 35).

The targeted attacks (backdoors, a data poisoning, possibly with an update attack of this catalog) are
`targeted_catalog`, in the same grammar (`checked_values`).

Imports no TensorFlow: the runner checks `--corruption` with it before loading TensorFlow. The TFF attacks are
`tff_robust.aggregators.attacks.registry` (one module per attack), the NumPy references the other modules of
this package.
"""

import dataclasses
import math
import re
from typing import Any, Callable, Optional


@dataclasses.dataclass(frozen=True)
class Parameter:
  """One attack parameter: `kind` float or str, `default` (None: the attack's own rule), `allowed` in words."""

  name: str
  kind: type
  default: Any
  allowed: str
  check: Callable[[Any], bool]


@dataclasses.dataclass(frozen=True)
class AttackInfo:
  """One attack of the catalog: its name, a one-line summary, its parameters, whether it needs the defence's stacked
  rule (the white-box line search) and whether it draws random numbers from the run's seed."""

  name: str
  summary: str
  parameters: tuple[Parameter, ...] = ()
  needs_stacked_rule: bool = False  # the white-box line search evaluates the defence's rule
  draws_random_numbers: bool = False  # its build takes the run's seed (gaussian's noise, Fang's draws)


def _number(name, default, allowed, check):
  return Parameter(name, float, default, allowed, lambda v: math.isfinite(v) and check(v))


def _choice(name, choices, default):
  return Parameter(name, str, default, 'one of ' + ', '.join(choices), lambda v: v in choices)


MIN_MAX_DIRECTIONS = ('unit_vec', 'std', 'sign')
NORM_AWARE_DIRECTIONS = ('omniscient', 'ipm', 'alie')
LINE_SEARCH_DIRECTIONS = ('alie', 'ipm', 'unit_vec', 'sign')
GAUSSIAN_MODES = ('replace', 'add')
DEFAULT_IPM_EPSILON = 0.1
# Shejwalkar & Houmansadr's released code (AGR-agnostic attacks): gamma_init = 10, stop at |delta gamma| <= 1e-5.
DEFAULT_GAMMA_INIT = 10.0
DEFAULT_GAMMA_TOLERANCE = 1e-5
# Neurotoxin's share of coordinates kept out of (ours; Zhang et al. vary it).
DEFAULT_NEUROTOXIN_TOP = 0.1


def _perturbation_search_parameters():
  return (
      _choice('direction', MIN_MAX_DIRECTIONS, 'unit_vec'),
      _number('gamma_init', DEFAULT_GAMMA_INIT, 'a finite number > 0', lambda v: v > 0),
      _number('tau', DEFAULT_GAMMA_TOLERANCE, 'a finite number > 0', lambda v: v > 0),
  )


_ATTACKS = (
    AttackInfo('gaussian', 'sigma N(0, I) replaces (or is added to) the update, sigma its own std',
               (_choice('mode', GAUSSIAN_MODES, 'replace'),), draws_random_numbers=True),
    AttackInfo('omniscient', '-(2 S_G + S_C) / A_C: the weighted mean becomes minus the honest-behaviour mean'),
    AttackInfo('alie', 'a little is enough: honest mean - z honest std (z: the paper\'s z_max unless set)',
               (_number('z', None, 'a finite number', lambda v: True),)),
    AttackInfo('ipm', 'inner-product manipulation: -eps honest mean',
               (_number('eps', DEFAULT_IPM_EPSILON, 'a finite number >= 0', lambda v: v >= 0),)),
    AttackInfo('sign_flipping', 'minus the own update'),
    AttackInfo('norm_aware', 'an attack direction scaled to c times the honest weighted median norm',
               (_choice('direction', NORM_AWARE_DIRECTIONS, 'omniscient'),
                _number('c', 1.0, 'a finite number > 0', lambda v: v > 0))),
    AttackInfo('min_max', 'honest mean + gamma p, the largest gamma whose farthest honest distance stays within '
               'the largest honest pairwise distance (Shejwalkar & Houmansadr 2021)',
               _perturbation_search_parameters()),
    AttackInfo('min_sum', 'honest mean + gamma p, the largest gamma whose sum of squared honest distances stays '
               'within the honest maximum (Shejwalkar & Houmansadr 2021)', _perturbation_search_parameters()),
    AttackInfo('fang_trimmed_mean', 'Fang et al. 2020 on the trimmed mean and the median: per coordinate beyond the '
               'honest extreme opposite to the honest mean\'s sign, within a factor b',
               (_number('b', 2.0, 'a finite number > 1', lambda v: v > 1),), draws_random_numbers=True),
    AttackInfo('fang_krum', 'Fang et al. 2020 on Krum: -lambda sign(honest mean), lambda halved until Krum '
               'selects it', (_number('threshold', 1e-5, 'a finite number > 0', lambda v: v > 0),)),
    AttackInfo('mimic', 'every attacker copies the honest client farthest along the honest updates\' direction of '
               'largest variance (Karimireddy, He, Jaggi 2022)'),
    AttackInfo('rop', 'relocated orthogonal perturbation around the previous aggregate (Ozfatura et al. 2022)',
               (_number('radius', 1.0, 'a finite number > 0', lambda v: v > 0),
                _number('pi', 1.0, 'a number in [0, 1]', lambda v: 0 <= v <= 1),
                _number('lam', 0.9, 'a number in [0, 1]', lambda v: 0 <= v <= 1),
                _number('angle', 90.0, 'a number of degrees in [0, 180]', lambda v: 0 <= v <= 180))),
    AttackInfo('line_search', 'white box: the scale of a direction that moves the defence\'s output furthest from '
               'the honest mean (ByzFL\'s optimal ALIE / IPM)',
               (_choice('direction', LINE_SEARCH_DIRECTIONS, 'alie'),
                _number('max_scale', 10.0, 'a finite number > 0', lambda v: v > 0),
                _number('grid', 11.0, 'an integer >= 2', lambda v: v >= 2 and v == int(v)),
                _number('refinements', 12.0, 'an integer >= 0', lambda v: v >= 0 and v == int(v))),
               needs_stacked_rule=True),
    AttackInfo('boost', 'gamma times the own update; gamma unset: W / (eta W_C), the cohort\'s weight over eta times '
               'the corrupted weight, so that the corrupted clients\' models replace the aggregate (Bagdasaryan et '
               'al. 2020\'s model replacement; the update half of the targeted model_replacement)',
               (_number('gamma', None, 'a finite number > 0', lambda v: v > 0),
                _number('eta', 1.0, 'a finite number > 0 (the server learning rate the attacker assumes)',
                        lambda v: v > 0))),
    AttackInfo('masked', 'the own update, zero on the top share of coordinates of the previous aggregate by '
               'magnitude (Neurotoxin\'s mask, Zhang et al. 2022; the update half of the targeted neurotoxin)',
               (_number('top', DEFAULT_NEUROTOXIN_TOP, 'a number in [0, 1)', lambda v: 0 <= v < 1),)),
)
ATTACKS = {info.name: info for info in _ATTACKS}
ATTACK_NAMES = tuple(ATTACKS)
# Named groups that `expand` turns into several specs (the sweep's grids: ALIE's z, IPM's epsilon).
GRIDS = {
    'alie_grid': ('alie', 'alie(z=1)', 'alie(z=2)'),
    'ipm_grid': ('ipm(eps=0.1)', 'ipm(eps=1)', 'ipm(eps=2)'),
}


def _format(value) -> str:
  if isinstance(value, str):
    return value
  return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(float(value))


@dataclasses.dataclass(frozen=True)
class AttackSpec:
  """A checked attack: its name and every parameter's value (defaults filled in), in declaration order."""

  name: str
  values: tuple[tuple[str, Any], ...] = ()

  @property
  def info(self) -> AttackInfo:
    return ATTACKS[self.name]

  def options(self) -> dict:
    """The parameter values as a dict {name: value}, defaults filled in."""
    return dict(self.values)

  def __str__(self):
    defaults = {p.name: p.default for p in self.info.parameters}
    changed = [f'{k}={_format(v)}' for k, v in self.values if v != defaults[k]]
    return f'{self.name}({",".join(changed)})' if changed else self.name


_SPEC = re.compile(r'^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$')


def parse(spec) -> AttackSpec:
  """The checked `AttackSpec` of `spec` (a string or an `AttackSpec`).

  Raises:
    ValueError: naming the unknown attack or parameter and listing the allowed ones, or a value out of range.
  """
  if isinstance(spec, AttackSpec):
    return spec
  return AttackSpec(*checked_values(spec, ATTACKS))


def checked_values(spec, attacks: dict[str, AttackInfo]) -> tuple[str, tuple[tuple[str, Any], ...]]:
  """(name, every parameter's value in declaration order, defaults filled in) of the spec string `spec`, whose
  name must be a key of `attacks` (this catalog's `ATTACKS`, or another catalog's in the same grammar, e.g.
  `targeted_catalog.TARGETED_ATTACKS`).

  Raises:
    ValueError: naming the unknown attack or parameter and listing the allowed ones, or a value out of range.
  """
  match = _SPEC.match(str(spec))
  if not match:
    raise ValueError(f'attack spec {spec!r} is not of the form name or name(key=value,...)')
  name, arguments = match.group(1), match.group(2)
  if name not in attacks:
    raise ValueError(f'unknown attack {name!r} in {spec!r}; attacks: {", ".join(attacks)}')
  parameters = {p.name: p for p in attacks[name].parameters}
  values = {p.name: p.default for p in attacks[name].parameters}
  for argument in (arguments.split(',') if arguments and arguments.strip() else []):
    key, equals, text = (part.strip() for part in argument.partition('='))
    if key not in parameters or not equals:
      allowed = ', '.join(parameters) or 'none'
      raise ValueError(f'attack {name!r}: {argument.strip()!r} is not key=value with a parameter of the attack '
                       f'(parameters: {allowed})')
    parameter = parameters[key]
    try:
      value = parameter.kind(text)
    except ValueError:
      value = None
    if value is None or not parameter.check(value):
      raise ValueError(f'attack {name!r}: {key} must be {parameter.allowed}, got {text!r}')
    values[key] = value
  return name, tuple(values.items())


def spec_name(spec) -> Optional[str]:
  """The name of the spec string `spec` (`alie` of `alie(z=1)`), or None if it is not of the spec form."""
  match = _SPEC.match(str(spec))
  return match.group(1) if match else None


def split_specs(text: str) -> list[str]:
  """Splits a comma-separated list of specs at the commas outside brackets (`a,b(x=1,y=2)` -> two specs)."""
  parts, depth, current = [], 0, ''
  for character in text:
    depth += {'(': 1, ')': -1}.get(character, 0)
    if character == ',' and depth == 0:
      parts.append(current)
      current = ''
    else:
      current += character
  parts.append(current)
  return [part.strip() for part in parts if part.strip()]


def expand(specs) -> list[str]:
  """The canonical specs of `specs` with the named `GRIDS` expanded, each once, in order."""
  canonical = []
  for spec in specs:
    for one in GRIDS.get(spec.strip(), (spec,)):
      text = str(parse(one))
      if text not in canonical:
        canonical.append(text)
  return canonical


def path_component(spec) -> str:
  """The canonical spec as one file-name component: `norm_aware(direction=ipm,c=1.4)` ->
  `norm_aware-direction=ipm-c=1.4`."""
  return re.sub(r'[(),]', '-', str(parse(spec))).rstrip('-')


def describe(infos=None) -> str:
  """One line per attack of `infos` (this catalog's attacks unless given) with its parameters and defaults, for flag
  help."""
  lines = []
  for info in (_ATTACKS if infos is None else infos):
    params = ', '.join(f'{p.name}={"rule" if p.default is None else _format(p.default)}' for p in info.parameters)
    lines.append(f'{info.name}{f"({params})" if params else ""}: {info.summary}')
  return '; '.join(lines)


def lookup(spec) -> Optional[AttackSpec]:
  """`parse(spec)` if `spec` names an update attack, else None (the data corruptions, 'none', the targeted attacks)."""
  return parse(spec) if spec_name(spec) in ATTACKS else None
