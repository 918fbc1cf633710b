r"""Superquantile FL's Tables 2-3 and Fig. 4 on a simulation task: FedAvg vs Delta-FL at several theta.

  python -m experiments.superquantile_tables   # digits, FedAvg + theta in {0.8, 0.5, 0.1}, 5 seeds, 300 rounds
  python -m experiments.superquantile_tables --conformity_levels=0.5 --seeds=0,1 --total_rounds=50

Each seed draws its own model initialisation and client sampling; all methods share them. Writes to
<root_output_dir>/<experiment_name>/:
  results.csv   one row per run: per-device distribution metrics of the final model (test devices:
                unweighted error and loss; training devices: example-weighted loss), held-out accuracy;
  results.md    the paper's layout: one row per metric, one column per method, mean +/- std over seeds;
  device_histograms.png   Fig. 4: histograms of the final per-device test error and training loss,
                each device's value averaged over seeds, one panel row per method.
"""

import csv
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tqdm  # pylint: disable=g-import-not-at-top

from experiments import device_histograms  # pylint: disable=g-import-not-at-top
from experiments import worker_exit_report  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.processes import delta_fl  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import initial_weights  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import training_loop  # pylint: disable=g-import-not-at-top

_CONFORMITY_LEVELS = finite_flags.define_float_list('conformity_levels', [0.8, 0.5, 0.1], 'Delta-FL theta values.')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2', '3', '4'], 'Seeds (model initialisation, client sampling).')
_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task (must be split by device).')
_TOTAL_ROUNDS = flags.DEFINE_integer(
    'total_rounds', 300, 'Rounds per run (300: the accuracy of FedAvg has levelled off on digits).', lower_bound=1
)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs_per_round', 1, 'Local epochs (the paper: 1).', lower_bound=1)
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 16, 'Local batch size.', lower_bound=1)
_CLIENT_LEARNING_RATE = flags.DEFINE_float('client_learning_rate', 0.1, 'Client SGD rate.', lower_bound=0.0)
_QUANTILE_METHOD = flags.DEFINE_enum('quantile_method', 'exact', delta_fl.QUANTILE_METHODS, 'Delta-FL quantile.')
_USE_SYNTHETIC_DATA = flags.DEFINE_bool('use_synthetic_data', False, 'TFF baseline tasks: synthetic data.')
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
_EXPERIMENT_NAME = flags.DEFINE_string('experiment_name', 'superquantile_tables', 'Subdirectory of the runs.')

# (results.csv column, summary key, row label of results.md)
_METRICS = (
    ('error_p90', 'eval/error_p90', '90th percentile of test-device error (%) [Table 2]'),
    ('error_mean', 'eval/error_mean', 'mean test-device error (%) [Table 3]'),
    ('loss_p90', 'eval/loss_p90', '90th percentile of test-device loss'),
    ('train_loss_p90', 'train/loss_p90', '90th percentile of training-device loss (weighted)'),
    ('train_loss_mean', 'train/loss_mean', 'mean training-device loss (weighted)'),
    ('accuracy', 'eval/accuracy', 'pooled held-out accuracy (%)'),
)
_PERCENT = {'error_p90', 'error_mean', 'accuracy'}


def _method_label(theta):
  return 'FedAvg' if theta is None else f'Delta-FL theta={theta:g}'


def write_table(rows, thetas, path):
  labels = [_method_label(theta) for theta in [None] + thetas]
  lines = ['# Delta-FL vs FedAvg: per-device distribution of the final model, mean +/- std over seeds', '',
           '| metric | ' + ' | '.join(labels) + ' |', '|---|' + '---|' * len(labels)]
  for column, _, title in _METRICS:
    scale = 100.0 if column in _PERCENT else 1.0
    cells = []
    for label in labels:
      values = scale * np.array([r[column] for r in rows if r['method'] == label])
      cells.append(f'{values.mean():.2f} ± {values.std():.2f}')
    lines.append(f'| {title} | ' + ' | '.join(cells) + ' |')
  seeds = sorted({r['seed'] for r in rows})
  lines += ['', f'{len(seeds)} seeds ({", ".join(map(str, seeds))}); std is the population std over seeds.', '']
  with open(path, 'w') as f:
    f.write('\n'.join(lines))


@worker_exit_report.reports_worker_exit(
    'The tables do not resume: the same command runs every run again.'
)
def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  thetas = _CONFORMITY_LEVELS.value
  try:
    seeds = [int(v) for v in _SEEDS.value]
  except ValueError as error:
    raise app.UsageError(f'--seeds: {error}') from error
  if any(not 0 < theta <= 1 for theta in thetas):
    raise app.UsageError(f'--conformity_levels must lie in (0, 1], got {thetas}')
  logging.set_verbosity(logging.WARNING)
  execution_context.set_local_execution_context()
  task = tasks.create_task(_TASK.value, client_epochs=_CLIENT_EPOCHS.value, client_batch_size=_CLIENT_BATCH_SIZE.value,
                           seed=0, use_synthetic_data=_USE_SYNTHETIC_DATA.value)
  if task.device_evaluator is None:
    raise app.UsageError(f'--task={_TASK.value} has no split by device')
  output_dir = os.path.join(_ROOT_OUTPUT_DIR.value, _EXPERIMENT_NAME.value)
  os.makedirs(output_dir, exist_ok=True)
  processes = {}
  for theta in [None] + thetas:
    config = algorithms.AlgorithmConfig(
        client_learning_rate=_CLIENT_LEARNING_RATE.value, conformity_level=theta or 1.0,
        quantile_method=_QUANTILE_METHOD.value,
    )
    processes[theta] = algorithms.build_learning_process(
        'fedavg' if theta is None else 'delta_fl', task.model_fn, config,
        clients_per_round=_CLIENTS_PER_ROUND.value,
    )
  rows = []
  labels = [_method_label(theta) for theta in [None] + thetas]
  device_values = {label: device_histograms.empty_values() for label in labels}
  runs = [(seed, theta) for seed in seeds for theta in [None] + thetas]
  for seed, theta in tqdm.tqdm(runs, desc='runs', unit='run'):
    label = _method_label(theta)
    run_dir = os.path.join(output_dir, 'runs', f'{label.replace(" ", "_").replace("=", "")}_seed{seed}')
    summary = training_loop.run_training(
        processes[theta], task, task.client_dataset, total_rounds=_TOTAL_ROUNDS.value,
        clients_per_round=_CLIENTS_PER_ROUND.value, rounds_per_eval=_TOTAL_ROUNDS.value, seed=seed,
        output_dir=run_dir, show_progress=False, initial_model_weights=initial_weights.drawn(task.model_fn, seed),
    )
    rows.append(dict(method=label, conformity_level=theta or 1.0, seed=seed,
                     **{column: summary[key] for column, key, _ in _METRICS}))
    device_histograms.add_devices_csv(device_values[label], os.path.join(run_dir, 'devices.csv'))
  with open(os.path.join(output_dir, 'results.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  write_table(rows, thetas, os.path.join(output_dir, 'results.md'))
  device_histograms.plot_histograms(device_values, labels, os.path.join(output_dir, 'device_histograms.png'))
  print(f'wrote {output_dir}/results.csv, results.md, device_histograms.png')
  with open(os.path.join(output_dir, 'results.md')) as f:
    print(f.read())


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
