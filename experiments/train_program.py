"""The TensorFlow part of `python -m experiments.train`: builds the task and the algorithm from the parsed flags
(`experiments.train_flags`) and trains. `experiments.train` imports it once the flags have passed their checks.
"""

import dataclasses
import os
import shutil
import sys

from absl import flags
from absl import logging
import tensorflow as tf

from experiments import algorithm_flags
from experiments import corruption_flags
from experiments import exit_statuses
from experiments import runtime_flags
from experiments import task_flags
from experiments import train_flags
from tff_robust.aggregators import defences
from tff_robust.runtime import composing_context
from tff_robust.runtime import execution_context
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_channels
from tff_robust.simulation import algorithms
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.simulation import metrics_csv
from tff_robust.simulation import run_settings
from tff_robust.simulation import schedules
from tff_robust import tasks
from tff_robust.simulation import training_loop
from tff_robust.tasks import base

# Flags named like the `AlgorithmConfig` fields they set.
_CONFIG_FLAGS = tuple(field.name for field in dataclasses.fields(algorithms.AlgorithmConfig))
_HEADLINE_METRICS = (
    'eval/accuracy', 'eval/attack_success_rate', 'eval/mse', 'eval/loss', 'eval/error_mean', 'eval/error_p90',
    'personal/loss_mean', 'personal/error_mean', 'personal_honest/error_mean', 'personal_corrupted/error_mean',
    'rounds', 'secure_average_calls', 'nonfinite_model_round', 'rounds_without_counted_update', 'no_counted_update_stop_round',
)


def _algorithm_config() -> algorithms.AlgorithmConfig:
  settings = {name: flags.FLAGS[name].value for name in _CONFIG_FLAGS}
  settings['num_selected'] = settings['num_selected'] or None  # 0: the rule's default
  return algorithms.AlgorithmConfig(**settings)


def _update_attack_spec():
  """The update attack --corruption runs (a targeted attack's update half assumes --server_learning_rate), or None."""
  return corruption_flags.update_attack_spec(flags.FLAGS.server_learning_rate)


def _cohort_transform():
  """The per-round change to the cohort's data the flags ask for (the validators allow at most one)."""
  if task_flags.MINIBATCH_FRACTION.value is not None:
    return client_pipelines.minibatch(task_flags.MINIBATCH_FRACTION.value,
                                      batch_size=task_flags.CLIENT_BATCH_SIZE.value)
  if task_flags.STRAGGLER_FRACTION.value > 0:
    return client_pipelines.stragglers(
        task_flags.STRAGGLER_FRACTION.value, epochs=task_flags.CLIENT_EPOCHS.value,
        batch_size=task_flags.CLIENT_BATCH_SIZE.value,
    )
  if task_flags.MAX_CLIENT_EXAMPLES.value is not None:
    return client_pipelines.max_examples(
        task_flags.MAX_CLIENT_EXAMPLES.value, epochs=task_flags.CLIENT_EPOCHS.value,
        batch_size=task_flags.CLIENT_BATCH_SIZE.value,
    )
  return None


def create_task() -> base.Task:
  """The task the flags name; raises Refusal if its data cannot be loaded."""
  task_options = {flag.name: flag.value for flag in task_flags.TASK_OPTION_FLAGS if flag.value is not None}
  try:
    return tasks.create_task(
        task_flags.TASK.value, client_epochs=task_flags.CLIENT_EPOCHS.value,
        client_batch_size=task_flags.CLIENT_BATCH_SIZE.value, seed=train_flags.SEED.value,
        use_synthetic_data=task_flags.USE_SYNTHETIC_DATA.value, cache_dir=task_flags.DATA_CACHE_DIR.value,
        **task_options,
    )
  except base.DataUnavailableError as error:
    raise train_flags.Refusal(f'--task={task_flags.TASK.value}: {error}') from None


def check_settings(task: base.Task) -> int:
  """The cohort size; raises Refusal for settings the task, the algorithm or this machine cannot run.

  These checks need TensorFlow (the task's clients, the algorithm's aggregator, the GPUs TensorFlow sees for a
  worker binary that can use them); none runs a TFF computation.
  """
  algorithm = algorithm_flags.ALGORITHM.value
  every_device = algorithm in algorithms.INDEXED_ALGORITHM_NAMES
  clients_per_round = train_flags.CLIENTS_PER_ROUND.value
  if clients_per_round is None:
    clients_per_round = training_loop.default_clients_per_round(
        task, train_flags.DEFAULT_CLIENTS_PER_ROUND, every_client_every_round=every_device
    )
  try:
    training_loop.check_clients_per_round(task, clients_per_round, every_client_every_round=every_device)
  except ValueError as error:
    raise train_flags.Refusal(f'--clients_per_round: {error}') from None
  try:
    algorithms.check_settings(
        algorithm, _algorithm_config(), clients_per_round=clients_per_round,
        update_attack=_update_attack_spec(),
    )
  except ValueError as error:
    defence = algorithm_flags.DEFENCE.value
    setting = f'--algorithm={algorithm}' if defence is None else f'--defence={defence}'
    raise train_flags.Refusal(f'{setting}: {error}') from None
  try:
    gpu_placement.check_gpu_setting(runtime_flags.GPUS.value, train_flags.local_worker_binary())
  except ValueError as error:
    raise train_flags.Refusal(str(error)) from None
  return clients_per_round


