"""Training tasks selectable by name (the runner's `--task`)."""

from tff_robust.simulation.tasks import digits
from tff_robust.simulation.tasks import digits_cohorts
from tff_robust.simulation.tasks import digits_fedplus
from tff_robust.simulation.tasks import synthetic_regression
from tff_robust.simulation.tasks import synthetic_regression_fedplus
from tff_robust.simulation.tasks import tff_baselines
from tff_robust.simulation.tasks.base import Task

TASK_NAMES = (
    'digits', 'synthetic_regression', 'emnist_cnn', 'shakespeare_rnn', 'synthetic_regression_fedplus',
    'digits_robust', 'digits_personal', 'digits_cohorts',
)


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, use_synthetic_data: bool = False
) -> Task:
  """Builds the task `name`; `use_synthetic_data` applies to the TFF baseline tasks (the others are offline)."""
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
  if name == 'emnist_cnn':
    return tff_baselines.create_emnist_cnn_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data
    )
  if name == 'shakespeare_rnn':
    return tff_baselines.create_shakespeare_rnn_task(
        client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data
    )
  raise ValueError(f'task must be one of {TASK_NAMES}, got {name!r}')
