"""The flags of `python -m experiments.train` and every check of them that needs no TensorFlow.

The flags are defined by concern, each in its own module: the algorithm and its hyperparameters
(`algorithm_flags`), the task and the clients' local pipeline (`task_flags`), corrupted clients
(`corruption_flags`), where computations run (`runtime_flags`); this module defines the run's own (rounds, cohort,
seed, output, evaluation and checkpoint periods), checks the flags together and the run's directory.
`runner_flags()` lists them all.

`experiments.train` parses and checks these flags, and the run's directory, before it imports TensorFlow, so
a typo or a bad value is refused in about a second with one line naming the flag; NaN and +-inf are refused in
every float flag (`tff_robust.command_line.finite_flags`, which the runner parses with); so are GPUs asked of a
worker binary built without CUDA (`check_local_worker`). The checks that need the
task's data or TensorFlow (a cohort larger than the task, an algorithm's constraints on the cohort, the GPUs
TensorFlow sees) are `experiments.train_program`'s.

A flag of one algorithm, attack or channel set for a run without it is refused by one rule over one table
(`experiments.flag_users`).
"""

import functools
import os
import sys
import tempfile

from absl import flags

from experiments import algorithm_flags
from experiments import corruption_flags
from experiments import flag_users
from experiments import runtime_flags
from experiments import task_flags
from tff_robust.command_line import seeds
from tff_robust.aggregators.defences import registry as defence_registry
from tff_robust.core.attacks import targeted_catalog
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries
from tff_robust.runtime import worker_tls
from tff_robust.simulation import algorithm_names
from tff_robust.simulation import run_settings
from tff_robust.tasks import task_names

# The cohort of an unset --clients_per_round (at most the task's clients).
DEFAULT_CLIENTS_PER_ROUND = 10


class Refusal(ValueError):
  """The command cannot run as given; the message is one line naming the flag(s) and what to do."""


TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 100, 'Number of training rounds.', lower_bound=1)
CLIENTS_PER_ROUND = flags.DEFINE_integer(
    'clients_per_round', None,
    f'Clients sampled per round; unset: {DEFAULT_CLIENTS_PER_ROUND} (every client of a task with fewer), and every '
    f'device for {", ".join(algorithm_names.INDEXED_ALGORITHM_NAMES)}, which train all of them every round.',
    lower_bound=1,
)
ROUNDS_PER_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 0,
    'Checkpoint every this many rounds (0: never); a command on an output directory with a checkpoint resumes '
    'from it, whatever this flag (a larger --total_rounds continues the run).',
    lower_bound=0,
)
SEED = flags.DEFINE_integer('seed', 0, 'Seed of client sampling and model initialisation.', lower_bound=0,
                            upper_bound=seeds.MAX)
ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
EXPERIMENT_NAME = flags.DEFINE_string(
    'experiment_name', None, 'Subdirectory of the run; defaults to <task>_<algorithm>_seed<seed>.'
)
OVERWRITE = flags.DEFINE_bool(
    'overwrite', False,
    'Delete the run\'s directory <root_output_dir>/<experiment_name> and start afresh. Without it, a directory '
    'holding a run with other settings (run_settings.json) is refused.',
)
ROUNDS_PER_EVAL = flags.DEFINE_integer('rounds_per_eval', 10, 'Rounds between evaluations.', lower_bound=1)
STOP_AFTER_ROUNDS_WITHOUT_UPDATE = flags.DEFINE_integer(
    'stop_after_rounds_without_update', 3,
    'Stop with exit status 3 after this many rounds in a row in which no client\'s update counted (every update '
    'non-finite, every dataset empty or every client filtered out; each such round is logged as a warning and '
    'counted in summary.json); 0: never stop.',
    lower_bound=0,
)
PROGRESS_BAR = flags.DEFINE_bool('progress_bar', True, 'Show a tqdm progress bar.')


# Flags that do not change what a run computes, only how far it goes (--total_rounds may grow on a resume), what
# it reports and when, where it is written or where it runs. Every other flag defines the run: a directory holds
# one run, and a command whose defining flags differ from those recorded there is refused (`check_run_directory`).
NON_DEFINING_FLAGS = frozenset({
    'total_rounds', 'rounds_per_eval', 'rounds_per_checkpoint', 'progress_bar', 'root_output_dir', 'experiment_name',
    'overwrite', 'data_cache_dir', 'tff_worker_address', 'tff_worker_credentials', 'gpus',
    'max_concurrent_computation_calls', 'worker_binary', 'stop_after_rounds_without_update',
})

# The modules defining the runner's flags, this one last.
_FLAG_MODULES = (algorithm_flags, task_flags, corruption_flags, runtime_flags, sys.modules[__name__])


