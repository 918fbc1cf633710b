r"""Trains a federated model with one of tff_robust's algorithms on a simulation task.

Example (works offline):
  python -m experiments.train --task=digits --algorithm=rfa
  python -m experiments.train --task=digits_cohorts --algorithm=mtfeel --clients_per_round=30 \
      --channel=rayleigh --snr_db=10

Writes <root_output_dir>/<experiment_name>/{metrics.csv, tensorboard/, summary.json, model_weights.npz}
(MtFEEL, which has no global model: alpha.npy and discrepancies.npy instead of model_weights.npz).

Remote execution and GPUs: start `python -m tff_robust.simulation.worker_service --port=8000` on the host that
should compute, then pass `--tff_worker_address=HOST:8000` (several comma-separated addresses shard each
cohort over the workers). `--gpus` and `--max_concurrent_computation_calls` configure the local worker.
"""

import dataclasses
import math
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow is imported

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from tff_robust.aggregators import channels
from tff_robust.aggregators import delta_median
from tff_robust.processes import dde
from tff_robust.processes import delta_fl
from tff_robust.processes import fedplus
from tff_robust.processes import mtfeel
from tff_robust.simulation import algorithms
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.simulation import execution_context
from tff_robust.simulation import gpu_placement
from tff_robust.simulation import schedules
from tff_robust.simulation import tasks
from tff_robust.simulation import training_loop

