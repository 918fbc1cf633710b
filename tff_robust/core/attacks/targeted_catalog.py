"""The targeted attacks (backdoors) by name: parameters, defaults and allowed ranges, in the spec grammar of the
update attacks (`catalog`: `name(key=value,...)`, canonical form without the defaults).

A targeted attack poisons the corrupted clients' training data with a `backdoor.PixelTrigger` (a data corruption,
like `data` and `label_flipping`), and may also change what they send (an update attack of `catalog`):
  - `backdoor(target=0,share=0.5,size=2,value=1)`: the pattern backdoor (BadNets, Gu et al. 2017; Bagdasaryan et
    al. 2020): the bottom-right size x size pixels set to `value` on a `share` of each attacker's examples, which
    are relabelled `target`; the attackers then train and send their updates as honest clients do.
  - `model_replacement(target=0,share=0.5,size=2,value=1,boost=rule)`: the same data, and each attacker's update
    times `boost` (Bagdasaryan et al. 2020, Sec. 4: gamma = n / eta), by default W / (eta W_C), which makes FedAvg's
    new global model the attackers' own when the honest updates are zero (`catalog`'s `boost`; NumPy:
    `boost`). The runner gives it eta = its --server_learning_rate.
  - `constrain_and_scale(target=0,share=0.5,size=2,value=1,alpha=0.7,boost=rule)` (Bagdasaryan et al. 2020, Sec.
    4, "constrain-and-scale"): the same data and boost, and each attacker trains on alpha L_class + (1 - alpha)
    ||w - G||^2 (G the global model it starts from), which keeps its update short (under a norm defence) before
    the boost (`tff_robust.processes.constrained_attack_client_work`). alpha = 0.7 is ours.
  - `neurotoxin(target=0,share=0.5,size=2,value=1,top=0.1)` (Zhang et al., ICML 2022): the backdoor's data, and
    each attacker's update zeroed on the top `top` share of coordinates of the last global update by magnitude
    (`catalog`'s `masked`; NumPy: `neurotoxin`), so that the honest clients, who change those most, overwrite the
    backdoor less after the attackers stop. The paper projects every local step; this projects the update once.
  - `edge_case(target=0,source=rule,tail=0.1,share=0.5)` (Wang et al., NeurIPS 2020, "Attack of the Tails"): no
    trigger; a `share` of each attacker's examples (the backdoor's positions) replaced by a fixed pool of the
    training set's tail examples of the source classes (`source`, unset: every class but the target), those
    farthest from their class mean (the top `tail` quantile of the distance), labelled `target`; the ASR is
    measured on the held-out examples of that tail (NumPy: `edge_case`, which states the analogue and why).
The task-dependent ranges (the target a class of the task, the patch within its input) are
`backdoor.check_trigger`'s (`edge_case.check_edge_case`'s for the edge case: both classes of the task, distinct);
the tasks that define a pixel trigger are `tff_robust.tasks.task_names.BACKDOOR_TASKS`.

Imports no TensorFlow.
"""

from typing import Optional

from tff_robust.core.attacks import backdoor
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import edge_case as edge_case_lib

DEFAULT_SHARE = 0.5
DEFAULT_SIZE = 2.0
DEFAULT_ALPHA = 0.7
DEFAULT_TAIL = 0.1


def _class_parameter(name, default):
  return catalog.Parameter(name, float, default, 'an integer >= 0 (a class of the task)',
                           lambda v: v >= 0 and v == int(v) and v < 2**31)


def _trigger_parameters():
  return (
      _class_parameter('target', 0.0),
      catalog.Parameter('share', float, DEFAULT_SHARE, 'a number in (0, 1]', lambda v: 0 < v <= 1),
      catalog.Parameter('size', float, DEFAULT_SIZE, 'an integer >= 1 (the side of the patch, within the input)',
                        lambda v: v >= 1 and v == int(v) and v < 2**31),
      catalog.Parameter('value', float, 1.0, 'a finite number (the pixels\' value on the patch)',
                        lambda v: v == v and abs(v) != float('inf')),
  )


def _boost():
  return catalog.Parameter('boost', float, None, 'a finite number > 0', lambda v: v > 0 and abs(v) != float('inf'))


