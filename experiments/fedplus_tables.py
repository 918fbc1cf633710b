r"""Fed+'s Table 2 (personalised tasks) on our simulation tasks: FedAvg, local-only, FedAvg+, FedGeoMed+, FedCoMed+.

  python -m experiments.fedplus_tables --task=synthetic_regression_fedplus   # the paper's row, 5 seeds
  python -m experiments.fedplus_tables --task=digits_robust --total_rounds=100 --seeds=0,1
  python -m experiments.fedplus_tables --fedplus_sigma=100   # kappa = 0.99, inside the paper's [0.9, 0.999]

Every method is scored as the paper scores it: each party's model on its own held-out half, averaged over
parties (the personal models for Fed+ and local-only, the global model for FedAvg): test MSE for the
regression, accuracy for digits. Seed s draws the task's data (split_seed = s) and the local shuffling.
Hyperparameters default to the paper's Sec. 5.1 (K = N = 10, E = 20 local steps, sigma, eta, batch per task,
delta = 0.1, lambda = 0, T = 500). `--fedplus_sigma` replaces the task's sigma, e.g. to put the per-step mixing
kappa = 1 / (1 + eta sigma) inside the range [0.9, 0.999] that the paper recommends (Sec. 4.4.1) but does
not use for the synthetic regression (sigma = 1 gives kappa = 0.9999) or the MNIST variants (0.77).
`--validation_fraction=f` (digits tasks) scores every method on a validation part of each party's training
half instead of its test half, so sigma can be chosen without reading a test example.
Writes <root_output_dir>/<experiment_name>/{results.csv, results.md}.
"""

import csv
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import
import tqdm  # pylint: disable=g-import-not-at-top

from experiments import worker_exit_report  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import seeds as seeds_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import training_loop  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import digits_fedplus  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import synthetic_regression_fedplus  # pylint: disable=g-import-not-at-top

# task -> (create_task, paper's Sec. 5.1 settings: client lr eta, sigma, batch, epochs giving E = 20 steps,
#          the paper's Table 2 numbers by method)
_TASKS = {
    'synthetic_regression_fedplus': (
        synthetic_regression_fedplus.create_task, dict(eta=1e-4, sigma=1.0, batch=10, epochs=4),
        {'FedAvg+': 1966, 'FedGeoMed+': 1048, 'FedCoMed+': 1074, 'Scaffold': 2764, 'APFL': 1606},
    ),
    'digits_robust': (
        digits_fedplus.create_robust_task, dict(eta=0.02, sigma=15.0, batch=20, epochs=4),
        {'FedAvg+': 87.0, 'FedGeoMed+': 91.5, 'FedCoMed+': 80.5, 'Scaffold': 81.4, 'APFL': 88.3},
    ),
    'digits_personal': (
        digits_fedplus.create_personal_task, dict(eta=0.02, sigma=15.0, batch=20, epochs=4),
        {'FedAvg+': 71.9, 'FedGeoMed+': 78.3, 'FedCoMed+': 66.7, 'Scaffold': 72.0, 'APFL': 75.7},
    ),
}
# method label -> runner algorithm
METHODS = {'FedAvg': 'fedavg', 'local-only': 'local_only', 'FedAvg+': 'fedplus_avg',
           'FedGeoMed+': 'fedplus_geomed', 'FedCoMed+': 'fedplus_comed'}

_TASK = flags.DEFINE_enum('task', 'synthetic_regression_fedplus', list(_TASKS), 'Personalised task.')
_METHODS = flags.DEFINE_list('methods', list(METHODS), f'Methods, among {list(METHODS)}.')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2', '3', '4'], 'Seeds (data draw and local shuffling).')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 500, 'Rounds per run (the paper: 500).', lower_bound=1)
_DELTA = flags.DEFINE_float('fedplus_delta', 0.1, 'Fed+ delta (the paper\'s default).', lower_bound=1e-30)
_SIGMA = flags.DEFINE_float(
    'fedplus_sigma', None, 'Fed+ sigma >= 0 (the proximal pull); unset: the paper\'s value for the task.',
    lower_bound=0.0, upper_bound=1e12,
)
_VALIDATION_FRACTION = flags.DEFINE_float(
    'validation_fraction', None,
    'digits tasks: share in (0, 1) of each party\'s training half held out as its validation data, which then '
    'replaces its test half in scoring (to choose sigma without the test data). Unset: score on the test halves.',
)
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
_EXPERIMENT_NAME = flags.DEFINE_string('experiment_name', None, 'Subdirectory; defaults to fedplus_tables_<task>.')


def score(summary: dict, regression: bool) -> float:
  """The paper's Table 2 metric: mean over parties of the test MSE (regression) or accuracy in %."""
  return summary['personal/loss_mean'] if regression else 100.0 * (1.0 - summary['personal/error_mean'])