_ALGORITHM = flags.DEFINE_enum('algorithm', 'rfa', algorithms.ALGORITHM_NAMES, 'Learning algorithm.')
_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Training task.')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 100, 'Number of training rounds.', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients sampled per round.', lower_bound=1)
_CLIENT_EPOCHS = flags.DEFINE_integer(
    'client_epochs_per_round', 1, 'Local epochs over each client dataset per round.', lower_bound=1
)
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 16, 'Local batch size.', lower_bound=1)
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
flags.DEFINE_integer(
    'num_byzantine', 1, 'multi_krum, bulyan: number f of Byzantine clients tolerated.', lower_bound=0
)
flags.DEFINE_integer(
    'num_selected', 0, 'multi_krum: updates averaged; 0 means clients_per_round - num_byzantine.', lower_bound=0
)
flags.DEFINE_float(
    'clipping_norm', 1.0, 'norm_clipping: L2 bound of each client update.', lower_bound=1e-30
)
_CONFORMITY_LEVEL = flags.DEFINE_float(
    'conformity_level', 0.5, 'delta_fl: conformity level theta in (0, 1]; 1 is FedAvg.', lower_bound=1e-9,
    upper_bound=1.0,
)
_QUANTILE_METHOD = flags.DEFINE_enum(
    'quantile_method', 'exact', delta_fl.QUANTILE_METHODS,
    'delta_fl: exact (losses gathered, Algorithm 2) or secure (MM by secure averages, Algorithm 3).',
)
flags.DEFINE_integer(
    'quantile_passes', delta_fl.DEFAULT_QUANTILE_PASSES, 'delta_fl secure quantile: MM passes per round.',
    lower_bound=1,
)
_THRESHOLD_PERIOD = flags.DEFINE_integer(
    'threshold_period', 1, 'delta_fl: recompute the threshold every this many rounds (T_eta).', lower_bound=1
)
_FEDPLUS_SIGMA = flags.DEFINE_float(
    'fedplus_sigma', 1.0, 'fedplus_*: proximal penalty sigma >= 0 (kappa = 1 / (1 + lr sigma)).', lower_bound=0.0
)
_FEDPLUS_DELTA = flags.DEFINE_float(
    'fedplus_delta', fedplus.DEFAULT_DELTA, 'fedplus_*: smoothing/personalisation threshold delta > 0.',
    lower_bound=1e-30,
)
_LOCAL_INIT_MIXING = flags.DEFINE_float(
    'local_init_mixing', 0.0, 'fedplus_*: lambda in [0, 1]; local training starts at (1-lambda) w_k + lambda w.',
    lower_bound=0.0, upper_bound=1.0,
)
flags.DEFINE_enum(
    'fedplus_solver', 'irls', delta_median.SOLVERS,
    'fedplus_geomed/comed: irls (reweighted means) or fixed_point (the paper\'s iteration (25)).',
)
flags.DEFINE_integer(
    'fedplus_max_iterations', delta_median.DEFAULT_MAX_ITERATIONS,
    'fedplus_geomed/comed: secure sums per aggregation after the first mean.', lower_bound=1,
)
_PERSONAL_LEARNING_RATE = flags.DEFINE_float(
    'personal_learning_rate', None,
    'personalized_rfa: learning rate >= 0 of the personal step (u_i); unset: --client_learning_rate, as in the '
    'paper.', lower_bound=0.0,
)
_FEDPROX_MU = flags.DEFINE_float(
    'fedprox_mu', 0.01,
    'fedprox: proximal strength mu >= 0 of (mu/2)||w - w_t||^2 (0: FedAvg); needs client_learning_rate * mu < 1.',
    lower_bound=0.0,
)
_CHANNEL = flags.DEFINE_enum(
    'channel', 'none', channels.CHANNEL_NAMES,
    'mtfeel/signsgd uplink for the sign bits: none (error-free), rayleigh (per-bit BPSK over Rayleigh fading), '
    'outage (block outage, Theorem 3) or bsc (binary symmetric channel).',
)
_SNR_DB = flags.DEFINE_float('snr_db', 10.0, 'rayleigh/outage channel: SNR in dB (finite).')
_FLIP_PROBABILITY = flags.DEFINE_float(
    'flip_probability', 0.0, 'bsc channel: bit flip probability p in [0, 1].', lower_bound=0.0, upper_bound=1.0
)
flags.DEFINE_float(
    'outage_rate', 1.0, 'outage channel: rate r = d/B > 0 in bits per channel use.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'on_outage', 'drop', channels.OUTAGE_ACTIONS, 'outage channel: drop the packet or receive random bits.'
)
flags.DEFINE_float(
    'alpha_learning_rate', 0.1, 'mtfeel: step mu >= 0 of the alpha update (0 freezes alpha).', lower_bound=0.0
)
flags.DEFINE_float(
    'pen_scale', 1.0, 'mtfeel: weight M sqrt((N/2) log(|Lambda|/delta)) >= 0 of the variance penalty of (7).',
    lower_bound=0.0,
)
flags.DEFINE_enum(
    'mtfeel_update_order', 'w_then_alpha', mtfeel.UPDATE_ORDERS,
    'mtfeel: weight the signs with alpha^t (w_then_alpha, Algorithm 2) or alpha^{t+1} (the proof\'s order).',
)
flags.DEFINE_integer(
    'dde_steps', 20, 'mtfeel: discrepancy-estimation ascent steps before training (0: dhat = 0).', lower_bound=0
)
flags.DEFINE_float(
    'dde_learning_rate', 0.01, 'mtfeel: discrepancy-estimation ascent step > 0.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'dde_output', 'last', dde.OUTPUTS, 'mtfeel: discrepancy estimate at the last step or the running max.'
)
_CLIENT_LR_DECAY = flags.DEFINE_float(
    'client_lr_decay', 1.0,
    'Step decay c in (0, 1] of the client learning rate: gamma_0 c^floor(t / t_0) in round t + 1 (1: constant).',
    lower_bound=1e-30, upper_bound=1.0,
)
_CLIENT_LR_DECAY_ROUNDS = flags.DEFINE_integer(
    'client_lr_decay_rounds', 1, 'Rounds t_0 between two decays of the client learning rate.', lower_bound=1
)
_MINIBATCH_FRACTION = flags.DEFINE_float(
    'minibatch_fraction', None,
    f'{", ".join(algorithms.FULL_GRADIENT_ALGORITHM_NAMES)}: each round, each client\'s gradient is on a fresh '
    'uniform sample of this fraction, in (0, 1], of its examples (RFA\'s minibatch SGD baseline: 0.1); unset: all '
    'of them. Needs --client_epochs_per_round=1.',
)
_STRAGGLER_FRACTION = flags.DEFINE_float(
    'straggler_fraction', 0.0,
    'Share in [0, 1] of each round\'s cohort that straggles: trains x ~ U{1..E} local epochs instead of '
    'E = --client_epochs_per_round (FedProx\'s systems heterogeneity); 0: none.',
    lower_bound=0.0, upper_bound=1.0,
)
_ROUNDS_PER_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 0,
    'Checkpoint every this many rounds (0: never); a run on an output directory with a checkpoint resumes.',
    lower_bound=0,
)
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of client sampling and model initialisation.', lower_bound=0)
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
_EXPERIMENT_NAME = flags.DEFINE_string(
    'experiment_name', None, 'Subdirectory of the run; defaults to <task>_<algorithm>_seed<seed>.'
)
_ROUNDS_PER_EVAL = flags.DEFINE_integer('rounds_per_eval', 10, 'Rounds between evaluations.', lower_bound=1)
_USE_SYNTHETIC_DATA = flags.DEFINE_bool(
    'use_synthetic_data', False, 'TFF baseline tasks: use TFF synthetic data (offline) instead of real data.'
)
_DATA_CACHE_DIR = flags.DEFINE_string(
    'data_cache_dir', None,
    "The papers' EMNIST and Shakespeare tasks: directory of TFF's downloaded SQLite files (default ~/.tff). "
    'Sent140 reads TensorFlow Datasets\' TFDS_DATA_DIR environment variable.',
)
_L2_REGULARIZATION = flags.DEFINE_float(
    'l2_regularization', None,
    'lambda >= 0 of the loss term (lambda/2)||w||^2 (Delta-FL\'s linear models); unset: the task\'s default (0). '
    f'Tasks: {", ".join(tasks.tasks_accepting("l2_regularization"))}.',
    lower_bound=0.0,
)
_NUM_DEVICES = flags.DEFINE_integer(
    'num_devices', None,
    'Number of devices N (the Fed+ tasks\' parties; the writers sampled by RFA\'s EMNIST); unset: the task\'s '
    f'default. Tasks: {", ".join(tasks.tasks_accepting("num_devices"))}.',
    lower_bound=1,
)
_SPLIT_SEED = flags.DEFINE_integer(
    'split_seed', None,
    'Seed of the task\'s data draw or train/test split (--seed leaves it fixed); unset: the task\'s default (0). '
    f'Tasks: {", ".join(tasks.tasks_accepting("split_seed"))}.',
    lower_bound=0,
)
_MAX_EVALUATED_DEVICES = flags.DEFINE_integer(
    'max_evaluated_devices', None,
    'Devices evaluated one by one per group at most (a seeded sample); unset: every device. '
    f'Tasks: {", ".join(tasks.tasks_accepting("max_evaluated_devices"))}.',
    lower_bound=1,
)
_LABEL_CONCENTRATION = flags.DEFINE_float(
    'label_concentration', None,
    'Dirichlet concentration > 0 of each client\'s label mixture (unset: 0.5, two or three digits per client; '
    '100: nearly the population\'s mixture, like the RFA paper\'s EMNIST writers). '
    f'Tasks: {", ".join(tasks.tasks_accepting("label_concentration"))}.',
    lower_bound=1e-3, upper_bound=1e6,
)
_VALIDATION_FRACTION = flags.DEFINE_float(
    'validation_fraction', None,
    'Share in (0, 1) of each client\'s examples held out of training as its validation data, which then '
    'replaces the test data in every evaluation (pooled, devices, personal): for choosing hyperparameters '
    'without the test data. Unset: train on all, evaluate on the test data. Tasks: '
    f'{", ".join(tasks.tasks_accepting("validation_fraction"))}.',
)
# The task options (`tasks.TASK_OPTIONS`) the runner sets; each reaches the builders that take it.
_TASK_OPTION_FLAGS = (
    _L2_REGULARIZATION, _NUM_DEVICES, _SPLIT_SEED, _MAX_EVALUATED_DEVICES, _LABEL_CONCENTRATION, _VALIDATION_FRACTION,
)
_CORRUPTION = flags.DEFINE_enum(
    'corruption', 'none', corruption.CORRUPTIONS,
    'Corrupted clients: none; data (the task\'s data poisoning); gaussian or omniscient update poisoning.',
)
_CORRUPTION_FRACTION = flags.DEFINE_float(
    'corruption_fraction', 0.0, 'Share rho of the training examples held by corrupted clients, in [0, 1).',
    lower_bound=0.0, upper_bound=0.9999999,
)
_PROGRESS_BAR = flags.DEFINE_bool('progress_bar', True, 'Show a tqdm progress bar.')
_TFF_WORKER_ADDRESS = flags.DEFINE_list(
    'tff_worker_address', [],
    'host:port of TFF executor services (python -m tff_robust.simulation.worker_service) to run on; several '
    'shard each cohort over them (algorithms with one aggregation per round only). Empty: a local worker.',
)
_GPUS = flags.DEFINE_string(
    'gpus', gpu_placement.AUTO,
    "Local worker: GPUs client computation may use: 'auto' (all TensorFlow sees), 'none' (CPU) or '0,1'.",
)
_MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', -1,
    'Local worker: parallel client computations at most (bounds GPU memory); non-positive: no limit.',
)

