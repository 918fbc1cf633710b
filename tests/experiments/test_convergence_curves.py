"""experiments/convergence_curves.py on fake run outputs: oracle calls per evaluation, seed bands, the figure."""

import csv
import json
import subprocess

import numpy as np
import pytest

from experiments import convergence_curves
from tests import fork_server


def _write_run(directory, *, algorithm, seed, calls_per_round, accuracies, rounds=6, corruption='none', fraction=0.0):
  """A run evaluated at the rounds in `accuracies` ({round: accuracy}), `calls_per_round` oracle calls each round."""
  directory.mkdir(parents=True)
  (directory / 'summary.json').write_text(json.dumps(dict(
      algorithm=algorithm, task='digits', seed=seed, corruption=corruption, corruption_fraction=fraction,
      rounds=rounds, secure_average_calls=calls_per_round * rounds, **{'eval/accuracy': accuracies[rounds]})))
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=['round', 'train/loss', 'eval/accuracy'])
    writer.writeheader()
    for r in range(1, rounds + 1):
      writer.writerow({'round': r, 'train/loss': 1.0 / r, 'eval/accuracy': accuracies.get(r, '')})


def _paper_report(runs, output_dir) -> subprocess.CompletedProcess:
  """`python -m experiments.paper_report` on the run directories below `runs`, writing to `output_dir`."""
  return fork_server.python_m(
      'experiments.paper_report',
      [f'--inputs={runs}', f'--output_dir={output_dir}'],
      timeout=300,
  )


def test_calls_are_rounds_times_the_runs_calls_per_round(tmp_path):
  _write_run(tmp_path / 'rfa', algorithm='rfa', seed=0, calls_per_round=3, accuracies={2: 0.5, 4: 0.7, 6: 0.8})
  curve = convergence_curves.load_curve(str(tmp_path / 'rfa'))
  assert curve.rounds == (2, 4, 6)
  assert curve.calls == (6.0, 12.0, 18.0)
  assert curve.values == (0.5, 0.7, 0.8) and curve.metric == 'eval/accuracy'
  assert (curve.record.algorithm, curve.record.seed) == ('rfa', 0)


def test_the_seed_band_uses_the_rounds_every_seed_evaluated(tmp_path):
  _write_run(tmp_path / 'a', algorithm='fedavg', seed=0, calls_per_round=1, accuracies={2: 0.4, 4: 0.6, 6: 0.9})
  _write_run(tmp_path / 'b', algorithm='fedavg', seed=1, calls_per_round=1, accuracies={3: 0.5, 6: 0.7})
  curves = convergence_curves.load_curves([str(tmp_path)])
  xs, mean, low, high = convergence_curves.seed_band(curves, 'calls')
  np.testing.assert_allclose(xs, [6.0])
  np.testing.assert_allclose([mean[0], low[0], high[0]], [80.0, 70.0, 90.0])


def test_paper_report_draws_accuracy_against_calls_for_run_directories(tmp_path):
  runs = tmp_path / 'runs'
  for seed in (0, 1):
    _write_run(runs / f'fedavg_{seed}', algorithm='fedavg', seed=seed, calls_per_round=1,
               accuracies={3: 0.6, 6: 0.8 + 0.01 * seed})
    _write_run(runs / f'rfa_{seed}', algorithm='rfa', seed=seed, calls_per_round=3,
               accuracies={3: 0.6, 6: 0.79 + 0.01 * seed})
  curves = convergence_curves.load_curves([str(runs)])
  assert {(c.record.algorithm, c.calls[-1]) for c in curves} == {('fedavg', 6.0), ('rfa', 18.0)}
  result = _paper_report(runs, tmp_path / 'out')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'rfa_accuracy_vs_calls.png' in result.stdout
  assert (tmp_path / 'out' / 'rfa_accuracy_vs_calls.png').stat().st_size > 10_000
  # and whether RFA's clean claim holds (experiments/paper_claims.py): 1 point below FedAvg, outside its 0.4
  assert 'RFA 79.50, FedAvg 80.50 (2 / 2 seeds): -1.00 | **does not hold**' in (tmp_path / 'out' / 'claims.md').read_text()


def test_the_seed_band_refuses_no_curves_and_an_unknown_axis(tmp_path):
  _write_run(tmp_path / 'a', algorithm='rfa', seed=0, calls_per_round=3, accuracies={6: 0.8})
  with pytest.raises(ValueError, match='at least one curve'):
    convergence_curves.seed_band([], 'calls')
  with pytest.raises(ValueError, match="x in \\('calls', 'rounds'\\)"):
    convergence_curves.seed_band(convergence_curves.load_curves([str(tmp_path)]), 'seconds')


