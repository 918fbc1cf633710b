r"""Robustness sweep of the RFA paper's Sec. 5 / Fig. 2-3: accuracy versus corruption level per aggregator.

  python -m experiments.robustness_sweep            # digits, defaults below
  python -m experiments.robustness_sweep --algorithms=fedavg,rfa --corruptions=omniscient --seeds=0,1,2
  python -m experiments.robustness_sweep --algorithms=fedavg --defences='arc>gm;bucketing(s=2)>centered_clipping'
  python -m experiments.robustness_sweep --corruptions='alie_grid,ipm_grid,min_max(direction=sign),mimic'
  python -m experiments.robustness_sweep --algorithms=fedavg --defences='rlr(theta=4)>mean' --total_rounds=50 \
      --corruptions='backdoor(target=0),model_replacement(target=0)' --update_fractions=0,0.1 --rounds_after_attack=20

Runs algorithm x corruption x rho x seed (rho = 0 once per algorithm and seed, shared by every corruption)
and writes to <root_output_dir>/<experiment_name>/:
  results.csv   one row per run, appended as each run ends: final held-out metrics, calls per round, the
                realised corrupted share. The same command resumes an interrupted sweep (finished runs are
                kept, the unfinished one resumes from its newest checkpoint, every --rounds_per_checkpoint
                rounds; a grown grid adds only its new runs); other per-run settings are refused
                (run_settings.json) unless --experiment_name names a new directory;
  results.md    mean [min, max] over seeds of the final accuracy, algorithm x rho, one table per corruption;
  accuracy_vs_corruption.png   one panel per corruption, one line per aggregator, min-max band over seeds;
  worst_case.md per rho, defence x attack (mean over seeds), each defence's worst case over the suite last
                (`experiments.worst_case_tables`);
  backdoor.md, backdoor_asr.png   with targeted attacks: per rho, each defence's accuracy and attack success rate
                under each, its worst ASR over them, and the ASR --rounds_after_attack rounds after the attackers
                stop (`experiments.backdoor_tables`, `experiments.backdoor_figure`).
Every run starts from the same initial model (`initial_weights.drawn(model_fn, 0)`); seeds vary the client
sampling, the corrupted set, the server noise of `weak_dp` and `flame` and the random attacks' draws (`gaussian`,
`fang_trimmed_mean`): a process that draws random numbers is built per seed.
(Until 2026-11-27 each process started from its own, which depended on the runs before it in the sweep's Python
process; such sweeps are not resumed. Until 2026-12-05 the random attacks drew the same numbers for every seed: a
sweep of them resumed across that change mixes the two.)
--corruptions takes the data corruptions (data, label_flipping) and update attack specs, name(key=value,...)
(`tff_robust.core.attacks.catalog`; commas inside brackets do not split the list), and the named grids alie_grid
(ALIE at z = the paper's z_max, 1, 2) and ipm_grid (IPM at eps = 0.1, 1, 2). A run's corruption is the spec's
canonical form (`alie(z=1.0)` is `alie(z=1)`, `ipm(eps=0.1)` is `ipm`): it keys results.csv (so a resume matches
it), names the tables and panels, and, written as a file name (`alie-z=1`), the run's directory.
Trimmed mean and multi-Krum are given the true rho (the paper: they need it): trim_fraction = rho,
num_byzantine = ceil(rho * clients_per_round), each capped to what the cohort allows.
--corruptions also takes the targeted attacks (backdoors) of `tff_robust.core.attacks.targeted_catalog`
(backdoor(...), model_replacement(...), ...; digits only), at the --update_fractions: each such row holds its final
attack success rate, and with --rounds_after_attack=N > 0 its attackers stop after round total_rounds - N, where
every run is also evaluated (`experiments.targeted_runs` defines the columns).
--defences adds defence chains of the registry (`tff_robust.aggregators.defences`), each run as fedavg with that
aggregator and labelled by its canonical spec; their f (ARC, NNM, Krum, Bulyan, the trimmed mean) is the same
ceil(rho * clients_per_round), capped at (clients_per_round - 3) // 2.
"""