def _is_worker_address(address: str) -> bool:
  host, _, port = address.rpartition(':')
  return bool(host) and port.isdigit() and 1 <= int(port) <= 65535


def _gpu_setting_is_valid(setting: str) -> bool:
  try:
    gpu_placement.check_gpu_setting(setting)
  except ValueError as error:
    raise flags.ValidationError(str(error)) from None
  return True


flags.register_validator(
    'tff_worker_address', lambda addresses: all(_is_worker_address(a) for a in addresses),
    message='--tff_worker_address must be a comma-separated list of host:port with port in [1, 65535]',
)
flags.register_validator('gpus', _gpu_setting_is_valid)
flags.register_validator(
    'snr_db', lambda value: math.isfinite(value), message='--snr_db must be a finite number of dB'
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


# Flags named like the `AlgorithmConfig` fields they set.
_CONFIG_FLAGS = tuple(field.name for field in dataclasses.fields(algorithms.AlgorithmConfig))


def _algorithm_config(flag_values: dict) -> algorithms.AlgorithmConfig:
  settings = {name: flag_values[name] for name in _CONFIG_FLAGS}
  settings['num_selected'] = settings['num_selected'] or None  # 0: the rule's default
  return algorithms.AlgorithmConfig(**settings)


def _update_attack(corruption_name: str):
  return corruption_name if corruption_name in corruption.UPDATE_ATTACKS else None


def _algorithm_settings_are_valid(flag_values: dict) -> bool:
  """Cross-flag check of --algorithm against its settings, the cohort size and --corruption (no TFF build).

  Runs once every flag is parsed, so the settings it is not registered on are read from `flags.FLAGS`.
  """
  flag_values = {**flags.FLAGS.flag_values_dict(), **flag_values}
  try:
    algorithms.check_settings(
        flag_values['algorithm'], _algorithm_config(flag_values), clients_per_round=flag_values['clients_per_round'],
        update_attack=_update_attack(flag_values['corruption']),
    )
  except ValueError as error:
    raise flags.ValidationError(f'--algorithm={flag_values["algorithm"]}: {error}') from None
  if flag_values['client_lr_decay'] != 1.0 and flag_values['algorithm'] not in algorithms.CLIENT_SCHEDULE_ALGORITHM_NAMES:
    raise flags.ValidationError(
        f'--client_lr_decay applies to {", ".join(algorithms.CLIENT_SCHEDULE_ALGORITHM_NAMES)}, '
        f'not --algorithm={flag_values["algorithm"]}'
    )
  return True


def _client_pipeline_flags_are_valid(flag_values: dict) -> bool:
  """Minibatches apply to one-gradient algorithms with one epoch of data, stragglers to local epochs."""
  algorithm, epochs = flag_values['algorithm'], flag_values['client_epochs_per_round']
  full_gradient = algorithm in algorithms.FULL_GRADIENT_ALGORITHM_NAMES
  if flag_values['minibatch_fraction'] is not None and not full_gradient:
    raise flags.ValidationError(
        f'--minibatch_fraction applies to --algorithm={"|".join(algorithms.FULL_GRADIENT_ALGORITHM_NAMES)}, '
        f'not --algorithm={algorithm}'
    )
  if flag_values['minibatch_fraction'] is not None and epochs != 1:
    raise flags.ValidationError(
        f'--minibatch_fraction samples each example at most once: it needs --client_epochs_per_round=1, got {epochs}'
    )
  if flag_values['straggler_fraction'] > 0 and full_gradient:
    raise flags.ValidationError(
        f'--straggler_fraction applies to algorithms that train local epochs, not --algorithm={algorithm}'
    )
  return True


flags.register_multi_flags_validator(
    ('algorithm', 'client_epochs_per_round', 'minibatch_fraction', 'straggler_fraction'),
    _client_pipeline_flags_are_valid,
)


def _cohort_transform():
  """The per-round change to the cohort's data the flags ask for (the validators allow at most one)."""
  if _MINIBATCH_FRACTION.value is not None:
    return client_pipelines.minibatch(_MINIBATCH_FRACTION.value)
  if _STRAGGLER_FRACTION.value > 0:
    return client_pipelines.stragglers(
        _STRAGGLER_FRACTION.value, epochs=_CLIENT_EPOCHS.value, batch_size=_CLIENT_BATCH_SIZE.value
    )
  return None


def _task_options_are_valid(flag_values: dict) -> bool:
  """Refuses a task option (`_TASK_OPTION_FLAGS`) set for a task whose builder does not take it."""
  try:
    tasks.builder_arguments(flag_values['task'], **{flag.name: flag_values[flag.name] for flag in _TASK_OPTION_FLAGS})
  except ValueError as error:
    raise flags.ValidationError(f'--{error}') from None  # "--<option> applies to the tasks ..., not '<task>'"
  return True


flags.register_multi_flags_validator(('task', *(flag.name for flag in _TASK_OPTION_FLAGS)), _task_options_are_valid)
flags.register_multi_flags_validator(
    ('algorithm', 'clients_per_round', 'corruption', 'num_byzantine', 'num_selected', 'trim_fraction',
     'client_lr_decay', 'client_learning_rate', 'fedprox_mu', 'personal_learning_rate'),
    _algorithm_settings_are_valid,
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  logging.set_verbosity(logging.WARNING)
  tf.keras.utils.set_random_seed(_SEED.value)
  task_options = {flag.name: flag.value for flag in _TASK_OPTION_FLAGS if flag.value is not None}
  task = tasks.create_task(
      _TASK.value,
      client_epochs=_CLIENT_EPOCHS.value,
      client_batch_size=_CLIENT_BATCH_SIZE.value,
      seed=_SEED.value,
      use_synthetic_data=_USE_SYNTHETIC_DATA.value,
      cache_dir=_DATA_CACHE_DIR.value,
      **task_options,
  )
  try:
    training_loop.check_clients_per_round(
        task, _CLIENTS_PER_ROUND.value,
        every_client_every_round=_ALGORITHM.value in algorithms.INDEXED_ALGORITHM_NAMES,
    )
  except ValueError as error:
    raise app.UsageError(f'--clients_per_round: {error}') from None
  if _TFF_WORKER_ADDRESS.value:
    execution_context.set_remote_execution_context(_TFF_WORKER_ADDRESS.value)
  else:
    execution_context.set_local_execution_context(
        max_concurrent_computation_calls=_MAX_CONCURRENT_COMPUTATION_CALLS.value,
        visible_gpus=gpu_placement.visible_gpus_setting(_GPUS.value),
    )
  config = _algorithm_config(flags.FLAGS.flag_values_dict())
  process = algorithms.build_learning_process(
      _ALGORITHM.value, task.model_fn, config, clients_per_round=_CLIENTS_PER_ROUND.value,
      update_attack=_update_attack(_CORRUPTION.value), seed=_SEED.value,
  )
  if len(_TFF_WORKER_ADDRESS.value) > 1:
    execution_context.check_shardable(process.next, f'--algorithm={_ALGORITHM.value}')
  corrupted = (
      frozenset() if _CORRUPTION.value == 'none'
      else corruption.select_corrupted_clients(task, _CORRUPTION_FRACTION.value, _SEED.value)
  )
  experiment_name = _EXPERIMENT_NAME.value or f'{_TASK.value}_{_ALGORITHM.value}_seed{_SEED.value}'
  output_dir = os.path.join(_ROOT_OUTPUT_DIR.value, experiment_name)
  summary = training_loop.run_training(
      process,
      task,
      corruption.make_client_data_fn(task, _CORRUPTION.value, corrupted),
      total_rounds=_TOTAL_ROUNDS.value,
      clients_per_round=_CLIENTS_PER_ROUND.value,
      rounds_per_eval=_ROUNDS_PER_EVAL.value,
      seed=_SEED.value,
      output_dir=output_dir,
      show_progress=_PROGRESS_BAR.value,
      rounds_per_checkpoint=_ROUNDS_PER_CHECKPOINT.value,
      cohort_transform=_cohort_transform(),
      corrupted_client_ids=corrupted,
      client_learning_rate_schedule=None if _CLIENT_LR_DECAY.value == 1.0 else schedules.step_decay(
          flags.FLAGS.client_learning_rate, _CLIENT_LR_DECAY.value, _CLIENT_LR_DECAY_ROUNDS.value
      ),
      summary_extras=dict(
          algorithm=_ALGORITHM.value, task=_TASK.value, seed=_SEED.value, corruption=_CORRUPTION.value,
          corruption_fraction=_CORRUPTION_FRACTION.value,
          corruption_weight_share=corruption.corrupted_weight_share(task, corrupted), **task_options,
          **({'conformity_level': _CONFORMITY_LEVEL.value, 'quantile_method': _QUANTILE_METHOD.value,
              'threshold_period': _THRESHOLD_PERIOD.value} if _ALGORITHM.value == 'delta_fl' else {}),
          **({'fedplus_sigma': _FEDPLUS_SIGMA.value, 'fedplus_delta': _FEDPLUS_DELTA.value,
              'local_init_mixing': _LOCAL_INIT_MIXING.value} if _ALGORITHM.value.startswith('fedplus_') else {}),
          **({'fedprox_mu': _FEDPROX_MU.value} if _ALGORITHM.value == 'fedprox' else {}),
          **({'personal_learning_rate': _PERSONAL_LEARNING_RATE.value}
             if _PERSONAL_LEARNING_RATE.value is not None else {}),
          **({'minibatch_fraction': _MINIBATCH_FRACTION.value} if _MINIBATCH_FRACTION.value is not None else {}),
          **({'straggler_fraction': _STRAGGLER_FRACTION.value} if _STRAGGLER_FRACTION.value > 0 else {}),
          **({'channel': _CHANNEL.value, 'snr_db': _SNR_DB.value, 'flip_probability': _FLIP_PROBABILITY.value}
             if _ALGORITHM.value in algorithms.INDEXED_ALGORITHM_NAMES else {}),
      ),
  )
  headline = {k: v for k, v in summary.items() if k in ('eval/accuracy', 'eval/mse', 'eval/loss', 'eval/error_mean',
                                                          'eval/error_p90', 'personal/loss_mean', 'personal/error_mean',
                                                          'personal_honest/error_mean', 'personal_corrupted/error_mean',
                                                          'rounds', 'secure_average_calls')}
  print(f'{_ALGORITHM.value} on {_TASK.value}: {headline}')
  print(f'metrics: {output_dir}/metrics.csv  summary: {output_dir}/summary.json')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main)
