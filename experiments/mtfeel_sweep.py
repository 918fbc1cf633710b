r"""MtFEEL's comparison table and Fig. 4 on digits_cohorts: accuracy error-free and over noisy uplinks.

  python -m experiments.mtfeel_sweep    # 5 methods x 3 seeds error-free; mtfeel, signsgd over 7 SNRs, 6 flip probs
  python -m experiments.mtfeel_sweep --methods=mtfeel,local_only --sweep_methods=mtfeel --seeds=0 \
      --total_rounds=20 --snr_db_values=-10,10 --flip_probabilities=0.2

Runs (docs/guides/mtfeel.md), each in runs/<method>_<channel>[_snr<dB>|_p<p>]_seed<s>/:
  error-free uplink: every method x seed;
  rayleigh: every sweep method x SNR x seed (each sign bit sent by BPSK over its own Rayleigh fade);
  bsc: every sweep method x flip probability x seed (binary symmetric channel).
The sweep methods are the ones whose sign bits cross the channel (mtfeel, signsgd). A run whose summary.json
exists is not run again, so an interrupted sweep resumes; hyperparameters.json records the hyperparameters
and a sweep with other values into the same directory is refused.

Seed s draws the devices' data (split_seed = s), the local shuffling, the channel noise and DDE's probes; every
model starts at zero (the task's logistic regression). MtFEEL, signSGD and FedSGD take one full-batch
gradient per device per round (one epoch); FedAvg and local-only train --client_epochs local epochs. All
30 devices take part in every round. A run's accuracy is 1 - personal/error_mean: the mean over devices of
the accuracy, on the device's own test examples, of the model it predicts with (its own for MtFEEL and
local-only, the global model otherwise).

Writes to <root_output_dir>/<experiment_name>/:
  results.csv        one row per run (_FIELDS; snr_db / flip_probability empty where they do not apply);
  results.md         error-free table (mean ± std and [min, max] over seeds), accuracy vs SNR and vs flip
                     probability (method x level, mean ± std), and the cohort share of MtFEEL's alpha;
  fig4_snr.png, fig4_flip.png   mean accuracy vs SNR / flip probability per sweep method, min-max band over
                     seeds, error-free local-only and FedAvg as dashed lines;
  alpha_heatmap.png  the learned alpha of the error-free MtFEEL run of the first seed, by hidden cohort.
"""

import collections
import csv
import json
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)
import tqdm  # pylint: disable=g-import-not-at-top

from experiments import mtfeel_report  # pylint: disable=g-import-not-at-top
from experiments import worker_exit_report  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import seeds as seeds_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import training_loop  # pylint: disable=g-import-not-at-top
from tff_robust.tasks import digits_cohorts  # pylint: disable=g-import-not-at-top

METHODS = ('mtfeel', 'local_only', 'fedavg', 'fedsgd', 'signsgd')
_GRADIENT_METHODS = ('mtfeel', 'signsgd', 'fedsgd')  # one full-batch gradient per device per round
_FIELDS = ('method', 'channel', 'snr_db', 'flip_probability', 'seed', 'accuracy', 'error_p90', 'train_loss',
           'seconds_per_round')

Run = collections.namedtuple('Run', ['method', 'channel', 'snr_db', 'flip_probability', 'seed'])

_METHODS = flags.DEFINE_list('methods', list(METHODS), f'Methods run error-free, among {list(METHODS)}.')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds (data draw, shuffling, channel noise, DDE probes).')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 100, 'Rounds per run.', lower_bound=1)
_SNR_DB_VALUES = finite_flags.define_float_list('snr_db_values', [-20, -10, -5, 0, 5, 10, 20],
                                                'SNRs (dB) of the Rayleigh sweep.')
_FLIP_PROBABILITIES = finite_flags.define_float_list('flip_probabilities', [0, 0.1, 0.2, 0.3, 0.4, 0.5],
                                                     'Flip probabilities of the binary-symmetric-channel sweep.')
_SWEEP_METHODS = flags.DEFINE_list('sweep_methods', ['mtfeel', 'signsgd'], 'Methods swept over the channels.')
_MTFEEL_LEARNING_RATE = flags.DEFINE_float('mtfeel_learning_rate', 1.0, 'MtFEEL eta (signed step).',
                                           lower_bound=1e-30)