import collections
import math
import os
import re

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import matplotlib  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tqdm  # pylint: disable=g-import-not-at-top

from experiments import backdoor_figure  # pylint: disable=g-import-not-at-top
from experiments import backdoor_tables  # pylint: disable=g-import-not-at-top
from experiments import sweep_results  # pylint: disable=g-import-not-at-top
from experiments import targeted_runs  # pylint: disable=g-import-not-at-top
from experiments import worker_exit_report  # pylint: disable=g-import-not-at-top
from experiments import worst_case_tables  # pylint: disable=g-import-not-at-top
from tff_robust.aggregators.defences import registry as defence_registry  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import seeds as seeds_flags  # pylint: disable=g-import-not-at-top
from tff_robust.core.attacks import catalog  # pylint: disable=g-import-not-at-top
from tff_robust.core.attacks import targeted_catalog  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import corruption  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import initial_weights  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import run_settings  # pylint: disable=g-import-not-at-top
from tff_robust import tasks  # pylint: disable=g-import-not-at-top
from tff_robust.simulation import training_loop  # pylint: disable=g-import-not-at-top

matplotlib.use('Agg')
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

_ALGORITHMS = flags.DEFINE_list(
    'algorithms', ['fedavg', 'rfa', 'rfa_one_step', 'coordinate_median', 'trimmed_mean', 'multi_krum',
                   'norm_clipping'], 'Algorithms to compare.')
_DEFENCES = flags.DEFINE_string(
    'defences', '',
    "Defence chains to run beside --algorithms, separated by ';' (specs contain commas), e.g. "
    "'arc>gm;bucketing(s=2)>centered_clipping(tau=0.3,iters=3)' (quote it in a shell); see --defence of "
    'experiments.train for the syntax.',
)
_CORRUPTIONS = flags.DEFINE_string(
    'corruptions', 'data,omniscient',
    'Comma-separated corruptions: data, label_flipping, update attack specs name(key=value,...) of '
    f'{", ".join(catalog.ATTACK_NAMES)}, the grids {", ".join(catalog.GRIDS)}, and the targeted attacks (backdoors, '
    f'digits only) {", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)}.',
)
_ROUNDS_AFTER_ATTACK = flags.DEFINE_integer(
    'rounds_after_attack', 0,
    'Targeted attacks: their attackers stop after round total_rounds - N and act as honest clients for the last N '
    'rounds (a backdoor\'s durability); every run is then also evaluated at round total_rounds - N, and a row\'s '
    'attack_success_rate is the ASR N rounds after they stopped. 0: they attack in every round.',
    lower_bound=0,
)
_DATA_FRACTIONS = finite_flags.define_float_list('data_fractions', [0, 0.01, 0.1, 0.25], 'rho for data corruption.')
_UPDATE_FRACTIONS = finite_flags.define_float_list(
    'update_fractions', [0, 0.01, 0.1, 0.25, 0.4],
    'rho for every corruption but data: label_flipping and the update attacks (gaussian, omniscient, alie, ...).'
)
_SEEDS = flags.DEFINE_list('seeds', ['0', '1'], 'Seeds (client sampling and the corrupted set).')
_TASK = flags.DEFINE_enum('task', 'digits', tasks.TASK_NAMES, 'Task.')
_LABEL_CONCENTRATION = flags.DEFINE_float(
    'label_concentration', None,
    'digits: Dirichlet concentration of each client\'s label mixture (unset: the task\'s 0.5, two or three '
    'digits per client; 100: every client near the population mixture, like the RFA paper\'s EMNIST writers).',
    lower_bound=1e-3, upper_bound=1e6,
)
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 30, 'Rounds per run.', lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs_per_round', 5, 'Local epochs (the paper: 5).', lower_bound=1)
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', 16, 'Local batch size.', lower_bound=1)
_CLIENT_LEARNING_RATE = flags.DEFINE_float('client_learning_rate', 0.1, 'Client SGD rate.', lower_bound=0.0)
_CLIPPING_NORM = flags.DEFINE_float('clipping_norm', 1.0, 'norm_clipping bound.', lower_bound=1e-30)
_SERVER_LEARNING_RATE = flags.DEFINE_float(
    'server_learning_rate', 1.0, 'Server SGD rate on every algorithm\'s aggregate.', lower_bound=0.0
)
_CENTERED_CLIPPING_RADIUS = flags.DEFINE_float(
    'centered_clipping_radius', 1.0, 'centered_clipping: tau, the residual norm bound.', lower_bound=1e-30
)
_CENTERED_CLIPPING_ITERATIONS = flags.DEFINE_integer(
    'centered_clipping_iterations', 3, 'centered_clipping: secure averages per round.', lower_bound=1
)
_NORM_FILTER_MULTIPLIER = flags.DEFINE_float(
    'norm_filter_multiplier', 2.0,
    'filtered_centered_clipping: drop clients whose update norm exceeds this multiple of the median norm.',
    lower_bound=1.0,
)
_VALIDATION_FRACTION = flags.DEFINE_float(
    'validation_fraction', None,
    'digits: share in (0, 1) of each client\'s examples held out as validation data, which then replaces the '
    'test set in every evaluation (to choose hyperparameters without reading the test set).',
    lower_bound=1e-6, upper_bound=1 - 1e-6,
)
_USE_SYNTHETIC_DATA = flags.DEFINE_bool('use_synthetic_data', False, 'TFF baseline tasks: synthetic data.')
_ROUNDS_PER_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 10,
    'Checkpoint each run every this many rounds (0: never), so that the same command resumes an interrupted '
    'sweep inside its unfinished run.',
    lower_bound=0,
)
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/tff_robust_runs', 'Root output directory.')
_EXPERIMENT_NAME = flags.DEFINE_string('experiment_name', 'robustness_sweep', 'Subdirectory of the sweep.')