def runner_flags(flag_values: flags.FlagValues = flags.FLAGS) -> list:
  """Every flag of the runner, in `flag_values` (defined there by importing this module)."""
  return [flag for module in _FLAG_MODULES for flag in flag_values.get_flags_for_module(module.__name__)]


flags.register_validator(
    'root_output_dir', lambda path: bool(path), message='--root_output_dir must be a non-empty path'
)
flags.register_validator(
    'experiment_name',
    lambda name: name is None or (name and os.sep not in name and name not in ('.', '..')),
    message='--experiment_name must be a single non-empty path component',
)



def _flag_is_used(name: str, flag_values: dict) -> bool:
  """`flag_users`' rule: a flag of one algorithm, attack or channel set for a run without it is refused."""
  refusal = flag_users.refusal(name, flag_values, flags.FLAGS[name].default)
  if refusal:
    raise flags.ValidationError(refusal)
  return True


def _client_pipeline_flags_are_valid(flag_values: dict) -> bool:
  """Minibatches need one epoch of data, stragglers at least two; at most one of the cost bounds (which algorithms
  take them: the table)."""
  epochs = flag_values['client_epochs_per_round']
  if flag_values['minibatch_fraction'] is not None and epochs != 1:
    raise flags.ValidationError(
        f'--minibatch_fraction samples each example at most once: it needs --client_epochs_per_round=1, got {epochs}'
    )
  if flag_values['max_client_examples'] is not None and flag_values['straggler_fraction'] > 0:
    raise flags.ValidationError('--max_client_examples and --straggler_fraction cannot be combined')
  if flag_values['straggler_fraction'] > 0 and epochs == 1:
    raise flags.ValidationError('--straggler_fraction needs --client_epochs_per_round >= 2: a straggler trains x ~ '
                                'U{1, ..., E} epochs, and with E = 1 every x is 1, so no client would straggle')
  return True


def _corruption_flags_are_valid(flag_values: dict) -> bool:
  """Label flipping needs a task with class labels; a targeted attack a task with a pixel trigger that its trigger
  fits (target a class, patch within the input; the edge case's source and target distinct classes), model
  replacement's boost a server learning rate > 0, and constrain-and-scale no client learning-rate schedule (an
  attack's parameters need their attack: the table)."""
  corruption, task = flag_values['corruption'], flag_values['task']
  if corruption == 'label_flipping' and task not in task_names.LABEL_FLIPPING_TASK_NAMES:
    raise flags.ValidationError(
        f'--corruption=label_flipping applies to the tasks with class labels '
        f'({", ".join(task_names.LABEL_FLIPPING_TASK_NAMES)}), not --task={task}'
    )
  targeted = targeted_catalog.lookup(corruption)  # its spelling is the --corruption validator's
  if targeted is None:
    return True
  if task not in task_names.BACKDOOR_TASKS:
    raise flags.ValidationError(f'--corruption={corruption}: {targeted.name} applies to the tasks with a pixel '
                                f'trigger ({", ".join(task_names.BACKDOOR_TASKS)}), not --task={task}')
  image_shape, num_classes = task_names.BACKDOOR_TASKS[task]
  try:
    targeted.check_task(image_shape, num_classes)
  except ValueError as error:
    raise flags.ValidationError(f'--corruption={corruption}: {error} for --task={task}') from None
  if targeted.update_attack() is not None and not flag_values['server_learning_rate'] > 0:
    raise flags.ValidationError(f'--corruption={corruption} boosts by the server learning rate: it needs '
                                f'--server_learning_rate > 0, got {flag_values["server_learning_rate"]}')
  if targeted.attacker_alpha() is not None and flag_values['client_lr_decay'] != 1.0:
    raise flags.ValidationError(f'--corruption={corruption} trains its attackers in a client work without a '
                                'client learning-rate schedule: --client_lr_decay must be 1')
  return True


def _task_options_are_valid(flag_values: dict) -> bool:
  """Refuses a task option (`task_flags.TASK_OPTION_FLAGS`) set for a task whose builder does not take it."""
  try:
    task_names.builder_arguments(
        flag_values['task'], **{flag.name: flag_values[flag.name] for flag in task_flags.TASK_OPTION_FLAGS}
    )
  except ValueError as error:
    raise flags.ValidationError(f'--{error}') from None  # "--<option> applies to the tasks ..., not '<task>'"
  return True


def _register_flag_use_validators() -> None:
  for name, users in flag_users.FLAG_USERS.items():
    flags.register_multi_flags_validator((name, *users.selectors), functools.partial(_flag_is_used, name))


