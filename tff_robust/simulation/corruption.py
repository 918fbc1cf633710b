"""Runner-side corruption set-up: which clients are corrupted and what data each client feeds the process.

Data attacks change a corrupted client's raw data: 'data' is the task's own poisoning (`Task.corrupt_train`),
'label_flipping' its y -> C - 1 - y (`Task.flip_labels`). Update attacks (`UPDATE_ATTACKS`, given as attack specs
such as 'alie(z=1)': `tff_robust.core.attacks.catalog`) change what it sends
(`tff_robust.aggregators.update_corruption`).
"""

import dataclasses
import functools
from typing import Callable

import numpy as np

from tff_robust.core import corruption as core_corruption
from tff_robust.core.attacks import catalog
from tff_robust.simulation import update_corruption_process
from tff_robust.tasks import base
from tff_robust.tasks import shakespeare_windows

UPDATE_ATTACKS = catalog.ATTACK_NAMES
DATA_CORRUPTIONS = ('none', 'data', 'label_flipping')


def update_attack(corruption: str):
  """The checked `catalog.AttackSpec` of `corruption` if it is an update attack, else None.

  Raises:
    ValueError: for a corruption that is neither a data corruption nor an attack spec `catalog.parse` accepts.
  """
  if corruption in DATA_CORRUPTIONS:
    return None
  try:
    return catalog.parse(corruption)
  except ValueError as error:
    raise ValueError(f'corruption must be one of {DATA_CORRUPTIONS} or an update attack spec: {error}') from None


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
                        in_memory: bool = False) -> Callable[[str], object]:
  """Maps a client id to what the learning process takes for it under `corruption`.

  With `in_memory` a client's data is `Task.client_data` (a `base.InMemoryClient` where the task holds its
  examples in memory) instead of its dataset: the runner's data path (`client_pipelines.cohort_client_data`)
  turns it into the same dataset, or a capped sample of it (`client_pipelines.max_examples`) cheaply.

  Raises:
    ValueError: for an unknown corruption, or label flipping on a task without class labels.
  """
  data_of = task.client_data if in_memory else task.client_dataset
  if update_attack(corruption) is not None:
    return lambda cid: (data_of(cid), update_corruption_process.corruption_flag_dataset(cid in corrupted))
  if corruption == 'label_flipping':
    if task.flip_labels is None:
      raise ValueError(f'label_flipping needs a task with class labels, not {task.name!r}')
    task = dataclasses.replace(task, corrupt_train=task.flip_labels)
    data_of = task.client_data if in_memory else task.client_dataset
  return lambda cid: data_of(cid, corrupted=corruption != 'none' and cid in corrupted)


def corrupted_weight_share(task: base.Task, corrupted: frozenset[str]) -> float:
  """Share of the training examples held by the `corrupted` clients; 0 without counting when there are none
  (counting builds every client's dataset: 84 s for the 1,144 Shakespeare roles)."""
  if not corrupted:
    return 0.0
  counts = np.asarray(client_example_counts(task), np.float64)
  mask = np.array([cid in corrupted for cid in task.train_data.client_ids])
  return float(counts[mask].sum() / counts.sum())
