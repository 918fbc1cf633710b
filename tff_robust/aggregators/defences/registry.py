"""The defence registry: every pre-aggregator and robust rule by name, and the spec strings that chain them.

A defence spec is pre-aggregators then one rule, joined by `>`, each with optional parameters in brackets:

    arc>gm
    bucketing(s=2)>centered_clipping(tau=0.3,iters=3)
    norm_filter(k=1.5)>centered_clipping(tau=0.3)
    nnm>krum(select=1)

A preset (`PRESETS`) names a whole chain with its parameters: `recommended_secure` is the secure-compatible chain
chosen on its worst case over the attack suite (docs/guides/attacks.md, "Which defence when"), so naming it gives
the measured parameters.

`parse` turns a spec into a `DefenceChain` (or raises ValueError naming the bad part and what is allowed);
`tff_robust.aggregators.defences.build_factory` builds its `tff.aggregators` factory and `stacked_rule` its
TensorFlow function over stacked updates. A parameter left out takes the default listed in `REGISTRY`; the
parameters `f` default to the `num_byzantine` given at build time, and `trimmed_mean`'s `beta` to
num_byzantine / clients_per_round.

Each entry names the object implementing it (`implementation`, 'module:attribute', imported at build time),
so this module imports no TensorFlow: the runner checks a spec before loading it. A new defence is one module
with an implementation object (see `implementations.Implementation`), one entry in `REGISTRY`, and its tests.
"""

import dataclasses
import re
from typing import Optional, Union

PRE_AGGREGATOR = 'pre-aggregator'
RULE = 'rule'
# What an unset parameter is derived from at build time (`Param.default_from`).
FROM_NUM_BYZANTINE = 'num_byzantine'
FROM_BYZANTINE_SHARE = 'num_byzantine / clients_per_round'
FROM_RUN_SEED = 'the run seed'


@dataclasses.dataclass(frozen=True)
class Param:
  """A parameter of a component: `kind` int, float or str; unset, it is `default`, or with `default_from` the
  build's `FROM_NUM_BYZANTINE`, `FROM_BYZANTINE_SHARE` or `FROM_RUN_SEED`."""

  name: str
  kind: type
  default: Union[int, float, str, None]
  doc: str
  minimum: Optional[float] = None
  strict_minimum: bool = False
  maximum: Optional[float] = None
  strict_maximum: bool = False
  choices: tuple = ()
  default_from: Optional[str] = None

  def allowed(self) -> str:
    """The allowed values in words."""
    if self.choices:
      return 'one of ' + ', '.join(self.choices)
    bounds = []
    if self.minimum is not None:
      bounds.append(f'{">" if self.strict_minimum else ">="} {self.minimum:g}')
    if self.maximum is not None:
      bounds.append(f'{"<" if self.strict_maximum else "<="} {self.maximum:g}')
    kind = 'an integer' if self.kind is int else 'a finite number'
    return f'{kind} {" and ".join(bounds)}'.strip()

  def parse(self, text: str, component: str):
    """The value of `text`, or ValueError naming `component`, this parameter and the allowed values."""
    error = ValueError(f'{component}({self.name}={text}): {self.name} must be {self.allowed()}')
    if self.kind is str:
      if text not in self.choices:
        raise error
      return text
    try:
      value = int(text) if self.kind is int else float(text)
    except ValueError:
      raise error from None
    if value != value or value in (float('inf'), float('-inf')):
      raise error
    if self.minimum is not None and (value < self.minimum or (self.strict_minimum and value == self.minimum)):
      raise error
    if self.maximum is not None and (value > self.maximum or (self.strict_maximum and value == self.maximum)):
      raise error
    return value


@dataclasses.dataclass(frozen=True)
class Entry:
  """A registered component.

  `secure`: built with secure sums, no client value reaches the server other than through a secure sum
  (`privacy.assert_client_values_aggregated_securely`); False for the components that gather updates.
  `counts_clients`: the component counts clients (n - f neighbours, f Byzantine of n, Krum's neighbours), so
  it cannot follow bucketing, which hands every bucket mean on once per client of the bucket.
  `needs_clients_per_round`: its factory needs the cohort size n when built.
  """

  name: str
  kind: str
  implementation: str
  secure: bool
  summary: str
  params: tuple = ()
  counts_clients: bool = False
  needs_clients_per_round: bool = False

  def param(self, name: str) -> Param:
    """The parameter `name` of this entry; ValueError listing the allowed ones if it has none of that name."""
    for param in self.params:
      if param.name == name:
        return param
    allowed = ', '.join(p.name for p in self.params) or 'no parameters'
    raise ValueError(f'{self.name} takes {allowed}; got {name!r}')


def _f() -> Param:
  return Param('f', int, None, 'the number f of Byzantine clients tolerated; unset: the num_byzantine given at '
               'build time', minimum=0, default_from=FROM_NUM_BYZANTINE)