_register_flag_use_validators()  # first: does a flag apply at all?
flags.register_multi_flags_validator(
    ('client_epochs_per_round', 'minibatch_fraction', 'straggler_fraction', 'max_client_examples'),
    _client_pipeline_flags_are_valid,
)
flags.register_multi_flags_validator(('corruption', 'task', 'server_learning_rate', 'client_lr_decay'),
                                     _corruption_flags_are_valid)
flags.register_multi_flags_validator(
    ('task', *(flag.name for flag in task_flags.TASK_OPTION_FLAGS)), _task_options_are_valid
)


def _defence_is_valid(flag_values: dict) -> bool:
  """--defence must parse, and it is the aggregator of --algorithm=fedavg only."""
  spec = flag_values['defence']
  if spec is None:
    return True
  try:
    defence_registry.parse(spec)
  except ValueError as error:
    raise flags.ValidationError(f'--defence: {error}') from None
  if flag_values['algorithm'] != 'fedavg':
    raise flags.ValidationError(
        f'--defence is the aggregator of --algorithm=fedavg, not --algorithm={flag_values["algorithm"]} (whose '
        'aggregator is its own); pass --algorithm=fedavg'
    )
  return True


flags.register_multi_flags_validator(('defence', 'algorithm'), _defence_is_valid)


def experiment_name() -> str:
  """--experiment_name, or <task>_<algorithm or defence spec>_seed<seed> (the spec's brackets and '>' as '_')."""
  defence = algorithm_flags.DEFENCE.value
  method = algorithm_flags.ALGORITHM.value if defence is None else defence_registry.path_component(defence)
  return EXPERIMENT_NAME.value or f'{task_flags.TASK.value}_{method}_seed{SEED.value}'


def output_dir() -> str:
  """The run's directory, <root_output_dir>/<experiment_name>."""
  return os.path.join(ROOT_OUTPUT_DIR.value, experiment_name())



def _defining_flags() -> list:
  """The runner's flags outside NON_DEFINING_FLAGS."""
  return [flag for flag in runner_flags() if flag.name not in NON_DEFINING_FLAGS]


def defining_settings() -> dict:
  """{flag name: value} of every defining flag (unset ones: their default)."""
  return {flag.name: flag.value for flag in _defining_flags()}


def defining_defaults() -> dict:
  """{flag name: default value} of every defining flag."""
  return {flag.name: flag.default for flag in _defining_flags()}


def check_root_output_dir() -> None:
  """Raises Refusal unless --root_output_dir is (or can be made) a directory this process can write in."""
  root = ROOT_OUTPUT_DIR.value
  try:
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryFile(dir=root):
      pass
  except OSError as error:
    raise Refusal(
        f'--root_output_dir={root} is not a directory this user can write in ({error.strerror or error})'
    ) from None



def local_worker_binary() -> str:
  """The binary a local worker of this run starts (`worker_binaries.resolve`); Refusal naming its source if bad."""
  try:
    return worker_binaries.resolve(runtime_flags.WORKER_BINARY.value, name='--worker_binary')
  except (ValueError, RuntimeError) as error:
    raise Refusal(str(error)) from None


def check_local_worker() -> None:
  """Raises Refusal for --gpus indices that the local worker binary cannot use (it has no CUDA; no TensorFlow
  needed: `gpu_placement.check_binary_supports`). The GPUs TensorFlow sees are counted by `train_program`."""
  try:
    gpu_placement.check_binary_supports(runtime_flags.GPUS.value, local_worker_binary())
  except ValueError as error:
    raise Refusal(str(error)) from None


def check_remote_workers() -> None:
  """Raises Refusal for --tff_worker_credentials without remote workers, or whose files cannot serve (missing,
  unreadable, not PEM, a key that does not match its certificate: `worker_tls.client_credentials`)."""
  credentials = runtime_flags.TFF_WORKER_CREDENTIALS.value
  if credentials is None:
    return
  if not runtime_flags.TFF_WORKER_ADDRESS.value:
    raise Refusal('--tff_worker_credentials is for remote workers: give their --tff_worker_address too (the local '
                  'worker needs no TLS: no other host can reach it)')
  try:
    worker_tls.client_credentials(credentials)
  except ValueError as error:
    raise Refusal(str(error)) from None


def check_run_directory() -> None:
  """Raises Refusal if the run's directory holds a run this command would wrongly resume or overwrite.

  A directory records the defining flags of its run in `run_settings.json` (`run_settings`); a command with other
  values is refused, naming the differing flags, unless --overwrite starts afresh.
  """
  if OVERWRITE.value:
    return
  try:
    run_settings.check_same_run(output_dir(), defining_settings(), defining_defaults())
  except run_settings.SettingsMismatch as error:
    raise Refusal(
        f'{error}; to start afresh pass --overwrite (deletes {output_dir()}) or choose another --experiment_name'
    ) from None
