"""The robustness sweep's targeted attacks (backdoors): their checks, their attack window, and the attack success
rate (ASR) columns of a run's results.csv row.

With `rounds_after_attack` N = 0 a targeted attack runs in every round and a row's ASR is its final evaluation's.
With N > 0 (the durability of a backdoor) every targeted attack runs in rounds 1..T only, T = total_rounds - N: its
attackers train on their clean data and send honest updates in the last N rounds. Every run of such a sweep, the
clean and untargeted ones too, is evaluated at round T as well as at the end, so that accuracy and ASR at the end of
the attack compare across runs. The row's columns (`FIELDS`, '' where they do not apply):
  attack_success_rate                 the ASR at the final evaluation: N rounds after the attackers stopped when
                                      N > 0; '' for a run without a targeted attack;
  rounds_after_attack, attack_end_round   N and T ('' when N = 0);
  accuracy_at_attack_end, attack_success_rate_at_attack_end
                                      the evaluation at round T (the last evaluation before it if the run stopped
                                      earlier: a non-finite model); '' when N = 0, where the final evaluation is the
                                      one at the attack's end.

Imports no TensorFlow.
"""

import os
from typing import Optional, Sequence

from tff_robust.core import corruption as core_corruption
from tff_robust.core.attacks import targeted_catalog
from tff_robust.simulation import metrics_csv
from tff_robust.tasks import task_names

FIELDS = ('attack_success_rate', 'rounds_after_attack', 'attack_end_round', 'accuracy_at_attack_end',
          'attack_success_rate_at_attack_end')
_ASR = 'eval/attack_success_rate'


def is_targeted(kind: str) -> bool:
  """Whether the corruption `kind` (a canonical spec of the sweep) is a targeted attack."""
  return kind not in ('none', 'data', 'label_flipping') and targeted_catalog.lookup(kind) is not None


def check(kinds: Sequence[str], *, task: str, total_rounds: int, rounds_after_attack: int,
          server_learning_rate: float) -> None:
  """Refuses, naming the flag, what the sweep cannot run: a targeted attack on a task without a pixel trigger or
  that does not fit it (`TargetedSpec.check_task`: its trigger, or the edge case's classes), model replacement at
  a server learning rate <= 0 (its boost divides by it), a `rounds_after_attack` that leaves the attackers no
  round, or one given without any targeted attack.

  Raises:
    ValueError: the message starts with the flag (`--corruptions=...`, `--rounds_after_attack=...`).
  """
  targeted = [kind for kind in kinds if is_targeted(kind)]
  for kind in targeted:
    spec = targeted_catalog.parse(kind)
    if task not in task_names.BACKDOOR_TASKS:
      raise ValueError(f'--corruptions={kind}: {spec.name} applies to the tasks with a pixel trigger '
                       f'({", ".join(task_names.BACKDOOR_TASKS)}), not --task={task}')
    image_shape, num_classes = task_names.BACKDOOR_TASKS[task]
    try:
      spec.check_task(image_shape, num_classes)
    except ValueError as error:
      raise ValueError(f'--corruptions={kind}: {error} for --task={task}') from None
    if spec.update_attack() is not None and not server_learning_rate > 0:
      raise ValueError(f'--corruptions={kind} boosts by the server learning rate: it needs --server_learning_rate '
                       f'> 0, got {server_learning_rate}')
  if rounds_after_attack and not targeted:
    raise ValueError(f'--rounds_after_attack={rounds_after_attack} measures how long a backdoor lasts after its '
                     f'attackers stop: it needs a targeted attack in --corruptions '
                     f'({", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)})')
  if rounds_after_attack >= total_rounds:
    raise ValueError(f'--rounds_after_attack={rounds_after_attack} does not fit in --total_rounds={total_rounds}: '
                     'the attackers need at least one round (rounds_after_attack < total_rounds)')


def attacker_alpha(kind: str) -> Optional[float]:
  """constrain-and-scale's alpha (its attackers' weight of their class loss) if `kind` is that attack, else None."""
  return targeted_catalog.parse(kind).attacker_alpha() if is_targeted(kind) else None


def attack_end_round(total_rounds: int, rounds_after_attack: int) -> int:
  """T = total_rounds - N, the last round of a targeted attack (total_rounds when N = 0)."""
  return total_rounds - rounds_after_attack


def window(kind: str, total_rounds: int, rounds_after_attack: int) -> Optional[core_corruption.AttackWindow]:
  """The attack window of a run under `kind`: rounds 1..T for a targeted attack with N > 0, else None (every
  round)."""
  if not rounds_after_attack or not is_targeted(kind):
    return None
  return core_corruption.AttackWindow(1, attack_end_round(total_rounds, rounds_after_attack))


def rounds_per_eval(total_rounds: int, rounds_after_attack: int) -> int:
  """Evaluate every T rounds (T = total_rounds - N): at round T and at the end (the final round always is)."""
  return attack_end_round(total_rounds, rounds_after_attack)


def row_fields(kind: str, summary: dict, output_dir: str, total_rounds: int, rounds_after_attack: int) -> dict:
  """The `FIELDS` of the row of a finished run under `kind`, from its `summary` (`run_training`'s) and, with N > 0,
  the evaluation at round T in its `output_dir`'s metrics.csv."""
  targeted = is_targeted(kind)
  fields = dict.fromkeys(FIELDS, '')
  if targeted:
    fields['attack_success_rate'] = summary[_ASR]
  if rounds_after_attack:
    end = attack_end_round(total_rounds, rounds_after_attack)
    _, evaluated = metrics_csv.evaluation_at(os.path.join(output_dir, 'metrics.csv'), end)
    fields.update(rounds_after_attack=rounds_after_attack, attack_end_round=end,
                  accuracy_at_attack_end=evaluated.get('eval/accuracy', ''))
    if targeted:
      fields['attack_success_rate_at_attack_end'] = evaluated.get(_ASR, '')
  return fields
