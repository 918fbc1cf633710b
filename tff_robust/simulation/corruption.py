"""Runner-side corruption set-up: which clients are corrupted and what data each client feeds the process.

Data attacks change a corrupted client's raw data: 'data' is the task's own poisoning (`Task.corrupt_train`),
'label_flipping' its y -> C - 1 - y (`Task.flip_labels`). Update attacks (`UPDATE_ATTACKS`, given as attack specs
such as 'alie(z=1)': `tff_robust.core.attacks.catalog`) change what it sends
(`tff_robust.aggregators.update_corruption`). Targeted attacks (`TARGETED_ATTACKS`, specs such as
'backdoor(target=0)': `tff_robust.core.attacks.targeted_catalog`) poison its raw data with the task's pixel trigger
(`Task.backdoor`), or for the edge case replace a share of its examples, at the same positions, by examples of the
task's edge-case pool labelled the target (`tff_robust.core.attacks.edge_case`), and may also run an update
attack on what it sends (model replacement's boost). An `AttackWindow` limits the rounds in which the corrupted
clients attack.
"""

import dataclasses
import functools
from typing import Callable, Optional

import numpy as np

from tff_robust.core import corruption as core_corruption
from tff_robust.core.attacks import catalog
from tff_robust.core.attacks import targeted_catalog
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import update_corruption_process
from tff_robust.tasks import base
from tff_robust.tasks import shakespeare_windows

UPDATE_ATTACKS = catalog.ATTACK_NAMES
TARGETED_ATTACKS = targeted_catalog.TARGETED_ATTACK_NAMES
DATA_CORRUPTIONS = ('none', 'data', 'label_flipping')
AttackWindow = core_corruption.AttackWindow


def _refused(error: ValueError) -> ValueError:
  return ValueError(f'corruption must be one of {DATA_CORRUPTIONS}, an update attack spec or a targeted attack spec '
                    f'({", ".join(TARGETED_ATTACKS)}): {error}')


def targeted_attack(corruption: str) -> Optional[targeted_catalog.TargetedSpec]:
  """The checked `targeted_catalog.TargetedSpec` of `corruption` if it is a targeted attack, else None.

  Raises:
    ValueError: for a targeted attack spec `targeted_catalog.parse` refuses.
  """
  try:
    return targeted_catalog.lookup(corruption)
  except ValueError as error:
    raise _refused(error) from None


def update_attack(corruption: str, server_learning_rate: float = 1.0):
  """The checked `catalog.AttackSpec` of the update attack that `corruption` runs, else None: an update attack spec
  itself, or a targeted attack's update half (model replacement's `boost`, whose attacker assumes the server
  learning rate `server_learning_rate`); None for the data corruptions and a targeted attack without one.

  Raises:
    ValueError: for a corruption that is neither a data corruption nor an attack spec the catalogs accept.
  """
  if corruption in DATA_CORRUPTIONS:
    return None
  targeted = targeted_attack(corruption)
  if targeted is not None:
    spec = targeted.update_attack(server_learning_rate)
    return None if spec is None else catalog.parse(spec)
  try:
    return catalog.parse(corruption)
  except ValueError as error:
    raise _refused(error) from None


def attack_success_evaluator(task: base.Task, corruption: str):
  """model weights -> {'attack_success_rate': ASR} of the targeted attack `corruption` on `task`'s evaluation
  examples (`tasks.backdoor.PixelBackdoor.success_evaluator`; the edge case's: on those in its tail,
  `edge_case_success_evaluator`), or None for any other corruption.

  Raises:
    ValueError: for a targeted attack on a task without a pixel trigger, or a trigger that does not fit the task.
  """
  targeted = targeted_attack(corruption)
  if targeted is None:
    return None
  support = _backdoor_of(task, targeted)
  if targeted.is_edge_case:
    return support.edge_case_success_evaluator(targeted.edge_case())
  return support.success_evaluator(targeted.trigger())


def _backdoor_of(task: base.Task, targeted: targeted_catalog.TargetedSpec):
  if task.backdoor is None:
    raise ValueError(f'{targeted.name} needs a task with a pixel trigger (digits), not {task.name!r}')
  return task.backdoor


def _poison_of(task: base.Task, targeted: targeted_catalog.TargetedSpec):
  """The transform of an attacker's raw data under `targeted`: the pixel trigger's, or the edge case's pool."""
  support = _backdoor_of(task, targeted)
  if targeted.is_edge_case:
    return support.edge_case_poison(targeted.edge_case())
  return support.poison(targeted.trigger())