_PRE = 'tff_robust.aggregators.defences.pre_aggregators'
_RULES = 'tff_robust.aggregators.defences.rules'
_GATHERED = 'tff_robust.aggregators.defences.gathered_rules'
_BACKDOOR = 'tff_robust.aggregators.defences.backdoor_defences'


def _seed() -> Param:
  return Param('seed', int, 0, 'seeds the noise drawn at the server (a run is reproducible from it); unset: the '
               'seed the chain is built with (the runner\'s --seed)', minimum=0, default_from=FROM_RUN_SEED)

REGISTRY = {entry.name: entry for entry in (
    Entry('clipping', PRE_AGGREGATOR, f'{_PRE}:CLIPPING', True,
          'static norm clipping: each update scaled to L2 norm at most c (Sun et al., 2019)',
          (Param('c', float, 1.0, 'the L2 bound', minimum=0.0, strict_minimum=True),)),
    Entry('arc', PRE_AGGREGATOR, 'tff_robust.aggregators.defences.arc:ARC', True,
          'adaptive robust clipping (Allouah et al., 2024): the floor(2 (f/n)(n - f)) largest updates clipped to '
          'the next norm, a secure quantile of the norms', (_f(),), counts_clients=True,
          needs_clients_per_round=True),
    Entry('nnm', PRE_AGGREGATOR, f'{_PRE}:NNM', False,
          'nearest-neighbour mixing (Allouah et al., 2023): each update replaced by the mean of its n - f nearest; '
          'gathers the updates', (_f(),), counts_clients=True),
    Entry('bucketing', PRE_AGGREGATOR, f'{_PRE}:BUCKETING', True,
          'bucketing (Karimireddy et al., 2022): each update replaced by the mean of its random bucket of s',
          (Param('s', int, 2, 'clients per bucket', minimum=1),
           Param('keys', str, 'random', "how clients draw their bucket keys ('hashed': reproducible, for tests)",
                 choices=('random', 'hashed'))), needs_clients_per_round=True),
    Entry('norm_filter', PRE_AGGREGATOR, f'{_PRE}:NORM_FILTER', True,
          'drops the clients whose update norm exceeds k times the secure weighted median norm',
          (Param('k', float, 2.0, 'the multiple of the median norm kept', minimum=1.0),)),
    Entry('rlr', PRE_AGGREGATOR, f'{_BACKDOOR}:RLR', True,
          'robust learning rate (Ozdayi et al., 2021): each coordinate whose clients agree on its sign fewer than '
          'theta times, |sum_k sgn(update_k)| < theta (a secure sum of signs), is flipped before the rule',
          (Param('theta', int, 4, 'the clients that must agree on a sign (0: never flip); at most clients_per_round',
                 minimum=0),), counts_clients=True),
    Entry('mean', RULE, f'{_RULES}:MEAN', True, 'the weighted mean (FedAvg)'),
    Entry('weak_dp', RULE, f'{_BACKDOOR}:WEAK_DP', True,
          'norm bounding and weak differential privacy (Sun et al., 2019): the weighted mean of the updates clipped '
          'to L2 norm m, plus N(0, sigma^2 I) drawn at the server',
          (Param('m', float, 1.0, 'the L2 bound M of each update', minimum=0.0, strict_minimum=True),
           Param('sigma', float, 0.01, 'the standard deviation of the noise on each entry of the mean (0: the '
                 'clipped mean); the noise multiplier is sigma n / m', minimum=0.0),
           _seed())),
    Entry('gm', RULE, f'{_RULES}:GM', True,
          'the weighted geometric median by smoothed Weiszfeld (RFA, Pillutla et al.)',
          (Param('passes', int, 3, 'secure averages (the first is the mean with init=mean)', minimum=1),
           Param('nu', float, 1e-6, 'the Weiszfeld smoothing', minimum=0.0, strict_minimum=True),
           Param('init', str, 'mean', "'mean' (Algorithm 2) or 'zero' (with passes=1: one-step RFA)",
                 choices=('mean', 'zero')))),
    Entry('centered_clipping', RULE, f'{_RULES}:CENTERED_CLIPPING', True,
          'centered clipping from the previous aggregate (Karimireddy et al., 2021)',
          (Param('tau', float, 1.0, 'the L2 bound of each residual', minimum=0.0, strict_minimum=True),
           Param('iters', int, 3, 'secure averages per round', minimum=1))),
    Entry('median', RULE, f'{_GATHERED}:MEDIAN', False,
          'the coordinate-wise weighted median (Yin et al., 2018); gathers the updates'),
    Entry('trimmed_mean', RULE, f'{_GATHERED}:TRIMMED_MEAN', False,
          'the coordinate-wise trimmed mean (Yin et al., 2018); gathers the updates',
          (Param('beta', float, None, 'the fraction trimmed at each end (ceil(beta m) values); unset: '
                 'num_byzantine / clients_per_round', minimum=0.0, maximum=0.5, strict_maximum=True,
                 default_from=FROM_BYZANTINE_SHARE),),
          counts_clients=True),
    Entry('krum', RULE, f'{_GATHERED}:KRUM', False,
          'Krum / multi-Krum (Blanchard et al., 2017): the mean of the select updates of lowest Krum score; '
          'gathers the updates',
          (_f(), Param('select', int, 1, 'updates averaged (1: Krum; 0: m - f, multi-Krum)', minimum=0)),
          counts_clients=True),
    Entry('bulyan', RULE, f'{_GATHERED}:BULYAN', False,
          'Bulyan (El Mhamdi et al., 2018): repeated Krum, then a coordinate-wise trimmed mean; gathers the updates',
          (_f(),), counts_clients=True),
    Entry('flame', RULE, f'{_BACKDOOR}:FLAME', False,
          'FLAME (Nguyen et al., 2022): the majority cluster of HDBSCAN on cosine distances, clipped to the median '
          'norm S and averaged, plus N(0, (lambda S)^2 I); gathers the updates',
          (Param('lambda', float, 0.001, "the noise's standard deviation as a multiple of S (the paper's 0.001 for "
                 'image classification; 0: no noise)', minimum=0.0),
           _seed()), counts_clients=True),
)}

