"""Training tasks selectable by name (the runner's `--task`)."""

from typing import Optional

from tff_robust.simulation.tasks import digits
from tff_robust.simulation.tasks import digits_cohorts
from tff_robust.simulation.tasks import digits_fedplus
from tff_robust.simulation.tasks import emnist_papers
from tff_robust.simulation.tasks import fedprox_synthetic
from tff_robust.simulation.tasks import sent140
from tff_robust.simulation.tasks import shakespeare_papers
from tff_robust.simulation.tasks import synthetic_regression
from tff_robust.simulation.tasks import synthetic_regression_fedplus
from tff_robust.simulation.tasks import tff_baselines
from tff_robust.simulation.tasks.base import Task

TASK_NAMES = (
    'digits', 'synthetic_regression', 'emnist_cnn', 'shakespeare_rnn', 'synthetic_regression_fedplus',
    'digits_robust', 'digits_personal', 'digits_cohorts',
) + tuple(sent140.TASK_SETTINGS) + tuple(fedprox_synthetic.TASK_PARAMETERS)
TASK_NAMES += emnist_papers.TASK_NAMES + shakespeare_papers.TASK_NAMES


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, use_synthetic_data: bool = False,
    cache_dir: Optional[str] = None,
) -> Task:
  """Builds the task `name`; `use_synthetic_data` applies to the TFF baseline tasks and the papers' EMNIST and
  Shakespeare tasks (the others are offline), `cache_dir` to the papers' EMNIST and Shakespeare tasks (where TFF's
  loader keeps its SQLite files; None: ~/.tff)."""
  if name == 'digits':
    return digits.create_task(client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed)
  if name == 'synthetic_regression':
    return synthetic_regression.create_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name == 'synthetic_regression_fedplus':
    return synthetic_regression_fedplus.create_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name == 'digits_robust':
    return digits_fedplus.create_robust_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name == 'digits_personal':
    return digits_fedplus.create_personal_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name == 'digits_cohorts':
    return digits_cohorts.create_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name in sent140.TASK_SETTINGS:  # TFDS's data_dir: the TFDS_DATA_DIR environment variable
    return sent140.create_task(
        name, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name in fedprox_synthetic.TASK_PARAMETERS:
    return fedprox_synthetic.create_task(
        name, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
    )
  if name in emnist_papers.TASK_NAMES:  # TFF's cache_dir: `cache_dir` (None: ~/.tff)
    return emnist_papers.create_task(
        name, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed, cache_dir=cache_dir,
        use_synthetic_data=use_synthetic_data,
    )
  if name in shakespeare_papers.TASK_NAMES:
    return shakespeare_papers.create_task(
        name, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed, cache_dir=cache_dir,
        use_synthetic_data=use_synthetic_data,
    )
  if name == 'emnist_cnn':
    return tff_baselines.create_emnist_cnn_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data
    )
  if name == 'shakespeare_rnn':
    return tff_baselines.create_shakespeare_rnn_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data
    )
  raise ValueError(f'task must be one of {TASK_NAMES}, got {name!r}')
