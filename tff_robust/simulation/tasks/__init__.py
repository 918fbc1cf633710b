"""Training tasks selectable by name (the runner's `--task`), and the builder options the runner can set."""

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

# Options of the papers' task builders that a runner may set (None or absent: the builder's default):
#   l2_regularization: lambda >= 0 of the linear models' (lambda/2)||w||^2 (Delta-FL, notes §3.4);
#   num_devices: the number of devices N (the Fed+ tasks' parties, the RFA EMNIST writers sampled);
#   split_seed: the seed of the task's data draw or train/test split (held fixed by the papers);
#   max_evaluated_devices: cap of each device group evaluated one by one (Delta-FL's by-device split);
#   label_concentration: Dirichlet concentration of digits' per-client label mixtures (large: near-uniform);
#   validation_fraction: share of each digits (or Fed+ digits party's) training examples that replaces the
#     held-out data in evaluation.
TASK_OPTIONS = (
    'l2_regularization', 'num_devices', 'split_seed', 'max_evaluated_devices', 'label_concentration',
    'validation_fraction',
)


def _same_names(*options: str) -> dict[str, str]:
  return {option: option for option in options}


_FEDPLUS_PARTIES = {'num_devices': 'num_parties', 'split_seed': 'split_seed'}
_FEDPLUS_DIGITS = {**_FEDPLUS_PARTIES, **_same_names('validation_fraction')}
# Task -> {option: the builder's argument it sets}; the one record of which task takes which option.
_BUILDER_ARGUMENTS = {
    'digits': _same_names('label_concentration', 'validation_fraction'),
    'synthetic_regression_fedplus': _FEDPLUS_PARTIES,
    'digits_robust': _FEDPLUS_DIGITS,
    'digits_personal': _FEDPLUS_DIGITS,
    'digits_cohorts': _same_names('split_seed'),
    **{name: _same_names('split_seed', *(['l2_regularization'] if kind == 'linear' else []))
       for name, (kind, _) in sent140.TASK_SETTINGS.items()},
    **{name: _same_names('num_devices', 'split_seed') for name in fedprox_synthetic.TASK_PARAMETERS},
    'emnist_linear_rfa': _same_names('num_devices', 'l2_regularization'),
    'emnist_cnn_rfa': _same_names('num_devices'),
    'emnist_linear_dfl': _same_names('split_seed', 'l2_regularization', 'max_evaluated_devices'),
    'emnist_cnn_dfl': _same_names('split_seed', 'max_evaluated_devices'),
    'shakespeare_lstm_rfa': _same_names('split_seed'),
    'shakespeare_gru_dfl': _same_names('split_seed', 'max_evaluated_devices'),
}


def tasks_accepting(option: str) -> tuple[str, ...]:
  """The tasks (in TASK_NAMES order) whose builder takes `option`, one of TASK_OPTIONS."""
  if option not in TASK_OPTIONS:
    raise ValueError(f'option must be one of {TASK_OPTIONS}, got {option!r}')
  return tuple(name for name in TASK_NAMES if option in _BUILDER_ARGUMENTS.get(name, {}))


def builder_arguments(name: str, **options) -> dict:
  """The keyword arguments of task `name`'s builder for `options` (TASK_OPTIONS; None values are left out).

  Raises:
    ValueError: for an option outside TASK_OPTIONS, or one set (not None) for a task that does not take it;
      the message names the option and the tasks that take it.
  """
  arguments = {}
  for option, value in options.items():
    accepting = tasks_accepting(option)
    if value is None:
      continue
    if name not in accepting:
      raise ValueError(f'{option} applies to the tasks {", ".join(accepting)}, not {name!r}')
    arguments[_BUILDER_ARGUMENTS[name][option]] = value
  return arguments


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
  arguments = builder_arguments(name, **options)
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
  create = (tff_baselines.create_emnist_cnn_task if name == 'emnist_cnn'
            else tff_baselines.create_shakespeare_rnn_task)  # TFF's baselines take no seed
  return create(
      client_epochs=client_epochs, client_batch_size=client_batch_size, use_synthetic_data=use_synthetic_data
  )
