"""Section 1 of `benchmarks.scaling` (`algorithms`): every algorithm of the runner relative to FedAvg.

One round of every algorithm of the runner on `--task` (digits), the same cohort of
`--clients_per_round` clients and the same initial model, as ratios to FedAvg. Sampled-cohort processes
take `next(state, cohort)`; the stateful ones (Fed+, personalized RFA, local-only) are driven with their
cohort's client states kept in memory (no `ClientStateStore`; its cost is in benchmarks/fedplus_cost.py);
the indexed ones (MtFEEL with dde_steps=0, signSGD) treat the cohort as all their N devices. CPU seconds of
the worker and of this process per round are recorded beside the wall time. Peak memory: the rounds run
in the TFF `worker_binary` subprocess, and a warm worker keeps freed memory resident, so each algorithm
then gets a fresh worker and 1 + `--memory_rounds` rounds: the increase of the worker's VmHWM over its idle
resident set (loading the computation included), and that of this process over the last
`--memory_rounds` rounds (VmHWM reset through /proc/self/clear_refs after the first round, which compiles).
"""

import dataclasses
import os

from absl import flags
import numpy as np
import tqdm

from benchmarks import process_stats
from benchmarks import scaling_common
from benchmarks import scaling_report
from tff_robust.simulation import algorithms

_ALGORITHMS = flags.DEFINE_multi_enum('algorithms', list(algorithms.ALGORITHM_NAMES), algorithms.ALGORITHM_NAMES,
                                      'Algorithms of section 1 (FedAvg is always included).')
_DELTA_FL_SECURE = flags.DEFINE_boolean('delta_fl_secure', True, 'Also time Delta-FL with the secure quantile.')
_ROUNDS = flags.DEFINE_integer('rounds', 7, 'Timed rounds per algorithm (after one warm-up).', lower_bound=1)
_MEMORY_ROUNDS = flags.DEFINE_integer('memory_rounds', 3, 'Rounds per algorithm in its fresh worker.',
                                      lower_bound=1)


def _algorithm_variants() -> dict:
  """{row name: (algorithm name, config)}; FedAvg first."""
  config = algorithms.AlgorithmConfig(dde_steps=0)
  variants = {'fedavg': ('fedavg', config)}
  for name in _ALGORITHMS.value:
    if name == 'delta_fl':
      variants['delta_fl (exact quantile)'] = ('delta_fl', config)
      if _DELTA_FL_SECURE.value:
        variants['delta_fl (secure quantile)'] = ('delta_fl', dataclasses.replace(config, quantile_method='secure'))
    elif name != 'fedavg':
      variants[name] = (name, config)
  return variants


def section() -> str:
  """Runs section 1 (see the module docstring) and returns its markdown."""
  load_start = os.getloadavg()[0]
  rounds = scaling_common.value(_ROUNDS, quick=2)
  memory_rounds = scaling_common.value(_MEMORY_ROUNDS, quick=1)
  m = scaling_common.CLIENTS_PER_ROUND.value
  worker = scaling_common.fresh_worker()
  task, cohort = scaling_common.task_and_cohort(m)
  processes = {
      name: algorithms.build_learning_process(algorithm, task.model_fn, config, clients_per_round=m)
      for name, (algorithm, config) in tqdm.tqdm(_algorithm_variants().items(), desc='building', unit='process')
  }
  initial_weights = processes['fedavg'].get_model_weights(processes['fedavg'].initialize())
  runners = {name: scaling_common.RoundRunner(process, cohort, initial_weights) for name, process in processes.items()}
  times = scaling_common.timed(runners, rounds, worker.pid, 'interleaved rounds')

  peaks = {}
  for name, runner in tqdm.tqdm(runners.items(), desc='memory (fresh worker each)', unit='algorithm'):
    worker = scaling_common.fresh_worker()
    process_stats.reset_peak(worker.pid)  # a fresh worker's VmHWM is already its peak since start
    worker_start = process_stats.resident_bytes(worker.pid)
    runner()  # the first round in this worker: the computation is compiled (Python) and loaded (worker)
    python_resettable = process_stats.reset_peak('self')
    python_start = process_stats.resident_bytes('self')
    for _ in range(memory_rounds):
      runner()
    peaks[name] = (
        process_stats.MemoryPeak(worker_start, process_stats.peak_resident_bytes(worker.pid)),
        process_stats.MemoryPeak(python_start, process_stats.peak_resident_bytes('self'))
        if python_resettable else None,
    )

  wall = {name: scaling_common.median_after_warmup(t.wall) for name, t in times.items()}
  cpu = {name: scaling_common.median_after_warmup([p + w for p, w in zip(t.python_cpu, t.worker_cpu)])
         for name, t in times.items()}
  worker_increase = {name: peak[0].increase for name, peak in peaks.items()}
  python_increase = {name: None if peak[1] is None else peak[1].increase for name, peak in peaks.items()}
  rows = []
  for name, runner in runners.items():
    rows.append([
        f'`{name}`', runner.kind, f'{wall[name]:.3f}', scaling_report.ratio(wall[name], wall['fedavg']),
        f'{cpu[name]:.3f}', scaling_report.ratio(cpu[name], cpu['fedavg']),
        scaling_report.megabytes(worker_increase[name]),
        scaling_report.ratio(worker_increase[name], worker_increase['fedavg'], min_baseline=scaling_common.MIB),
        scaling_report.megabytes(python_increase[name]),
        scaling_report.ratio(python_increase[name], python_increase['fedavg'], min_baseline=scaling_common.MIB),
    ])
  parameters = sum(np.size(w) for w in initial_weights.trainable)
  body = [
      '## 1. Every algorithm of the runner relative to FedAvg',
      f'Task `{scaling_common.TASK.value}` ({parameters:,}-parameter model), the same cohort of {m} clients (1 local epoch, '
      f'batch 16) and the same initial model for every algorithm; default `AlgorithmConfig` (MtFEEL with '
      f'dde_steps = 0). Round: median wall seconds of one `next` over {rounds} rounds interleaved across all '
      'algorithms; CPU: median CPU seconds per round of the worker plus this process (less sensitive than wall '
      'time to other jobs on the machine). Kinds: *sampled* `next(state, cohort)`; *stateful* '
      '`next(state, cohort, client states)`, states kept in memory (the on-disk store is timed in '
      '`benchmarks/fedplus_cost.py`); *indexed*: the cohort is all N devices of MtFEEL/signSGD '
      '(`benchmarks/mtfeel_cost.py` times them on `digits_cohorts`).',
      f'Peak memory: each algorithm then runs 1 + {memory_rounds} rounds in a fresh TFF worker; *worker* is '
      'the increase of the worker\'s VmHWM over its idle resident set, so it includes loading the computation '
      '(which dominates for a model this small: it measures the size of the computation more than of the '
      f'data); *Python* is the increase of this process\'s VmHWM over the last {memory_rounds} round(s) '
      '(reset via /proc/self/clear_refs after the first round, which compiles the computation for the new '
      'worker\'s context) above its resident set when they start; ratios only where FedAvg\'s is over 1 MiB. '
      'The worker keeps freed memory resident, so peaks are only comparable between fresh workers.',
      scaling_report.table(
          ['algorithm', 'kind', 'round (s)', '/ FedAvg', 'CPU (s)', '/ FedAvg', 'worker peak +MB', '/ FedAvg',
           'Python peak +MB', '/ FedAvg'], rows, 'll' + 'r' * 8),
      scaling_common.machine_line(f'{rounds} interleaved rounds after one warm-up; 1 + {memory_rounds} memory rounds',
                    load_start),
  ]
  return '\n\n'.join(body)