def _drawn_figure(monkeypatch, curves, path):
  """The matplotlib figure `plot_convergence` saves to `path` (it is also written)."""
  from matplotlib import figure  # pylint: disable=g-import-not-at-top
  saved = []
  save = figure.Figure.savefig
  monkeypatch.setattr(figure.Figure, 'savefig', lambda self, *args, **kwargs: (saved.append(self), save(self, *args,
                                                                                                         **kwargs)))
  convergence_curves.plot_convergence(curves, path)
  (drawn,) = saved
  return drawn


def test_runs_evaluated_once_are_drawn_as_visible_points(tmp_path, monkeypatch):
  # A line through one point is invisible without a marker: the figure was blank for such runs.
  for seed in (0, 1):
    _write_run(tmp_path / f'fedavg_{seed}', algorithm='fedavg', seed=seed, calls_per_round=1, accuracies={6: 0.8})
    _write_run(tmp_path / f'rfa_{seed}', algorithm='rfa', seed=seed, calls_per_round=3, accuracies={6: 0.7})
  drawn = _drawn_figure(monkeypatch, convergence_curves.load_curves([str(tmp_path)]), str(tmp_path / 'calls.png'))
  lines = [line for axis in drawn.axes for line in axis.get_lines()]
  assert len(lines) == 4 and all(len(line.get_xdata()) == 1 for line in lines)  # 2 algorithms x (calls, rounds)
  assert all(line.get_marker() not in (None, '', 'None', ' ') and line.get_markersize() > 0 for line in lines)


def test_curves_that_differ_in_a_setting_are_drawn_in_panels_of_their_own(tmp_path, monkeypatch):
  from tff_robust.simulation import run_settings  # pylint: disable=g-import-not-at-top
  for seed in (0, 1):
    for cohort in (10, 50):
      run = tmp_path / f'rfa_{cohort}_{seed}'
      _write_run(run, algorithm='rfa', seed=seed, calls_per_round=3, accuracies={3: 0.5, 6: 0.7})
      run_settings.record(str(run), {'algorithm': 'rfa', 'clients_per_round': cohort, 'rfa_num_passes': 3})
  curves = convergence_curves.load_curves([str(tmp_path)])
  panels = convergence_curves.convergence_panels(curves)
  assert [title for title, _ in panels] == ['digits: no corruption\nclients_per_round=10',
                                           'digits: no corruption\nclients_per_round=50']
  assert [[(name, sorted(c.record.seed for c in line)) for name, line in lines] for _, lines in panels] == [
      [('rfa', [0, 1])], [('rfa', [0, 1])]]
  drawn = _drawn_figure(monkeypatch, curves, str(tmp_path / 'calls.png'))
  assert len(drawn.axes) == 4


def _write_dfl_run(directory, *, algorithm, seed, theta, errors_p90):
  """A Delta-FL-kind run (the Shakespeare GRU task) evaluated at the rounds of `errors_p90` ({round: p90})."""
  from tff_robust.simulation import run_settings  # pylint: disable=g-import-not-at-top
  directory.mkdir(parents=True)
  last = max(errors_p90)
  (directory / 'summary.json').write_text(json.dumps(dict(
      algorithm=algorithm, task='shakespeare_gru_dfl', seed=seed, rounds=last, secure_average_calls=last,
      conformity_level=theta,
      **{'eval/accuracy': 1 - errors_p90[last], 'eval/error_p90': errors_p90[last],
         'eval/error_mean': errors_p90[last] - 0.02})))
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=['round', 'eval/accuracy', 'eval/error_p90', 'eval/error_mean'])
    writer.writeheader()
    for r, p90 in sorted(errors_p90.items()):
      writer.writerow({'round': r, 'eval/accuracy': 1 - p90, 'eval/error_p90': p90, 'eval/error_mean': p90 - 0.02})
  run_settings.record(str(directory), {'algorithm': algorithm, 'conformity_level': theta})


