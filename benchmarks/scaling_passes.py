"""Section 5 of `benchmarks.scaling` (`passes`): where the round time of the multi-pass algorithms goes.

FedGeoMed+ and FedCoMed+ (the delta-median server step: a weighted mean, then `fedplus_max_iterations`
dependent secure sums), RFA and personalized RFA (`rfa_num_passes` smoothed-Weiszfeld secure averages) and
Delta-FL with the secure quantile (`quantile_passes` histogram secure sums) are each timed at several pass
counts, side by side with FedAvg on section 1's cohort and initial model (rounds interleaved across all).
A least-squares line through (pass count, CPU seconds per round) of each algorithm splits its round into
    CPU(passes) = fixed + passes x per_pass,
given as ratios to FedAvg's round: `fixed / FedAvg` is what the algorithm costs besides its passes (e.g. the
second local pass of personalized RFA, the loss evaluation of Delta-FL), `per pass / FedAvg` what each pass adds.
Per pass and client, that cost compares with section 2's floor (a federated map of x + 1 per client): TFF 0.87
runs every client of every pass as its own TensorFlow call. The last column is the largest pass count whose
fitted ratio stays within `--ratio_aim` (issue 23's aim, 1.5).
"""

import dataclasses
import os

from absl import flags
import tqdm

from benchmarks import pass_cost_fit
from benchmarks import scaling_common
from benchmarks import scaling_report
from tff_robust.processes import delta_fl
from tff_robust.simulation import algorithms

_PASS_COUNTS = {
    # algorithm: (its AlgorithmConfig field of the pass count, pass counts timed, other settings)
    'fedplus_geomed': ('fedplus_max_iterations', (1, 10, 30), {}),
    'fedplus_comed': ('fedplus_max_iterations', (1, 10, 30), {}),
    'rfa': ('rfa_num_passes', (1, 3, 10), {}),
    'personalized_rfa': ('rfa_num_passes', (1, 3, 10), {}),
    'delta_fl': ('quantile_passes', (1, 2, 8), {'quantile_method': 'secure'}),
}
_ALGORITHMS = flags.DEFINE_multi_enum('pass_algorithms', list(_PASS_COUNTS), list(_PASS_COUNTS),
                                     'Algorithms timed at several pass counts (repeatable).')
_ROUNDS = flags.DEFINE_integer('pass_rounds', 7, 'Timed rounds per (algorithm, pass count) (after one warm-up).',
                               lower_bound=1)
_RATIO_AIM = flags.DEFINE_float('ratio_aim', 1.5, 'Round / FedAvg ratio the last column solves the pass count for.',
                                lower_bound=1.0)


def _default_pass_count(config: algorithms.AlgorithmConfig, field: str) -> int:
  """The pass count `config` runs with by default: its `field`, or for Delta-FL's None its secure quantile's."""
  if field == 'quantile_passes':
    return delta_fl.default_quantile_passes(config.quantile_method, config.quantile_passes)
  return getattr(config, field)


def section() -> str:
  """Runs section 5 (see the module docstring) and returns its markdown."""
  load_start = os.getloadavg()[0]
  rounds = scaling_common.value(_ROUNDS, quick=2)
  m = scaling_common.CLIENTS_PER_ROUND.value
  worker = scaling_common.fresh_worker()
  task, cohort = scaling_common.task_and_cohort(m)
  base = algorithms.AlgorithmConfig(dde_steps=0)
  variants = {'fedavg': ('fedavg', base, None)}
  timed = {name: _PASS_COUNTS[name] for name in _PASS_COUNTS if name in _ALGORITHMS.value}
  for name, (field, counts, extra) in timed.items():
    for count in counts:
      variants[f'{name}, {field}={count}'] = (name, dataclasses.replace(base, **extra, **{field: count}), count)
  processes = {
      key: algorithms.build_learning_process(name, task.model_fn, config, clients_per_round=m)
      for key, (name, config, _) in tqdm.tqdm(variants.items(), desc='building', unit='process')
  }
  initial_weights = processes['fedavg'].get_model_weights(processes['fedavg'].initialize())
  runners = {key: scaling_common.RoundRunner(process, cohort, initial_weights) for key, process in processes.items()}
  times = scaling_common.timed(runners, rounds, worker.pid, 'rounds by pass count')
  wall = {key: scaling_common.median_after_warmup(t.wall) for key, t in times.items()}
  cpu = {key: scaling_common.median_after_warmup([p + w for p, w in zip(t.python_cpu, t.worker_cpu)])
         for key, t in times.items()}

  rows = [[f'`{key}`', f'{wall[key]:.3f}', scaling_report.ratio(wall[key], wall['fedavg']), f'{cpu[key]:.3f}',
           scaling_report.ratio(cpu[key], cpu['fedavg'])] for key in variants]
  fit_rows = []
  for name, (field, counts, extra) in timed.items():
    keys = [f'{name}, {field}={count}' for count in counts]
    fixed, per_pass = pass_cost_fit.linear_fit(counts, [cpu[key] for key in keys])
    default = _default_pass_count(dataclasses.replace(base, **extra), field)
    fit_rows.append([
        f'`{name}`', f'`{field}`', scaling_report.ratio(fixed, cpu['fedavg']), f'{1000 * per_pass:.1f}',
        f'{1000 * per_pass / m:.2f}', scaling_report.ratio(per_pass, cpu['fedavg'], digits=3), str(default),
        scaling_report.ratio(fixed + default * per_pass, cpu['fedavg']),
        pass_cost_fit.passes_within(_RATIO_AIM.value, cpu['fedavg'], fixed, per_pass),
    ])
  body = [
      '## 5. Round time against the number of dependent passes',
      f'Section 1\'s set-up (task `{scaling_common.TASK.value}`, {m} clients, the same initial model); each '
      'algorithm at several pass counts, every other setting at its default (Delta-FL: the secure quantile, '
      f'conformity 0.5). Median wall and CPU seconds (worker + this process) of {rounds} rounds interleaved '
      'across all rows.',
      scaling_report.table(['algorithm, passes', 'round (s)', '/ FedAvg', 'CPU (s)', '/ FedAvg'], rows),
      'Least-squares line CPU = fixed + passes x per pass, per algorithm; the round at the default pass count as '
      f'the line gives it; the largest pass count whose line stays within {_RATIO_AIM.value} x FedAvg. '
      'Section 2\'s floor (a map of x + 1, 10 clients) is about 1 ms per client.',
      scaling_report.table(
          ['algorithm', 'pass parameter', 'fixed / FedAvg', 'per pass (ms CPU)', 'per pass and client (ms)',
           'per pass / FedAvg', 'default passes', 'line at default / FedAvg',
           f'passes within {_RATIO_AIM.value} x FedAvg'], fit_rows, 'll' + 'r' * 7),
      scaling_common.machine_line(f'{rounds} interleaved rounds after one warm-up', load_start),
  ]
  return '\n\n'.join(body)