_ALPHA_LEARNING_RATE = flags.DEFINE_float('alpha_learning_rate', 0.1, 'MtFEEL mu (alpha step).', lower_bound=0.0)
_PEN_SCALE = flags.DEFINE_float('pen_scale', 1.0, 'MtFEEL weight of the variance penalty of (7).', lower_bound=0.0)
_DDE_STEPS = flags.DEFINE_integer('dde_steps', 5, 'MtFEEL discrepancy-estimation steps.', lower_bound=0)
_DDE_LEARNING_RATE = flags.DEFINE_float('dde_learning_rate', 0.01, 'MtFEEL discrepancy-estimation step.',
                                        lower_bound=1e-30)
_SIGNSGD_LEARNING_RATE = flags.DEFINE_float('signsgd_learning_rate', 0.03, 'signSGD eta.', lower_bound=1e-30)
_FEDSGD_LEARNING_RATE = flags.DEFINE_float('fedsgd_learning_rate', 1.0, 'FedSGD server step.', lower_bound=0.0)
_CLIENT_LEARNING_RATE = flags.DEFINE_float('client_learning_rate', 0.1, 'FedAvg, local-only client SGD rate.',
                                           lower_bound=0.0)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs', 5, 'FedAvg, local-only local epochs.', lower_bound=1)
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 20, 'Local batch size.', lower_bound=1)
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
_EXPERIMENT_NAME = flags.DEFINE_string('experiment_name', 'mtfeel_sweep_digits_cohorts', 'Subdirectory of the sweep.')

_HYPERPARAMETERS = (_TOTAL_ROUNDS, _MTFEEL_LEARNING_RATE, _ALPHA_LEARNING_RATE, _PEN_SCALE, _DDE_STEPS,
                    _DDE_LEARNING_RATE, _SIGNSGD_LEARNING_RATE, _FEDSGD_LEARNING_RATE, _CLIENT_LEARNING_RATE,
                    _CLIENT_EPOCHS, _CLIENT_BATCH_SIZE)



def _runs(methods, sweep_methods, snr_values, flip_probabilities, seeds) -> list[Run]:
  """Error-free runs seed by seed, then the Rayleigh sweep, then the binary-symmetric-channel sweep."""
  runs = [Run(m, 'none', None, None, s) for s in seeds for m in methods]
  runs += [Run(m, 'rayleigh', snr, None, s) for m in sweep_methods for snr in snr_values for s in seeds]
  return runs + [Run(m, 'bsc', None, p, s) for m in sweep_methods for p in flip_probabilities for s in seeds]


def _run_name(run: Run) -> str:
  """The run's subdirectory of runs/, e.g. 'mtfeel_rayleigh_snr-10_seed0'."""
  level = (f'_snr{run.snr_db:g}' if run.channel == 'rayleigh' else f'_p{run.flip_probability:g}'
           if run.channel == 'bsc' else '')
  return f'{run.method}_{run.channel}{level}_seed{run.seed}'


def _config(run: Run) -> algorithms.AlgorithmConfig:
  """The run's hyperparameters; the server rate is eta for MtFEEL and signSGD, the server step for FedSGD."""
  server_rates = {'mtfeel': _MTFEEL_LEARNING_RATE, 'signsgd': _SIGNSGD_LEARNING_RATE, 'fedsgd': _FEDSGD_LEARNING_RATE}
  channel_level = {'none': {}, 'rayleigh': dict(snr_db=run.snr_db), 'bsc': dict(flip_probability=run.flip_probability)}
  return algorithms.AlgorithmConfig(
      client_learning_rate=_CLIENT_LEARNING_RATE.value,
      server_learning_rate=server_rates[run.method].value if run.method in server_rates else 1.0,
      channel=run.channel, alpha_learning_rate=_ALPHA_LEARNING_RATE.value, pen_scale=_PEN_SCALE.value,
      dde_steps=_DDE_STEPS.value, dde_learning_rate=_DDE_LEARNING_RATE.value, **channel_level[run.channel],
  )


def _summary(run: Run, run_dir: str) -> dict:
  """The run's summary.json, training the run first unless it exists."""
  path = os.path.join(run_dir, 'summary.json')
  if not os.path.exists(path):
    epochs = 1 if run.method in _GRADIENT_METHODS else _CLIENT_EPOCHS.value
    task = digits_cohorts.create_task(client_epochs=epochs, client_batch_size=_CLIENT_BATCH_SIZE.value,
                                      seed=run.seed, split_seed=run.seed)
    num_devices = len(task.train_data.client_ids)
    process = algorithms.build_learning_process(run.method, task.model_fn, _config(run),
                                                clients_per_round=num_devices, seed=run.seed)
    training_loop.run_training(
        process, task, task.client_dataset, total_rounds=_TOTAL_ROUNDS.value, clients_per_round=num_devices,
        rounds_per_eval=_TOTAL_ROUNDS.value, seed=run.seed, output_dir=run_dir, show_progress=False,
        summary_extras=run._asdict(),
    )
  with open(path) as f:
    return json.load(f)