_TARGETED = (
    catalog.AttackInfo('backdoor', 'pattern backdoor: the bottom-right size x size pixels set to value on a share of '
                       'each attacker\'s examples, relabelled target (Gu et al. 2017)', _trigger_parameters()),
    catalog.AttackInfo('model_replacement', 'the pattern backdoor\'s data, and each attacker\'s update times boost '
                       '(unset: W / (eta W_C), replacing the global model; Bagdasaryan et al. 2020)',
                       _trigger_parameters() + (_boost(),)),
    catalog.AttackInfo('constrain_and_scale', 'model replacement whose attackers train on alpha L_class + '
                       '(1 - alpha) ||w - G||^2 (G the global model) before the boost (Bagdasaryan et al. 2020)',
                       _trigger_parameters() + (
                           catalog.Parameter('alpha', float, DEFAULT_ALPHA, 'a number in (0, 1]',
                                             lambda v: 0 < v <= 1),
                           _boost())),
    catalog.AttackInfo('neurotoxin', 'the pattern backdoor\'s data, and each attacker\'s update zero on the top '
                       'share of coordinates of the last global update (Zhang et al. 2022)',
                       _trigger_parameters() + (
                           catalog.Parameter('top', float, catalog.DEFAULT_NEUROTOXIN_TOP, 'a number in [0, 1)',
                                             lambda v: 0 <= v < 1),)),
    catalog.AttackInfo('edge_case', 'edge-case backdoor: a pool of the training set\'s source-class examples '
                       'farthest from their class mean (top tail quantile; source unset: every class but the '
                       'target), labelled target, in place of a share of each attacker\'s examples (Wang et al. '
                       '2020)',
                       (_class_parameter('target', 0.0), _class_parameter('source', None),
                        catalog.Parameter('tail', float, DEFAULT_TAIL, 'a number in (0, 1)', lambda v: 0 < v < 1),
                        _trigger_parameters()[1])),
)
TARGETED_ATTACKS = {info.name: info for info in _TARGETED}
TARGETED_ATTACK_NAMES = tuple(TARGETED_ATTACKS)


class TargetedSpec(catalog.AttackSpec):
  """A checked targeted attack: its name and every parameter's value; `str` is its canonical form."""

  @property
  def info(self) -> catalog.AttackInfo:
    return TARGETED_ATTACKS[self.name]

  @property
  def is_edge_case(self) -> bool:
    """Whether the attack is the edge-case backdoor (no pixel trigger: `edge_case()`)."""
    return self.name == 'edge_case'

  def edge_case(self) -> edge_case_lib.EdgeCase:
    """The edge-case backdoor's classes and tail (the edge_case attack only)."""
    if not self.is_edge_case:
      raise ValueError(f'{self.name} is a pixel-trigger attack, not the edge case')
    options = self.options()
    source = options['source']
    return edge_case_lib.EdgeCase(target=int(options['target']), source=None if source is None else int(source),
                                  tail=float(options['tail']), share=float(options['share']))

  def check_task(self, image_shape, num_classes: int) -> None:
    """Raises ValueError, naming the parameter and its range, if the attack does not fit a task with these images
    and classes (`backdoor.check_trigger`, `edge_case.check_edge_case`)."""
    if self.is_edge_case:
      edge_case_lib.check_edge_case(self.edge_case(), num_classes)
    else:
      backdoor.check_trigger(self.trigger(), image_shape, num_classes)

  def trigger(self) -> backdoor.PixelTrigger:
    """The pixel trigger of the attack's data poisoning (the pixel-trigger attacks only)."""
    if self.is_edge_case:
      raise ValueError('edge_case has no pixel trigger')
    options = self.options()
    return backdoor.PixelTrigger(target=int(options['target']), share=float(options['share']),
                                 size=int(options['size']), value=float(options['value']))

  def update_attack(self, server_learning_rate: float = 1.0) -> Optional[str]:
    """The canonical spec of the `catalog` update attack the attackers also run (None: they send their updates
    as honest clients do): model replacement's and constrain-and-scale's `boost`, with eta = `server_learning_rate`;
    Neurotoxin's `masked`."""
    if self.name == 'neurotoxin':
      return str(catalog.parse(f'masked(top={self.options()["top"]!r})'))
    if self.name not in ('model_replacement', 'constrain_and_scale'):
      return None
    gamma = self.options()['boost']
    return str(catalog.parse(f'boost(eta={server_learning_rate!r}' + ('' if gamma is None else f',gamma={gamma!r}')
                             + ')'))


  def attacker_alpha(self):
    """constrain-and-scale's alpha, the attackers' weight of their class loss (None: they train as honest clients
    do)."""
    return self.options()['alpha'] if self.name == 'constrain_and_scale' else None


def parse(spec) -> TargetedSpec:
  """The checked `TargetedSpec` of `spec` (a string or a `TargetedSpec`).

  Raises:
    ValueError: naming the unknown attack or parameter and listing the allowed ones, or a value out of range (or
      the edge case's source equal to its target).
  """
  if isinstance(spec, TargetedSpec):
    return spec
  checked = TargetedSpec(*catalog.checked_values(spec, TARGETED_ATTACKS))
  if checked.is_edge_case and checked.options()['source'] == checked.options()['target']:
    raise ValueError(f"attack 'edge_case': source must differ from target, got both "
                     f"{int(checked.options()['target'])} in {spec!r}")
  return checked


def lookup(spec) -> Optional[TargetedSpec]:
  """`parse(spec)` if `spec` names a targeted attack, else None."""
  return parse(spec) if catalog.spec_name(spec) in TARGETED_ATTACKS else None


def describe() -> str:
  """One line per targeted attack with its parameters and defaults, for flag help."""
  return catalog.describe(_TARGETED)