def write_table(rows, methods, paper, regression, settings, path):
  """results.md: our mean ± std over seeds beside the paper's Table 2 row, and the hyperparameters used."""
  split = rows[0]['scored_on']
  metric = f'{split} MSE, lower is better' if regression else f'{split} accuracy %, higher is better'
  lines = [f'# Fed+ Table 2 on {rows[0]["task"]}: mean over parties of each party\'s model ({metric})', '',
           '| | ' + ' | '.join(methods) + ' |', '|---|' + '---|' * len(methods)]
  cells = []
  for method in methods:
    values = np.array([r['score'] for r in rows if r['method'] == method])
    cells.append(f'{values.mean():.1f} ± {values.std():.1f}')
  lines.append('| ours, mean ± std over seeds | ' + ' | '.join(cells) + ' |')
  lines.append('| paper (Table 2) | ' + ' | '.join(str(paper.get(m, '—')) for m in methods) + ' |')
  seeds = sorted({r['seed'] for r in rows})
  lines += ['', f'{len(seeds)} seeds ({", ".join(map(str, seeds))}), {rows[0]["rounds"]} rounds; std is the population '
            'std over seeds. The paper\'s other baselines: ' + ', '.join(
                f'{m} {v}' for m, v in paper.items() if m not in methods), '',
            f'Settings: eta = {settings["eta"]:g}, sigma = {settings["sigma"]:g}, kappa = 1/(1 + eta sigma) = '
            f'{1.0 / (1.0 + settings["eta"] * settings["sigma"]):.6g}, delta = {settings["delta"]:g}, '
            f'batch {settings["batch"]}, {settings["epochs"]} local epochs, lambda = 0.', '']
  with open(path, 'w') as f:
    f.write('\n'.join(lines))


@worker_exit_report.reports_worker_exit(
    'The tables do not resume: the same command runs every run again.'
)
def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  unknown = [m for m in _METHODS.value if m not in METHODS]
  if unknown:
    raise app.UsageError(f'--methods must be among {list(METHODS)}, got {unknown}')
  seeds = seeds_flags.parse_list(_SEEDS.value, 'seeds')
  validation = {}
  if _VALIDATION_FRACTION.value is not None:
    splittable = [name for name in tasks.tasks_accepting('validation_fraction') if name in _TASKS]
    if _TASK.value not in splittable:
      raise app.UsageError(f'--validation_fraction applies to {", ".join(splittable)}, not {_TASK.value!r}')
    if not 0.0 < _VALIDATION_FRACTION.value < 1.0:
      raise app.UsageError(f'--validation_fraction must be in (0, 1), got {_VALIDATION_FRACTION.value}')
    validation = dict(validation_fraction=_VALIDATION_FRACTION.value)
  logging.set_verbosity(logging.ERROR)
  execution_context.set_local_execution_context()
  create_task, paper_settings, paper = _TASKS[_TASK.value]
  settings = dict(paper_settings, delta=_DELTA.value)
  if _SIGMA.value is not None:
    settings['sigma'] = _SIGMA.value
  regression = _TASK.value.startswith('synthetic')
  config = algorithms.AlgorithmConfig(
      client_learning_rate=settings['eta'], fedplus_sigma=settings['sigma'], fedplus_delta=settings['delta'],
  )
  output_dir = os.path.join(_ROOT_OUTPUT_DIR.value, _EXPERIMENT_NAME.value or f'fedplus_tables_{_TASK.value}')
  os.makedirs(output_dir, exist_ok=True)
  processes, rows = {}, []
  for seed in tqdm.tqdm(seeds, desc='seeds', unit='seed'):
    task = create_task(client_epochs=settings['epochs'], client_batch_size=settings['batch'], seed=seed,
                       split_seed=seed, **validation)
    num_parties = len(task.train_data.client_ids)
    for method in _METHODS.value:
      if method not in processes:
        processes[method] = algorithms.build_learning_process(METHODS[method], task.model_fn, config)
      summary = training_loop.run_training(
          processes[method], task, task.client_dataset, total_rounds=_TOTAL_ROUNDS.value,
          clients_per_round=num_parties, rounds_per_eval=_TOTAL_ROUNDS.value, seed=seed,
          output_dir=os.path.join(output_dir, 'runs', f'{METHODS[method]}_seed{seed}'), show_progress=False,
      )
      rows.append(dict(task=_TASK.value, method=method, seed=seed, rounds=_TOTAL_ROUNDS.value,
                       score=score(summary, regression), pooled_eval_loss=summary['eval/loss'],
                       sigma=settings['sigma'], seconds_per_round=summary['seconds_per_round'],
                       scored_on='validation' if validation else 'test'))
  with open(os.path.join(output_dir, 'results.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  write_table(rows, _METHODS.value, paper, regression, settings, os.path.join(output_dir, 'results.md'))
  with open(os.path.join(output_dir, 'results.md')) as f:
    print(f.read())


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