def _summary_extras(task, corrupted, clients_per_round: int) -> dict:
  algorithm = algorithm_flags.ALGORITHM.value
  fedprox_mu, personal_rate = algorithm_flags.FEDPROX_MU.value, algorithm_flags.PERSONAL_LEARNING_RATE.value
  minibatch, stragglers = task_flags.MINIBATCH_FRACTION.value, task_flags.STRAGGLER_FRACTION.value
  return dict(
      algorithm=algorithm, task=task_flags.TASK.value, seed=train_flags.SEED.value,
      **({'defence': str(defences.parse(algorithm_flags.DEFENCE.value))} if algorithm_flags.DEFENCE.value else {}),
      total_rounds=train_flags.TOTAL_ROUNDS.value, clients_per_round=clients_per_round,
      corruption=corruption_flags.CORRUPTION.value,
      corruption_fraction=corruption_flags.CORRUPTION_FRACTION.value,
      corruption_weight_share=corruption.corrupted_weight_share(task, corrupted),
      **({'attack': _update_attack_spec()} if _update_attack_spec() is not None else {}),
      **({'corruption_start_round': corruption_flags.CORRUPTION_START_ROUND.value}
         if corruption_flags.CORRUPTION_START_ROUND.value != 1 else {}),
      **({'corruption_end_round': corruption_flags.CORRUPTION_END_ROUND.value}
         if corruption_flags.CORRUPTION_END_ROUND.value is not None else {}),
      **({'alie_z': corruption_flags.ALIE_Z.value} if corruption_flags.ALIE_Z.value is not None else {}),
      **({'ipm_epsilon': corruption_flags.IPM_EPSILON.value} if corruption_flags.CORRUPTION.value == 'ipm' else {}),
      **{flag.name: flag.value for flag in task_flags.TASK_OPTION_FLAGS if flag.value is not None},
      **({'conformity_level': algorithm_flags.CONFORMITY_LEVEL.value, 'quantile_method': algorithm_flags.QUANTILE_METHOD.value,
          'threshold_period': algorithm_flags.THRESHOLD_PERIOD.value} if algorithm == 'delta_fl' else {}),
      **({'fedplus_sigma': algorithm_flags.FEDPLUS_SIGMA.value, 'fedplus_delta': algorithm_flags.FEDPLUS_DELTA.value,
          'local_init_mixing': algorithm_flags.LOCAL_INIT_MIXING.value} if algorithm.startswith('fedplus_') else {}),
      **({'fedplus_init_client_from': algorithm_flags.FEDPLUS_INIT_CLIENT_FROM.value}
         if algorithm.startswith('fedplus_')
         and algorithm_flags.FEDPLUS_INIT_CLIENT_FROM.value != algorithm_flags.FEDPLUS_INIT_CLIENT_FROM.default
         else {}),
      **({'fedprox_mu': fedprox_mu} if algorithm == 'fedprox' else {}),
      **({'personal_learning_rate': personal_rate} if personal_rate is not None else {}),
      **({'minibatch_fraction': minibatch} if minibatch is not None else {}),
      **({'straggler_fraction': stragglers} if stragglers > 0 else {}),
      **({'max_client_examples': task_flags.MAX_CLIENT_EXAMPLES.value}
         if task_flags.MAX_CLIENT_EXAMPLES.value is not None else {}),
      **({'channel': algorithm_flags.CHANNEL.value, 'snr_db': algorithm_flags.SNR_DB.value,
          'flip_probability': algorithm_flags.FLIP_PROBABILITY.value}
         if algorithm in algorithms.INDEXED_ALGORITHM_NAMES else {}),
  )