def test_delta_fl_runs_get_their_error_curves_against_rounds(tmp_path):
  runs = tmp_path / 'runs'
  for seed in (0, 1):
    _write_dfl_run(runs / f'fedavg_{seed}', algorithm='fedavg', seed=seed, theta=1.0,
                   errors_p90={3: 0.8, 6: 0.70 + 0.02 * seed})
    _write_dfl_run(runs / f'dfl_{seed}', algorithm='delta_fl', seed=seed, theta=0.5,
                   errors_p90={3: 0.8, 6: 0.74 + 0.02 * seed})
    _write_dfl_run(runs / f'dfl08_{seed}', algorithm='delta_fl', seed=seed, theta=0.8,
                   errors_p90={3: 0.8, 6: 0.72 + 0.02 * seed})
  assert convergence_curves.load_curves([str(runs)]) == []  # no RFA-kind run: no accuracy-vs-calls figure
  with pytest.raises(ValueError, match="kind must be 'rfa' or 'dfl', got 'delta_fl'"):
    convergence_curves.load_curves([str(runs)], kind='delta_fl')
  curves = convergence_curves.load_curves([str(runs)], kind='dfl', metric='eval/error_p90')
  (_, lines), = convergence_curves.convergence_panels(curves)
  assert [name for name, _ in lines] == ['fedavg', 'delta_fl θ=0.8', 'delta_fl θ=0.5']  # a line per theta
  xs, mean, low, high = convergence_curves.seed_band(lines[2][1], 'rounds')
  np.testing.assert_allclose(xs, [3, 6])
  np.testing.assert_allclose(mean, [80.0, 75.0])
  np.testing.assert_allclose([low[1], high[1]], [74.0, 76.0])
  result = _paper_report(runs, tmp_path / 'out')
  assert result.returncode == 0, result.stderr[-2000:]
  assert (tmp_path / 'out' / 'dfl_metrics_vs_rounds.png').stat().st_size > 10_000
  assert not (tmp_path / 'out' / 'rfa_accuracy_vs_calls.png').exists()


def _write_backdoor_run(directory, *, algorithm, seed, asr):
  """A run of a targeted attack evaluated at the rounds of `asr` ({round: attack success rate})."""
  directory.mkdir(parents=True)
  last = max(asr)
  (directory / 'summary.json').write_text(json.dumps(dict(
      algorithm=algorithm, task='digits', seed=seed, corruption='backdoor(target=0)', corruption_fraction=0.1,
      rounds=last, secure_average_calls=last, **{'eval/accuracy': 0.9, 'eval/attack_success_rate': asr[last]})))
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=['round', 'eval/accuracy', 'eval/attack_success_rate'])
    writer.writeheader()
    for r, value in sorted(asr.items()):
      writer.writerow({'round': r, 'eval/accuracy': 0.8 + 0.01 * r, 'eval/attack_success_rate': value})


def test_runs_of_a_targeted_attack_get_accuracy_and_attack_success_rate_against_rounds(tmp_path):
  runs = tmp_path / 'runs'
  for seed in (0, 1):
    _write_backdoor_run(runs / f'fedavg_{seed}', algorithm='fedavg', seed=seed, asr={2: 0.5, 4: 0.9 + 0.02 * seed})
    _write_backdoor_run(runs / f'rfa_{seed}', algorithm='rfa', seed=seed, asr={2: 0.1, 4: 0.2})
  _write_run(runs / 'clean', algorithm='fedavg', seed=0, calls_per_round=1, accuracies={6: 0.9})  # no ASR: not drawn
  curves = convergence_curves.asr_curves([str(runs)])
  assert set(curves) == {'eval/accuracy', 'eval/attack_success_rate'}
  (title, lines), = convergence_curves.convergence_panels(curves['eval/attack_success_rate'])
  assert title == 'digits: backdoor(target=0), ρ=0.1' and [name for name, _ in lines] == ['fedavg', 'rfa']
  _, mean, low, high = convergence_curves.seed_band(lines[0][1], 'rounds')
  np.testing.assert_allclose([mean[1], low[1], high[1]], [91.0, 90.0, 92.0])
  assert {c.record.source for c in curves['eval/accuracy']} == {c.record.source for c in lines[0][1] + lines[1][1]}
  result = _paper_report(runs, tmp_path / 'out')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'asr_vs_rounds.png' in result.stdout
  assert (tmp_path / 'out' / 'asr_vs_rounds.png').stat().st_size > 10_000
  clean_only = _paper_report(runs / 'clean', tmp_path / 'clean_out')
  assert clean_only.returncode == 0 and not (tmp_path / 'clean_out' / 'asr_vs_rounds.png').exists()