def _row(run: Run, summary: dict) -> dict:
  """The run's results.csv row; train_loss is the last round's train/loss."""
  return dict(run._asdict(), accuracy=1.0 - summary['personal/error_mean'], error_p90=summary['personal/error_p90'],
              train_loss=summary['train/loss'], seconds_per_round=summary['seconds_per_round'])


def _check_hyperparameters(output_dir: str) -> None:
  """Records the hyperparameters in hyperparameters.json; refuses a sweep whose values differ from those there."""
  values = {holder.name: holder.value for holder in _HYPERPARAMETERS}
  path = os.path.join(output_dir, 'hyperparameters.json')
  if os.path.exists(path):
    with open(path) as f:
      recorded = json.load(f)
    if recorded != values:
      raise app.UsageError(f'{output_dir} holds runs with hyperparameters {recorded}, not {values}: choose '
                           'another --experiment_name')
  with open(path, 'w') as f:
    json.dump(values, f, indent=2)


@worker_exit_report.reports_worker_exit(
    'The same command resumes the sweep: finished runs are skipped; the unfinished run starts again.'
)
def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  unknown = set(_METHODS.value) - set(METHODS)
  if unknown:
    raise app.UsageError(f'--methods: unknown {sorted(unknown)}; allowed {list(METHODS)}')
  unknown = set(_SWEEP_METHODS.value) - set(algorithms.INDEXED_ALGORITHM_NAMES)
  if unknown:
    raise app.UsageError(f'--sweep_methods: unknown {sorted(unknown)}; allowed {algorithms.INDEXED_ALGORITHM_NAMES}')
  seeds = seeds_flags.parse_list(_SEEDS.value, 'seeds')
  snr_values, flip_probabilities = _SNR_DB_VALUES.value, _FLIP_PROBABILITIES.value  # finite (parse_flags)
  if not all(0 <= p <= 1 for p in flip_probabilities):
    raise app.UsageError('--flip_probabilities must lie in [0, 1]')
  runs = _runs(_METHODS.value, _SWEEP_METHODS.value, snr_values, flip_probabilities, seeds)
  if not runs:
    raise app.UsageError('nothing to run: give --seeds and --methods or --sweep_methods')
  logging.set_verbosity(logging.ERROR)
  output_dir = os.path.join(_ROOT_OUTPUT_DIR.value, _EXPERIMENT_NAME.value)
  os.makedirs(output_dir, exist_ok=True)
  _check_hyperparameters(output_dir)
  execution_context.set_local_execution_context()
  rows = [_row(run, _summary(run, os.path.join(output_dir, 'runs', _run_name(run))))
          for run in tqdm.tqdm(runs, desc='sweep', unit='run')]
  with open(os.path.join(output_dir, 'results.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
  labels = digits_cohorts.cohort_labels()
  alphas = {run.seed: np.load(os.path.join(output_dir, 'runs', _run_name(run), 'alpha.npy'))
            for run in runs if run.method == 'mtfeel' and run.channel == 'none'}
  cohort_line = mtfeel_report.cohort_share_line(list(alphas.values()), labels) if alphas else None
  mtfeel_report.write_table(rows, cohort_line, os.path.join(output_dir, 'results.md'))
  written = ['results.csv', 'results.md']
  for channel, (_, _, _, figure) in mtfeel_report.SWEEPS.items():
    if any(r['channel'] == channel for r in rows):
      mtfeel_report.plot_sweep(rows, channel, os.path.join(output_dir, figure))
      written.append(figure)
  if alphas:
    mtfeel_report.plot_alpha(alphas[seeds[0]], labels, f'MtFEEL alpha, error-free, seed {seeds[0]}',
                             os.path.join(output_dir, 'alpha_heatmap.png'))
    written.append('alpha_heatmap.png')
  with open(os.path.join(output_dir, 'results.md')) as f:
    print(f.read())
  print(f'wrote {output_dir}/: {", ".join(written)}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
