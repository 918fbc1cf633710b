r"""Trains a federated model with one of tff_robust's algorithms on a simulation task.

Example (works offline):
  python -m experiments.train --task=digits --algorithm=rfa
  python -m experiments.train --task=digits_cohorts --algorithm=mtfeel --clients_per_round=30 \
      --channel=rayleigh --snr_db=10

Writes <root_output_dir>/<experiment_name>/{metrics.csv, tensorboard/, summary.json} (MtFEEL also alpha.npy
and discrepancies.npy).
"""

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
from tff_robust.simulation import corruption
from tff_robust.simulation import execution_context
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
_CLIENT_LEARNING_RATE = flags.DEFINE_float(
    'client_learning_rate', 0.1, 'Client SGD learning rate.', lower_bound=0.0
)
_SERVER_LEARNING_RATE = flags.DEFINE_float(
    'server_learning_rate', 1.0, 'Server SGD learning rate on the aggregated update.', lower_bound=0.0
)
_RFA_NUM_PASSES = flags.DEFINE_integer(
    'rfa_num_passes', 3, 'Secure-average calls per RFA aggregation (1 mean + Weiszfeld steps).', lower_bound=1
)
_RFA_SMOOTHING = flags.DEFINE_float('rfa_smoothing', 1e-6, 'Weiszfeld smoothing nu > 0.', lower_bound=1e-30)
_TRIM_FRACTION = flags.DEFINE_float(
    'trim_fraction', 0.1, 'trimmed_mean: fraction dropped at each end, in [0, 0.5).', lower_bound=0.0,
    upper_bound=0.4999999,
)
_NUM_BYZANTINE = flags.DEFINE_integer(
    'num_byzantine', 1, 'multi_krum, bulyan: number f of Byzantine clients tolerated.', lower_bound=0
)
_NUM_SELECTED = flags.DEFINE_integer(
    'num_selected', 0, 'multi_krum: updates averaged; 0 means clients_per_round - num_byzantine.', lower_bound=0
)
_CLIPPING_NORM = flags.DEFINE_float(
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
_QUANTILE_PASSES = flags.DEFINE_integer(
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
_FEDPLUS_SOLVER = flags.DEFINE_enum(
    'fedplus_solver', 'irls', delta_median.SOLVERS,
    'fedplus_geomed/comed: irls (reweighted means) or fixed_point (the paper\'s iteration (25)).',
)
_FEDPLUS_MAX_ITERATIONS = flags.DEFINE_integer(
    'fedplus_max_iterations', delta_median.DEFAULT_MAX_ITERATIONS,
    'fedplus_geomed/comed: secure sums per aggregation after the first mean.', lower_bound=1,
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
_OUTAGE_RATE = flags.DEFINE_float(
    'outage_rate', 1.0, 'outage channel: rate r = d/B > 0 in bits per channel use.', lower_bound=1e-30
)
_ON_OUTAGE = flags.DEFINE_enum(
    'on_outage', 'drop', channels.OUTAGE_ACTIONS, 'outage channel: drop the packet or receive random bits.'
)
_ALPHA_LEARNING_RATE = flags.DEFINE_float(
    'alpha_learning_rate', 0.1, 'mtfeel: step mu >= 0 of the alpha update (0 freezes alpha).', lower_bound=0.0
)
_PEN_SCALE = flags.DEFINE_float(
    'pen_scale', 1.0, 'mtfeel: weight M sqrt((N/2) log(|Lambda|/delta)) >= 0 of the variance penalty of (7).',
    lower_bound=0.0,
)
_MTFEEL_UPDATE_ORDER = flags.DEFINE_enum(
    'mtfeel_update_order', 'w_then_alpha', mtfeel.UPDATE_ORDERS,
    'mtfeel: weight the signs with alpha^t (w_then_alpha, Algorithm 2) or alpha^{t+1} (the proof\'s order).',
)
_DDE_STEPS = flags.DEFINE_integer(
    'dde_steps', 20, 'mtfeel: discrepancy-estimation ascent steps before training (0: dhat = 0).', lower_bound=0
)
_DDE_LEARNING_RATE = flags.DEFINE_float(
    'dde_learning_rate', 0.01, 'mtfeel: discrepancy-estimation ascent step > 0.', lower_bound=1e-30
)
_DDE_OUTPUT = flags.DEFINE_enum(
    'dde_output', 'last', dde.OUTPUTS, 'mtfeel: discrepancy estimate at the last step or the running max.'
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
_CORRUPTION = flags.DEFINE_enum(
    'corruption', 'none', corruption.CORRUPTIONS,
    'Corrupted clients: none; data (the task\'s data poisoning); gaussian or omniscient update poisoning.',
)
_CORRUPTION_FRACTION = flags.DEFINE_float(
    'corruption_fraction', 0.0, 'Share rho of the training examples held by corrupted clients, in [0, 1).',
    lower_bound=0.0, upper_bound=0.9999999,
)
_PROGRESS_BAR = flags.DEFINE_bool('progress_bar', True, 'Show a tqdm progress bar.')

flags.register_validator(
    'snr_db', lambda value: math.isfinite(value), message='--snr_db must be a finite number of dB'
)
flags.register_validator(
    'root_output_dir', lambda path: bool(path), message='--root_output_dir must be a non-empty path'
)
flags.register_validator(
    'experiment_name',
    lambda name: name is None or (name and os.sep not in name and name not in ('.', '..')),
    message='--experiment_name must be a single non-empty path component',
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  logging.set_verbosity(logging.WARNING)
  tf.keras.utils.set_random_seed(_SEED.value)
  execution_context.set_local_execution_context()
  task = tasks.create_task(
      _TASK.value,
      client_epochs=_CLIENT_EPOCHS.value,
      client_batch_size=_CLIENT_BATCH_SIZE.value,
      seed=_SEED.value,
      use_synthetic_data=_USE_SYNTHETIC_DATA.value,
  )
  config = algorithms.AlgorithmConfig(
      client_learning_rate=_CLIENT_LEARNING_RATE.value,
      server_learning_rate=_SERVER_LEARNING_RATE.value,
      rfa_num_passes=_RFA_NUM_PASSES.value,
      rfa_smoothing=_RFA_SMOOTHING.value,
      trim_fraction=_TRIM_FRACTION.value,
      num_byzantine=_NUM_BYZANTINE.value,
      num_selected=_NUM_SELECTED.value or None,
      clipping_norm=_CLIPPING_NORM.value,
      conformity_level=_CONFORMITY_LEVEL.value,
      quantile_method=_QUANTILE_METHOD.value,
      quantile_passes=_QUANTILE_PASSES.value,
      threshold_period=_THRESHOLD_PERIOD.value,
      fedplus_sigma=_FEDPLUS_SIGMA.value,
      fedplus_delta=_FEDPLUS_DELTA.value,
      local_init_mixing=_LOCAL_INIT_MIXING.value,
      fedplus_solver=_FEDPLUS_SOLVER.value,
      fedplus_max_iterations=_FEDPLUS_MAX_ITERATIONS.value,
      channel=_CHANNEL.value,
      snr_db=_SNR_DB.value,
      flip_probability=_FLIP_PROBABILITY.value,
      outage_rate=_OUTAGE_RATE.value,
      on_outage=_ON_OUTAGE.value,
      alpha_learning_rate=_ALPHA_LEARNING_RATE.value,
      pen_scale=_PEN_SCALE.value,
      mtfeel_update_order=_MTFEEL_UPDATE_ORDER.value,
      dde_steps=_DDE_STEPS.value,
      dde_learning_rate=_DDE_LEARNING_RATE.value,
      dde_output=_DDE_OUTPUT.value,
  )
  update_attack = _CORRUPTION.value if _CORRUPTION.value in corruption.UPDATE_ATTACKS else None
  process = algorithms.build_learning_process(
      _ALGORITHM.value, task.model_fn, config, clients_per_round=_CLIENTS_PER_ROUND.value,
      update_attack=update_attack, seed=_SEED.value,
  )
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
      summary_extras=dict(
          algorithm=_ALGORITHM.value, task=_TASK.value, seed=_SEED.value, corruption=_CORRUPTION.value,
          corruption_fraction=_CORRUPTION_FRACTION.value,
          corruption_weight_share=corruption.corrupted_weight_share(task, corrupted),
          **({'conformity_level': _CONFORMITY_LEVEL.value, 'quantile_method': _QUANTILE_METHOD.value,
              'threshold_period': _THRESHOLD_PERIOD.value} if _ALGORITHM.value == 'delta_fl' else {}),
          **({'fedplus_sigma': _FEDPLUS_SIGMA.value, 'fedplus_delta': _FEDPLUS_DELTA.value,
              'local_init_mixing': _LOCAL_INIT_MIXING.value} if _ALGORITHM.value.startswith('fedplus_') else {}),
          **({'channel': _CHANNEL.value, 'snr_db': _SNR_DB.value, 'flip_probability': _FLIP_PROBABILITY.value}
             if _ALGORITHM.value in algorithms.INDEXED_ALGORITHM_NAMES else {}),
      ),
  )
  headline = {k: v for k, v in summary.items() if k in ('eval/accuracy', 'eval/mse', 'eval/loss', 'eval/error_mean',
                                                          'eval/error_p90', 'personal/loss_mean', 'personal/error_mean',
                                                          'rounds', 'secure_average_calls')}
  print(f'{_ALGORITHM.value} on {_TASK.value}: {headline}')
  print(f'metrics: {output_dir}/metrics.csv  summary: {output_dir}/summary.json')
  execution_context.stop_local_execution_context()


if __name__ == '__main__':
  app.run(main)
