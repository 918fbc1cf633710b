"""Section 3 of `benchmarks.scaling` (`model_size`): the aggregators' cost as the model grows.

Aggregation alone of `--aggregation_clients` client updates of `--model_sizes` float32
parameters: the weighted mean (tff.aggregators.MeanFactory), the geometric median
(GeometricMedianFactory, 3 passes) and the gather-based coordinate median, trimmed mean (10%), multi-Krum
and Bulyan (f = 1). Client values are drawn inside the computation from seeds (feeding them from
Python would time gRPC), a generation-only computation is timed beside them and subtracted (wall and CPU
time), and the result is reduced to a scalar on the server so that the same 4-byte value comes back for
every aggregator. Peak memory: each computation once more in a fresh worker, the increase of its VmHWM
over its idle resident set, also as a multiple of the cohort's data (clients x parameters x 4 bytes).
A computation that fails (e.g. out of memory) is reported as failed with its error; the others go on.
"""

import os

from absl import flags
import tqdm

from benchmarks import aggregation_costs
from benchmarks import process_stats
from benchmarks import scaling_common
from benchmarks import scaling_report

_MODEL_SIZES = flags.DEFINE_list('model_sizes', ['10000', '100000', '1000000', '10000000'],
                                 'Parameters per client update.')
_AGGREGATORS = flags.DEFINE_multi_enum('aggregators', list(aggregation_costs.AGGREGATORS),
                                       aggregation_costs.AGGREGATORS, 'Aggregators of section 3.')
_AGGREGATION_CLIENTS = flags.DEFINE_integer('aggregation_clients', 10, 'Clients of section 3.', lower_bound=7)
_AGGREGATION_REPEATS = flags.DEFINE_integer('aggregation_repeats', 5, 'Timed calls per aggregator and size '
                                            'below 10^7.', lower_bound=1)
_LARGEST_MODEL_REPEATS = flags.DEFINE_integer('largest_model_repeats', 2, 'Timed calls per aggregator at sizes '
                                              '>= 10^7 (~1 min per repeat on 2 cores).', lower_bound=1)
_CPU_RESOLUTION = 0.05  # seconds: 5 clock ticks of /proc/<pid>/stat; smaller CPU baselines give no ratio

def _peak_in_fresh_worker(call) -> int:
  """Increase of a fresh worker's VmHWM over its idle resident set while it runs `call` once (bytes).

  A fresh worker, because a warm one keeps freed memory resident and later calls reuse it.
  """
  worker = scaling_common.fresh_worker()
  process_stats.reset_peak(worker.pid)  # a no-op in effect: its VmHWM is already its peak since start
  idle = process_stats.resident_bytes(worker.pid)
  call()
  return max(process_stats.peak_resident_bytes(worker.pid) - idle, 0)


class _Guarded:
  """A call that, once it has raised, records the error and does nothing more (a baseline that cannot run at
  some size is reported, and the others still run)."""

  def __init__(self, call):
    self._call = call
    self.error = None

  def __call__(self):
    if self.error is None:
      try:
        self._call()
      except Exception as error:  # pylint: disable=broad-except
        self.error = f'{type(error).__name__}: {(str(error).splitlines() or [""])[0][:300]}'