PRE_AGGREGATOR_NAMES = tuple(name for name, entry in REGISTRY.items() if entry.kind == PRE_AGGREGATOR)
RULE_NAMES = tuple(name for name, entry in REGISTRY.items() if entry.kind == RULE)
# A list of specs in one flag value (the sweep's --defences): specs contain commas, so they are split on this.
SPEC_LIST_SEPARATOR = ';'

# Whole chains by name. recommended_secure: chosen once on the digits validation split (20% of each client's
# examples) against its worst case over the issue-35 attack suite at rho = 0.25 (worst 0.764 under
# norm_aware(c=1.4), clean 0.906; results/robustness_worst_case_digits/validation), among centered clipping
# (tau 0.1, 0.3, 1), ARC before it, bucketing (s=2) before it, ARC before the geometric median and the norm filter
# (k 1.5, 2) before centered clipping (tau 0.3).
PRESETS = {
    'recommended_secure': 'norm_filter(k=2)>centered_clipping(tau=0.3)',
}


@dataclasses.dataclass(frozen=True)
class Component:
  """One registered component with the parameters its spec sets, in the entry's order."""

  name: str
  params: tuple = ()  # ((parameter name, value), ...)

  @property
  def entry(self) -> Entry:
    return REGISTRY[self.name]

  def arguments(self, *, clients_per_round: Optional[int], num_byzantine: int, seed: int = 0) -> dict:
    """Every parameter's value: as set, else its default or what `Param.default_from` derives it from (`f`:
    `num_byzantine`; `trimmed_mean`'s `beta`: num_byzantine / clients_per_round; the noise's `seed`: `seed`)."""
    arguments = dict(self.params)
    for param in self.entry.params:
      if param.name in arguments:
        continue
      if param.default_from == FROM_NUM_BYZANTINE:
        arguments[param.name] = num_byzantine
      elif param.default_from == FROM_BYZANTINE_SHARE:
        if clients_per_round is None:
          raise ValueError(f'{self.name} without {param.name} needs clients_per_round: {param.name} = '
                           f'{FROM_BYZANTINE_SHARE}')
        arguments[param.name] = num_byzantine / clients_per_round
      elif param.default_from == FROM_RUN_SEED:
        arguments[param.name] = seed
      else:
        arguments[param.name] = param.default
    return {param.name: arguments[param.name] for param in self.entry.params}

  def __str__(self):
    if not self.params:
      return self.name
    return f'{self.name}(' + ','.join(f'{name}={value!r}'.replace("'", '') for name, value in self.params) + ')'


@dataclasses.dataclass(frozen=True)
class DefenceChain:
  """Pre-aggregators applied in order, then one rule; `str()` is its canonical spec."""

  pre_aggregators: tuple
  rule: Component

  @property
  def components(self) -> tuple:
    return self.pre_aggregators + (self.rule,)

  def __str__(self):
    return '>'.join(str(component) for component in self.components)


_COMPONENT = re.compile(r'^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$')


def _listing() -> str:
  return (f'pre-aggregators: {", ".join(PRE_AGGREGATOR_NAMES)}; rules: {", ".join(RULE_NAMES)}; presets: '
          f'{", ".join(PRESETS)}')