@functools.cache
def client_example_counts(task: base.Task) -> tuple[int, ...]:
  """Number of raw training examples of every client (alpha_i up to normalisation), in client-id order.

  Cached per task: counting iterates every client's dataset where its cardinality is unknown.
  """
  if isinstance(task.train_data, shakespeare_windows.WindowsClientData):  # held in memory: no dataset to build
    return tuple(task.train_data.num_examples(client_id) for client_id in task.train_data.client_ids)
  counts = []
  for client_id in task.train_data.client_ids:
    dataset = task.train_data.create_tf_dataset_for_client(client_id)
    cardinality = int(dataset.cardinality())
    counts.append(cardinality if cardinality >= 0 else int(dataset.reduce(0, lambda n, _: n + 1)))
  return tuple(counts)


def select_corrupted_clients(task: base.Task, fraction: float, seed: int) -> frozenset[str]:
  """Clients whose share of the training examples first reaches `fraction` (RFA eq. 5, App. D.2.1)."""
  return core_corruption.select_corrupted_clients(
      list(task.train_data.client_ids), client_example_counts(task), fraction, seed
  )


def make_client_data_fn(task: base.Task, corruption: str, corrupted: frozenset[str], *,
                        in_memory: bool = False, window: Optional[AttackWindow] = None):
  """Maps a client id to what the learning process takes for it under `corruption`.

  With `in_memory` a client's data is `Task.client_data` (a `base.InMemoryClient` where the task holds its
  examples in memory) instead of its dataset: the runner's data path (`client_pipelines.cohort_client_data`)
  turns it into the same dataset, or a capped sample of it (`client_pipelines.max_examples`) cheaply. A targeted
  attack's corrupted clients always get their dataset: their poisoning picks examples by position.

  With a `window` that is not the whole run the result is a `client_pipelines.ByRound`: in the rounds outside it
  every client's data is what it would be with no client corrupted (clean data; for update attacks, the flag
  False, so the attack replaces nothing).

  Raises:
    ValueError: for an unknown corruption, label flipping on a task without class labels, or a targeted attack
      whose trigger the task lacks or cannot fit.
  """
  attacked = _client_data_fn(task, corruption, corrupted, in_memory)
  if window is None or window.whole_run:
    return attacked
  honest = _client_data_fn(task, corruption, frozenset(), in_memory)
  return client_pipelines.ByRound(lambda round_num: attacked if window.active(round_num) else honest)


def _client_data_fn(task: base.Task, corruption: str, corrupted: frozenset[str],
                    in_memory: bool) -> Callable[[str], object]:
  targeted = targeted_attack(corruption)
  sends_flag = update_attack(corruption) is not None
  if targeted is not None:
    task = dataclasses.replace(task, corrupt_train=_poison_of(task, targeted))
  elif corruption == 'label_flipping':
    if task.flip_labels is None:
      raise ValueError(f'label_flipping needs a task with class labels, not {task.name!r}')
    task = dataclasses.replace(task, corrupt_train=task.flip_labels)

  def data_of(client_id, poisoned=False):
    # A targeted attack poisons examples by their position in the client's dataset (`tasks.backdoor`), which a
    # capped in-memory client (`client_pipelines.capped_in_memory`: selection first, then the transform) would shift.
    from_memory = in_memory and not (poisoned and targeted is not None)
    return (task.client_data if from_memory else task.client_dataset)(client_id, corrupted=poisoned)

  if sends_flag and targeted is None:  # an update attack: the attackers train on their clean data
    return lambda cid: (data_of(cid), update_corruption_process.corruption_flag_dataset(cid in corrupted))
  if sends_flag:  # a targeted attack with an update half: poisoned data and the flag
    return lambda cid: (data_of(cid, poisoned=cid in corrupted),
                        update_corruption_process.corruption_flag_dataset(cid in corrupted))
  return lambda cid: data_of(cid, poisoned=corruption != 'none' and cid in corrupted)


def corrupted_weight_share(task: base.Task, corrupted: frozenset[str]) -> float:
  """Share of the training examples held by the `corrupted` clients; 0 without counting when there are none
  (counting builds every client's dataset: 84 s for the 1,144 Shakespeare roles)."""
  if not corrupted:
    return 0.0
  counts = np.asarray(client_example_counts(task), np.float64)
  mask = np.array([cid in corrupted for cid in task.train_data.client_ids])
  return float(counts[mask].sum() / counts.sum())