def section() -> str:
  """Runs section 3 (see the module docstring) and returns its markdown."""
  load_start = os.getloadavg()[0]
  sizes = sorted(int(float(s)) for s in scaling_common.value(_MODEL_SIZES, quick=['10000', '100000']))
  clients = _AGGREGATION_CLIENTS.value
  names = ['mean'] + [name for name in aggregation_costs.AGGREGATORS if name in _AGGREGATORS.value and name != 'mean']
  seeds = list(range(clients))
  wall, cpu, memory, failures, repeats_used = {}, {}, {}, {}, {}
  for dimension in sizes:
    repeats = (scaling_common.value(_AGGREGATION_REPEATS, quick=2) if dimension < 10**7
               else scaling_common.value(_LARGEST_MODEL_REPEATS, quick=1))
    repeats_used[dimension] = repeats
    computations = aggregation_costs.aggregation_computations(dimension, names)
    calls = {name: _Guarded(lambda c=computation: c(seeds)) for name, computation in computations.items()}
    worker = scaling_common.fresh_worker()
    records = scaling_common.timed(calls, repeats, worker.pid, f'aggregation, d = {dimension:.0e}')
    for name, call in calls.items():
      if call.error is not None:
        failures[(name, dimension)] = call.error
        continue
      record = records[name]
      wall[(name, dimension)] = scaling_common.median_after_warmup(record.wall)
      cpu[(name, dimension)] = scaling_common.median_after_warmup(
          [p + w for p, w in zip(record.python_cpu, record.worker_cpu)])
    for name, call in tqdm.tqdm(calls.items(), desc=f'memory, d = {dimension:.0e} (fresh worker each)',
                                unit='call'):
      if call.error is None:
        memory[(name, dimension)] = _peak_in_fresh_worker(call)
        if call.error is not None:  # raised only now, e.g. out of memory beside the other jobs
          failures[(name, dimension)] = call.error

  def net(values, name, d):
    if (name, d) not in values or ('generation_only', d) not in values:
      return None
    return values[(name, d)] - values[('generation_only', d)]

  def cell(name, d):
    if (name, d) in failures:
      return 'failed'
    wall_net = net(wall, name, d)
    if wall_net is None:
      return 'n/a'
    return (f'{scaling_report.ratio(wall_net, net(wall, "mean", d))} / '
            f'{scaling_report.ratio(net(cpu, name, d), net(cpu, "mean", d), min_baseline=_CPU_RESOLUTION)} '
            f'({wall_net:.3f} s)')

  data_bytes = {d: clients * d * 4 for d in sizes}
  time_rows, memory_rows = [], []
  for d in sizes:
    mean_wall, mean_cpu = net(wall, 'mean', d), net(cpu, 'mean', d)
    time_rows.append(
        [f'{d:.0e}', repeats_used[d],
         'failed' if ('generation_only', d) in failures else f'{wall[("generation_only", d)]:.3f}',
         'n/a' if mean_wall is None else f'{mean_wall:.3f} / {mean_cpu:.3f}']
        + [cell(name, d) for name in names[1:]])
    memory_rows.append([f'{d:.0e}', scaling_report.megabytes(data_bytes[d])] + [
        'failed' if (name, d) in failures else 'n/a' if memory.get((name, d)) is None else
        f'{scaling_report.megabytes(memory[(name, d)])} ({memory[(name, d)] / data_bytes[d]:.1f}x)'
        for name in ['generation_only'] + names])
  failed = [f'- `{name}` at d = {d:.0e} failed: {reason}' for (name, d), reason in failures.items()]
  not_positive = [f'`{name}` at {d:.0e}' for name in names for d in sizes
                  if net(wall, name, d) is not None and net(wall, name, d) <= 0]
  body = [
      f'## 3. Aggregation alone vs model size ({clients} clients, float32)',
      'Each computation draws the clients\' updates inside the computation (uniform in [-1, 1) from per-client '
      'seeds, weights 1..10), aggregates them and returns the sum of the aggregate (one float). *generation* '
      'is the median seconds of a computation that only draws the updates; its median wall seconds and CPU '
      'seconds (worker + Python) are subtracted from each aggregator\'s to give the net aggregation cost. '
      'Cells: net wall time / mean\'s net wall time, then the same ratio in CPU time (which other jobs on the '
      'machine disturb less; n/a where the mean\'s net CPU is under 0.05 s, 5 clock ticks), then the net wall '
      'seconds. Geometric median: `GeometricMedianFactory`, 3 passes '
      '(3 secure-average calls); trimmed mean 10%; multi-Krum and Bulyan with f = 1.',
      scaling_report.table(['parameters', 'repeats', 'generation (s)', 'mean net (s, wall / CPU)']
                           + [f'{n} / mean' for n in names[1:]], time_rows),
      'Peak memory: each computation is run once more in a fresh worker (a warm one keeps freed memory '
      'resident, and later calls reuse it); the increase of its VmHWM over its idle resident set, in MB and as '
      'a multiple of the cohort\'s data (clients x parameters x 4 bytes). It includes loading the computation '
      '(which dominates at the smallest sizes) and, for the aggregators, the generated client values '
      '(*generation_only* alone):',
      scaling_report.table(['parameters', 'cohort data (MB)'] + [f'{n} +MB' for n in ['generation_only'] + names],
                           memory_rows),
      '\n'.join(failed),
      (f'Net wall time at or below zero ({", ".join(not_positive)}): the aggregation costs less than the '
       'noise of the generation-only baseline there, so that ratio is not meaningful.') if not_positive else '',
      scaling_common.machine_line('interleaved repeats per size as in the table, after one warm-up', load_start),
  ]
  return '\n\n'.join(part for part in body if part)
