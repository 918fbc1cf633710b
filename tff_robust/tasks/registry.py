"""`create_task`: builds a training task by name (the runner's `--task`) with the builder options the runner can
set (`task_names`)."""

from typing import Optional

from tff_robust.tasks import task_names
from tff_robust.tasks import digits
from tff_robust.tasks import digits_cohorts
from tff_robust.tasks import digits_fedplus
from tff_robust.tasks import emnist_papers
from tff_robust.tasks import fedprox_synthetic
from tff_robust.tasks import sent140
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import synthetic_regression
from tff_robust.tasks import synthetic_regression_fedplus
from tff_robust.tasks import tff_baselines
from tff_robust.tasks.base import Task

TASK_NAMES = task_names.TASK_NAMES


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, use_synthetic_data: bool = False,
    cache_dir: Optional[str] = None, **options,
) -> Task:
  """Builds the task `name`; `use_synthetic_data` applies to the TFF baseline tasks and the papers' EMNIST and
  Shakespeare tasks (the others are offline), `cache_dir` to the papers' EMNIST and Shakespeare tasks (where TFF's
  loader keeps its SQLite files; None: ~/.tff). `options` are TASK_OPTIONS for the builders that take them
  (`tasks_accepting`; None: the builder's default); another raises ValueError (`builder_arguments`)."""
  if name not in TASK_NAMES:
    raise ValueError(f'task must be one of {TASK_NAMES}, got {name!r}')
  pipeline = dict(client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed)
  arguments = task_names.builder_arguments(name, **options)
  if name == 'digits':
    return digits.create_task(**pipeline, **arguments)
  if name == 'synthetic_regression':
    return synthetic_regression.create_task(**pipeline)
  if name == 'synthetic_regression_fedplus':
    return synthetic_regression_fedplus.create_task(**pipeline, **arguments)
  if name == 'digits_robust':
    return digits_fedplus.create_robust_task(**pipeline, **arguments)
  if name == 'digits_personal':
    return digits_fedplus.create_personal_task(**pipeline, **arguments)
  if name == 'digits_cohorts':
    return digits_cohorts.create_task(**pipeline, **arguments)
  if name in sent140.TASK_SETTINGS:  # TFDS's data_dir: the TFDS_DATA_DIR environment variable
    return sent140.create_task(name, **pipeline, **arguments)
  if name in fedprox_synthetic.TASK_PARAMETERS:
    return fedprox_synthetic.create_task(name, **pipeline, **arguments)
  if name in emnist_papers.TASK_NAMES:  # TFF's cache_dir: `cache_dir` (None: ~/.tff)
    return emnist_papers.create_task(
        name, **pipeline, cache_dir=cache_dir, use_synthetic_data=use_synthetic_data, **arguments
    )
  if name in shakespeare_papers.TASK_NAMES:
    return shakespeare_papers.create_task(
        name, **pipeline, cache_dir=cache_dir, use_synthetic_data=use_synthetic_data, **arguments
    )
  create = tff_baselines.create_emnist_cnn_task if name == 'emnist_cnn' else tff_baselines.create_shakespeare_rnn_task
  return create(**pipeline, use_synthetic_data=use_synthetic_data)