def _parse_component(text: str, spec: str) -> Component:
  match = _COMPONENT.match(text)
  if not match:
    raise ValueError(f'defence {spec!r}: cannot read {text.strip()!r}; write name or name(param=value,...) '
                     f'({_listing()})')
  name, arguments = match.group(1), match.group(2)
  if name not in REGISTRY:
    raise ValueError(f'defence {spec!r}: unknown component {name!r} ({_listing()})')
  entry = REGISTRY[name]
  values = {}
  for argument in ([] if arguments is None or not arguments.strip() else arguments.split(',')):
    key, equals, value = argument.partition('=')
    key, value = key.strip(), value.strip()
    if not equals or not key or not value:
      raise ValueError(f'defence {spec!r}: {name}({arguments}): write parameters as param=value')
    try:
      param = entry.param(key)
    except ValueError as error:
      raise ValueError(f'defence {spec!r}: {error}') from None
    if key in values:
      raise ValueError(f'defence {spec!r}: {name} sets {key} twice')
    try:
      values[key] = param.parse(value, name)
    except ValueError as error:
      raise ValueError(f'defence {spec!r}: {error}') from None
  return Component(name, tuple((param.name, values[param.name]) for param in entry.params if param.name in values))


def parse(spec: str) -> DefenceChain:
  """The `DefenceChain` of `spec` (module docstring), or of the chain a preset names.

  Raises:
    ValueError: naming the part that is wrong: an unknown component or parameter (listing the allowed ones),
      a value out of range, a spec that does not end with exactly one rule, or a composition refused because
      its parts do not compose (a component that counts clients after bucketing).
  """
  if not isinstance(spec, str) or not spec.strip():
    raise ValueError(f'a defence spec is a non-empty string such as "arc>gm", got {spec!r} ({_listing()})')
  spec = PRESETS.get(spec.strip(), spec)
  components = [_parse_component(part, spec) for part in spec.split('>')]
  *pre_aggregators, rule = components
  if rule.entry.kind != RULE:
    raise ValueError(f'defence {spec!r} must end with a rule ({", ".join(RULE_NAMES)}); {rule.name} is a '
                     f'pre-aggregator, e.g. "{rule.name}>gm"')
  for component in pre_aggregators:
    if component.entry.kind != PRE_AGGREGATOR:
      raise ValueError(f'defence {spec!r}: {component.name} is a rule and must come last; only pre-aggregators '
                       f'({", ".join(PRE_AGGREGATOR_NAMES)}) come before it')
  for index, component in enumerate(pre_aggregators):
    later = [c.name for c in components[index + 1:] if c.entry.counts_clients]
    if component.name == 'bucketing' and later:
      raise ValueError(
          f'defence {spec!r}: {", ".join(later)} cannot follow bucketing: bucketing hands each bucket mean on once '
          'per client of the bucket (so that every rule of the weighted distribution sees the bucket means with '
          f'their weights), and {", ".join(later)} counts clients, so it would count each bucket mean s times. '
          'A pre-aggregator that counts clients may come before bucketing; after it, use a rule of the weighted '
          'distribution (mean, gm, centered_clipping, median)'
      )
  return DefenceChain(tuple(pre_aggregators), rule)


def as_chain(spec_or_chain: Union[str, DefenceChain]) -> DefenceChain:
  """`spec_or_chain` itself if it is a `DefenceChain`, else `parse(spec_or_chain)`."""
  return spec_or_chain if isinstance(spec_or_chain, DefenceChain) else parse(spec_or_chain)


def non_secure_components(spec_or_chain: Union[str, DefenceChain]) -> list:
  """The names of the chain's components that gather client updates (empty for a secure-compatible chain)."""
  return [component.name for component in as_chain(spec_or_chain).components if not component.entry.secure]


def is_secure(spec_or_chain: Union[str, DefenceChain]) -> bool:
  """Whether every component of the chain is secure-compatible (built with secure sums, nothing gathered)."""
  return not non_secure_components(spec_or_chain)


def uses_run_seed(spec_or_chain: Union[str, DefenceChain]) -> bool:
  """Whether a component of the chain leaves its `seed` to the build (`FROM_RUN_SEED`: the noise of `weak_dp` and
  `flame`), so that a factory built for one run's seed draws other noise than another's."""
  return any(param.default_from == FROM_RUN_SEED and param.name not in dict(component.params)
             for component in as_chain(spec_or_chain).components for param in component.entry.params)


def path_component(spec: str) -> str:
  """`spec` as one file-name component: every run of characters other than letters, digits and _.=- becomes '_'
  (`arc>bucketing(s=2)>gm` -> `arc_bucketing_s=2_gm`)."""
  return re.sub(r'[^A-Za-z0-9_.=-]+', '_', spec).strip('_')


def parse_list(specs: str) -> list:
  """The chains of a `SPEC_LIST_SEPARATOR`-separated list of specs (empty parts skipped)."""
  return [parse(spec) for spec in specs.split(SPEC_LIST_SEPARATOR) if spec.strip()]