def _corruption_kinds(text: str) -> list[str]:
  """The corruptions of --corruptions: data corruptions as given, attack specs (update and targeted) canonical,
  grids expanded."""
  kinds = []
  for spec in catalog.split_specs(text):
    try:
      targeted = targeted_catalog.lookup(spec)
      if targeted is not None:
        expanded = [str(targeted)]
      else:
        expanded = [spec] if spec in corruption.DATA_CORRUPTIONS[1:] else catalog.expand([spec])
    except ValueError as error:
      raise app.UsageError(
          f'--corruptions: {error}; besides the attacks: {", ".join(corruption.DATA_CORRUPTIONS[1:])}, the grids '
          f'{", ".join(catalog.GRIDS)} and the targeted attacks {", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)}'
      ) from None
    kinds += [kind for kind in expanded if kind not in kinds]
  return kinds


def _path_component(kind: str) -> str:
  """A canonical corruption as one file-name component: `backdoor(target=0,size=4)` -> `backdoor-target=0-size=4`."""
  return kind if kind in corruption.DATA_CORRUPTIONS else re.sub(r'[(),]', '-', kind).rstrip('-')


def _config(method: str, fraction: float, defences: dict) -> algorithms.AlgorithmConfig:
  """The config of `method`: an algorithm name, or a key of `defences` (canonical spec -> chain), run as fedavg."""
  m = _CLIENTS_PER_ROUND.value
  given_rho = method in ('multi_krum',) or method in defences
  return algorithms.AlgorithmConfig(
      client_learning_rate=_CLIENT_LEARNING_RATE.value,
      trim_fraction=min(fraction, 0.45) if method == 'trimmed_mean' else 0.1,
      num_byzantine=min(math.ceil(fraction * m), (m - 3) // 2) if given_rho else 1,
      defence=method if method in defences else None,
      clipping_norm=_CLIPPING_NORM.value,
      server_learning_rate=_SERVER_LEARNING_RATE.value,
      centered_clipping_radius=_CENTERED_CLIPPING_RADIUS.value,
      centered_clipping_iterations=_CENTERED_CLIPPING_ITERATIONS.value,
      norm_filter_multiplier=_NORM_FILTER_MULTIPLIER.value,
  )


def _runs(algorithm_names, corruptions, data_fractions, update_fractions, seeds):
  """(algorithm, corruption, fraction, seed); rho = 0 appears once, as corruption 'none'."""
  for algorithm in algorithm_names:
    for seed in seeds:
      yield algorithm, 'none', 0.0, seed
      for kind in corruptions:
        for fraction in (data_fractions if kind == 'data' else update_fractions):
          if fraction > 0:
            yield algorithm, kind, fraction, seed


# Flags added after sweeps were recorded: a record without them ran at their defaults.
_ADDED_FLAGS = (
    _SERVER_LEARNING_RATE, _CENTERED_CLIPPING_RADIUS, _CENTERED_CLIPPING_ITERATIONS, _NORM_FILTER_MULTIPLIER,
    _VALIDATION_FRACTION, _ROUNDS_AFTER_ATTACK,
)


# How every run's initial model is chosen. Sweeps recorded without it gave each process its own initial model,
# which depended on the runs before it in the Python process (`initial_weights`): they are not resumed.
_INITIAL_MODEL = 'one for every run, drawn from seed 0'


def _per_run_settings() -> dict:
  """The flags every run of the sweep shares (the grid itself may grow between invocations), and how its
  initial model is chosen."""
  settings = {flag.name: flag.value for flag in (
      _TASK, _LABEL_CONCENTRATION, _TOTAL_ROUNDS, _CLIENTS_PER_ROUND, _CLIENT_EPOCHS, _CLIENT_BATCH_SIZE,
      _CLIENT_LEARNING_RATE, _CLIPPING_NORM, _USE_SYNTHETIC_DATA) + _ADDED_FLAGS}
  return dict(settings, initial_model=_INITIAL_MODEL)


def _task_options() -> dict:
  """The task builder's options set by flags (an unset one keeps the builder's default)."""
  return dict(label_concentration=_LABEL_CONCENTRATION.value, validation_fraction=_VALIDATION_FRACTION.value)


def write_table(rows, path):
  """results.md: per corruption, mean [min, max] of the final accuracy over seeds, algorithm x rho."""
  lines = ['# Robustness sweep: final test accuracy, mean [min, max] over seeds', '']
  calls = {r['algorithm']: r['calls_per_round'] for r in rows}
  for kind in sorted({r['corruption'] for r in rows} - {'none'}):
    fractions = sorted({0.0} | {r['fraction'] for r in rows if r['corruption'] == kind})
    lines += [f'## {kind} corruption', '',
              '| algorithm | calls/round | ' + ' | '.join(f'rho={f:g}' for f in fractions) + ' |',
              '|---|---|' + '---|' * len(fractions)]
    for algorithm in dict.fromkeys(r['algorithm'] for r in rows):
      cells = []
      for fraction in fractions:
        accs = [r['accuracy'] for r in rows if r['algorithm'] == algorithm and r['fraction'] == fraction
                and r['corruption'] in (('none',) if fraction == 0 else (kind,))]
        cells.append(f'{np.mean(accs):.3f} [{min(accs):.3f}, {max(accs):.3f}]' if accs else '-')
      lines.append(f'| {algorithm} | {calls[algorithm]:g} | ' + ' | '.join(cells) + ' |')
    lines.append('')
  with open(path, 'w') as f:
    f.write('\n'.join(lines))


def plot(rows, path):
  """Accuracy vs rho, one panel per corruption (or one of the clean runs), mean line and min-max band over seeds
  per algorithm."""
  kinds = sorted({r['corruption'] for r in rows} - {'none'}) or ['none']
  figure, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4.2), squeeze=False)
  for axis, kind in zip(axes[0], kinds):
    for algorithm in dict.fromkeys(r['algorithm'] for r in rows):
      by_fraction = collections.defaultdict(list)
      for r in rows:
        if r['algorithm'] == algorithm and (r['corruption'] == kind or r['fraction'] == 0):
          by_fraction[r['fraction']].append(r['accuracy'])
      fractions = sorted(by_fraction)
      accs = [by_fraction[f] for f in fractions]
      line, = axis.plot(fractions, [np.mean(a) for a in accs], marker='o', label=algorithm)
      axis.fill_between(fractions, [min(a) for a in accs], [max(a) for a in accs], color=line.get_color(),
                        alpha=0.2)
    axis.set(title=f'{kind} corruption', xlabel='corruption level rho (share of data weight)',
             ylabel='test accuracy', ylim=(0, 1))
    axis.grid(alpha=0.3)
  axes[0][-1].legend(fontsize=8, loc='lower left')
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)