def _train(task, clients_per_round: int) -> dict:
  """Builds the process on a TFF worker, records the run's settings (after --overwrite cleared its directory) and
  runs `training_loop.run_training`; returns its summary."""
  if runtime_flags.TFF_WORKER_ADDRESS.value:
    try:
      execution_context.set_remote_execution_context(
          runtime_flags.TFF_WORKER_ADDRESS.value, credentials_dir=runtime_flags.TFF_WORKER_CREDENTIALS.value)
    except worker_channels.WorkerCertificateError as error:
      raise train_flags.Refusal(
          f'--tff_worker_credentials={runtime_flags.TFF_WORKER_CREDENTIALS.value}: {error}') from None
  else:
    binary = train_flags.local_worker_binary()
    execution_context.set_local_execution_context(
        max_concurrent_computation_calls=runtime_flags.MAX_CONCURRENT_COMPUTATION_CALLS.value,
        visible_gpus=gpu_placement.visible_gpus_setting(runtime_flags.GPUS.value, binary), worker_binary=binary,
    )
  algorithm, seed = algorithm_flags.ALGORITHM.value, train_flags.SEED.value
  process = algorithms.build_learning_process(
      algorithm, task.model_fn, _algorithm_config(), clients_per_round=clients_per_round,
      update_attack=_update_attack_spec(), seed=seed, attacker_alpha=corruption_flags.attacker_alpha(),
  )
  output_dir = train_flags.output_dir()
  if train_flags.OVERWRITE.value and os.path.exists(output_dir):
    shutil.rmtree(output_dir)
  run_settings.record(output_dir, train_flags.defining_settings())  # once nothing can refuse the command
  corrupted = (
      frozenset() if corruption_flags.CORRUPTION.value == 'none'
      else corruption.select_corrupted_clients(task, corruption_flags.CORRUPTION_FRACTION.value, seed)
  )
  client_lr_decay = algorithm_flags.CLIENT_LR_DECAY.value
  return training_loop.run_training(
      process,
      task,
      corruption.make_client_data_fn(task, corruption_flags.CORRUPTION.value, corrupted, in_memory=True,
                                     window=corruption_flags.attack_window()),
      total_rounds=train_flags.TOTAL_ROUNDS.value,
      clients_per_round=clients_per_round,
      rounds_per_eval=train_flags.ROUNDS_PER_EVAL.value,
      seed=seed,
      output_dir=output_dir,
      show_progress=train_flags.PROGRESS_BAR.value,
      rounds_per_checkpoint=train_flags.ROUNDS_PER_CHECKPOINT.value,
      cohort_transform=_cohort_transform(),
      corrupted_client_ids=corrupted,
      client_learning_rate_schedule=None if client_lr_decay == 1.0 else schedules.step_decay(
          flags.FLAGS.client_learning_rate, client_lr_decay, algorithm_flags.CLIENT_LR_DECAY_ROUNDS.value
      ),
      summary_extras=_summary_extras(task, corrupted, clients_per_round),
      stop_after_rounds_without_update=train_flags.STOP_AFTER_ROUNDS_WITHOUT_UPDATE.value,
      attack_success_evaluator=corruption.attack_success_evaluator(task, corruption_flags.CORRUPTION.value),
  )


def run() -> int:
  """Trains as the parsed flags say; returns the exit status (0, or `exit_statuses.NONFINITE_MODEL` for a run that
  stopped at a non-finite model or after --stop_after_rounds_without_update rounds without a counted update,
  `INTERRUPTED` or `WORKER_EXITED`).

  Raises:
    train_flags.Refusal: for settings `check_settings` refuses, or a task whose data cannot be loaded.
  """
  execution_context.discard_tff_default_context()  # a refusal below exits without TFF's noise
  logging.set_verbosity(logging.WARNING)
  tf.keras.utils.set_random_seed(train_flags.SEED.value)
  task = create_task()
  clients_per_round = check_settings(task)
  try:
    summary = _train(task, clients_per_round)
  except training_loop.Interrupted as interrupted:
    print(interrupted, file=sys.stderr)
    return exit_statuses.INTERRUPTED
  except metrics_csv.DamagedMetricsError as error:
    raise train_flags.Refusal(str(error)) from None
  except training_loop.ResumeRefused as error:
    raise train_flags.Refusal(f'--{error}') from None
  except composing_context.WorkerUnavailable as error:
    print(f'error: {error}. The same command resumes the run from its newest checkpoint, if it has one.',
          file=sys.stderr)
    return exit_statuses.WORKER_EXITED
  finally:
    execution_context.stop_local_execution_context()
  headline = {key: value for key, value in summary.items() if key in _HEADLINE_METRICS}
  output_dir = train_flags.output_dir()
  print(f'{algorithm_flags.DEFENCE.value or algorithm_flags.ALGORITHM.value} on {task_flags.TASK.value}: {headline}')
  print(f'metrics: {output_dir}/metrics.csv  summary: {output_dir}/summary.json')
  stopped = 'nonfinite_model_round' in summary or 'no_counted_update_stop_round' in summary
  return exit_statuses.NONFINITE_MODEL if stopped else 0
