"""Every benchmark command of the README runs to its ratio line, shrunk to one timed round on digits, and
`benchmarks.scaling` to its `--quick` smoke run into a temporary file (the README's own flags first, then the
shrinking ones: later flags win)."""

import os

import pytest

from tests import fork_server
from tests import test_readme_examples

# Flags that shrink each benchmark to seconds; the ratio line each prints.
_SHRUNK = {
    # Three algorithms of section 1 (each built twice, once in a fresh worker for its memory; Delta-FL's secure
    # quantile left to section 5), cohorts of 10 and 20, models of 10^3 and 10^4 for the mean and the geometric
    # median, two of section 5's five multi-pass algorithms: every section's code runs; every algorithm of the runner
    # runs in test_train and tests/simulation/test_algorithms_on_workers.py (the quick run of all of them took 295 s
    # of the slow set; section 5's 16 processes took 58 of this run's 112 s, section 3's six aggregators 18).
    'benchmarks.scaling': (['--quick', '--noperf', '--algorithms=fedavg', '--algorithms=rfa', '--algorithms=delta_fl',
                            '--nodelta_fl_secure', '--cohort_sizes=10,20', '--model_sizes=1000,10000',
                            '--aggregators=mean', '--aggregators=geometric_median', '--pass_algorithms=rfa',
                            '--pass_algorithms=delta_fl', '--output={tmp_path}/results.md'],
                           'Wrote {tmp_path}/results.md'),
    'benchmarks.rfa_cost': (['--rounds=1', '--task=digits', '--aggregation_clients=3', '--aggregation_dimension=10',
                             '--aggregation_repeats=1'], 'RFA / FedAvg'),
    'benchmarks.delta_fl_cost': (['--rounds=1'], 'delta_fl_secure'),
    'benchmarks.fedplus_cost': (['--rounds=1', '--store_parameters=1000'], 'fedplus_avg'),
    'benchmarks.mtfeel_cost': (['--rounds=1'], 'signsgd'),
    'benchmarks.isolation_cost': (['--rounds=1', '--task=digits', '--algorithms=fedavg'], 'fedavg'),
    'benchmarks.relay_overhead': (['--rounds=1', '--clients_per_round=4', '--dimension=1000'], 'relay + TLS / direct'),
    'benchmarks.defence_cost': (['--rounds=1', '--task=digits'], 'filtered_centered_clipping'),
    'benchmarks.attack_cost': (['--rounds=1', '--task=digits', '--attacks=omniscient,min_max,line_search'],
                               'line_search'),
    'benchmarks.parallel_workers': (['--quick'], '2 workers on 2 cores / 1 worker on 1 core ='),
    'benchmarks.evaluation_cost': (['--num_devices=3', '--examples_per_device=4', '--repeats=1'],
                                   'one-pass evaluation'),
    'benchmarks.final_evaluation_cost': (['--max_evaluated_devices=3', '--repeats=1'], 'runner (one pass)'),
    'benchmarks.shakespeare_round_cost': (['--rounds=1', '--cohorts=shakespeare_lstm_rfa:2',
                                           '--max_client_examples=8'], 'Keras floor'),
}


def test_every_readme_benchmark_is_shrunk_here():
  readme = {module for module, _ in test_readme_examples.readme_commands() if module.startswith('benchmarks.')}
  assert readme == set(_SHRUNK)


@pytest.mark.slow
@pytest.mark.parametrize('module', sorted(_SHRUNK))
def test_the_readme_benchmark_runs_shrunk(module, tmp_path):
  if module == 'benchmarks.parallel_workers' and len(os.sched_getaffinity(0)) < 2:
    pytest.skip('the parallel-workers benchmark pins two workers to two cores; this process has one')
  (argv,) = [argv for name, argv in test_readme_examples.readme_commands() if name == module]
  shrink, expected = _SHRUNK[module]
  shrink = [flag.format(tmp_path=tmp_path) for flag in shrink]
  result = fork_server.python_m(module, [*argv, *shrink], timeout=900)
  if module == 'benchmarks.isolation_cost' and 'NetworkIsolationError' in result.stderr:
    pytest.skip('network isolation unavailable here (as in tests/runtime/test_network_isolation.py)')
  assert result.returncode == 0, result.stderr[-3000:]
  assert expected.format(tmp_path=tmp_path) in result.stdout