@worker_exit_report.reports_worker_exit(
    'The same command resumes the sweep: finished runs are kept in results.csv, the unfinished one resumes from its '
    'newest checkpoint.'
)
def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  unknown = set(_ALGORITHMS.value) - set(algorithms.ALGORITHM_NAMES)
  if unknown:
    raise app.UsageError(f'--algorithms: unknown {sorted(unknown)}; allowed {algorithms.ALGORITHM_NAMES}')
  try:
    defences = {str(chain): chain for chain in defence_registry.parse_list(_DEFENCES.value)}
  except ValueError as error:
    raise app.UsageError(f'--defences: {error}') from None
  clashing = set(defences) & set(algorithms.ALGORITHM_NAMES)
  if clashing:
    raise app.UsageError(f'--defences: {sorted(clashing)} would be labelled like the algorithms of that name; give '
                         'them a parameter, e.g. centered_clipping(tau=1.0)')
  corruptions = _corruption_kinds(_CORRUPTIONS.value)
  try:
    targeted_runs.check(
        corruptions, task=_TASK.value, total_rounds=_TOTAL_ROUNDS.value, rounds_after_attack=_ROUNDS_AFTER_ATTACK.value,
        server_learning_rate=_SERVER_LEARNING_RATE.value,
    )
  except ValueError as error:
    raise app.UsageError(str(error)) from None
  # The update attack each corruption runs (a targeted attack's update half assumes the server learning rate).
  update_attacks = {kind: corruption.update_attack(kind, _SERVER_LEARNING_RATE.value) for kind in corruptions}
  update_attacks = {kind: None if spec is None else str(spec) for kind, spec in update_attacks.items()}
  for algorithm in _ALGORITHMS.value + list(defences):
    for kind in corruptions:
      if update_attacks[kind] is not None:
        try:
          algorithms.check_settings(
              'fedavg' if algorithm in defences else algorithm, _config(algorithm, 0.0, defences),
              clients_per_round=_CLIENTS_PER_ROUND.value, update_attack=update_attacks[kind],
          )
        except ValueError as error:
          flag = 'defences' if algorithm in defences else 'algorithms'
          raise app.UsageError(f'--{flag}={algorithm} with --corruptions={kind}: {error}') from None
  data_fractions, update_fractions = _DATA_FRACTIONS.value, _UPDATE_FRACTIONS.value
  if any(not 0 <= f < 1 for f in data_fractions + update_fractions):
    raise app.UsageError('--data_fractions and --update_fractions must lie in [0, 1)')
  seeds = seeds_flags.parse_list(_SEEDS.value, 'seeds')
  try:
    tasks.builder_arguments(_TASK.value, **_task_options())
  except ValueError as error:
    raise app.UsageError(f'--{error}') from error
  logging.set_verbosity(logging.WARNING)
  tf.keras.utils.set_random_seed(0)
  execution_context.set_local_execution_context()
  task = tasks.create_task(
      _TASK.value, client_epochs=_CLIENT_EPOCHS.value, client_batch_size=_CLIENT_BATCH_SIZE.value, seed=0,
      use_synthetic_data=_USE_SYNTHETIC_DATA.value, **_task_options(),
  )
  output_dir = os.path.join(_ROOT_OUTPUT_DIR.value, _EXPERIMENT_NAME.value)
  os.makedirs(output_dir, exist_ok=True)
  try:
    run_settings.check_same_run(
        output_dir, _per_run_settings(), defaults={flag.name: flag.default for flag in _ADDED_FLAGS}
    )
  except run_settings.SettingsMismatch as error:
    raise app.UsageError(f'{error}; give a new --experiment_name') from None
  run_settings.record(output_dir, _per_run_settings())
  processes = {}
  asr_evaluators = {}  # one per targeted attack, shared by its runs (a new one traces its evaluation again)
  initial_model_weights = initial_weights.drawn(task.model_fn, 0)  # _INITIAL_MODEL
  runs = list(_runs(_ALGORITHMS.value + list(defences), corruptions, data_fractions, update_fractions, seeds))
  finished = {sweep_results.run_key(row): row for row in sweep_results.read_finished(output_dir)}
  if finished:
    print(f'resuming: {sum(run in finished for run in runs)} of {len(runs)} runs already in results.csv')
  for algorithm, kind, fraction, seed in tqdm.tqdm([r for r in runs if r not in finished], desc='sweep',
                                                   unit='run'):
    attack = update_attacks.get(kind)
    config = _config(algorithm, fraction, defences)
    # One process per setting, shared by the seeds, unless it draws random numbers from the run's seed (a noisy
    # defence, a random attack, a noisy uplink).
    name = 'fedavg' if algorithm in defences else algorithm
    process_seed = seed if algorithms.process_draws_from_seed(name, config, attack) else 0
    alpha = targeted_runs.attacker_alpha(kind)  # constrain-and-scale's attackers train another objective
    key = (algorithm, config, attack, process_seed, alpha)
    if key not in processes:
      processes[key] = algorithms.build_learning_process(
          name, task.model_fn, config,
          clients_per_round=_CLIENTS_PER_ROUND.value, update_attack=attack, seed=process_seed, attacker_alpha=alpha,
      )
    if kind not in asr_evaluators:
      asr_evaluators[kind] = corruption.attack_success_evaluator(task, kind)
    corrupted = corruption.select_corrupted_clients(task, fraction, seed)
    total_rounds, rounds_after_attack = _TOTAL_ROUNDS.value, _ROUNDS_AFTER_ATTACK.value
    run_name = f'{defence_registry.path_component(algorithm)}_{_path_component(kind)}_{fraction:g}_seed{seed}'
    run_dir = os.path.join(output_dir, 'runs', run_name)
    summary = training_loop.run_training(
        processes[key], task,
        corruption.make_client_data_fn(
            task, kind, corrupted, window=targeted_runs.window(kind, total_rounds, rounds_after_attack)),
        total_rounds=total_rounds, clients_per_round=_CLIENTS_PER_ROUND.value,
        rounds_per_eval=targeted_runs.rounds_per_eval(total_rounds, rounds_after_attack), seed=seed,
        show_progress=False, rounds_per_checkpoint=_ROUNDS_PER_CHECKPOINT.value,
        initial_model_weights=initial_model_weights, output_dir=run_dir,
        attack_success_evaluator=asr_evaluators[kind],
    )
    row = dict(
        algorithm=algorithm, corruption=kind, fraction=fraction, seed=seed,
        accuracy=summary['eval/accuracy'], loss=summary['eval/loss'],
        calls_per_round=summary['secure_average_calls'] / summary['rounds'],
        corruption_weight_share=corruption.corrupted_weight_share(task, corrupted),
        **targeted_runs.row_fields(kind, summary, run_dir, total_rounds, rounds_after_attack),
    )
    sweep_results.append(output_dir, row)
    finished[sweep_results.run_key(row)] = row
  rows = [finished[run] for run in runs]
  write_table(rows, os.path.join(output_dir, 'results.md'))
  plot(rows, os.path.join(output_dir, 'accuracy_vs_corruption.png'))
  worst_case_tables.write_worst_case_tables(rows, os.path.join(output_dir, 'worst_case.md'))
  written = 'results.csv, results.md, accuracy_vs_corruption.png, worst_case.md'
  if any(targeted_runs.is_targeted(row['corruption']) for row in rows):
    backdoor_tables.write_backdoor_tables(rows, os.path.join(output_dir, 'backdoor.md'))
    backdoor_figure.plot(rows, os.path.join(output_dir, 'backdoor_asr.png'))
    written += ', backdoor.md, backdoor_asr.png'
  print(f'wrote {output_dir}/{written}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
