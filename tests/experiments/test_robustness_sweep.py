"""A tiny robustness sweep end to end: its CSV, markdown table and figure."""

import csv
import json
import shutil

import pytest

from tests import fork_server


@pytest.fixture(scope='module')
def tiny_sweep(tmp_path_factory):
  """(the finished process, its root directory) of a sweep of FedAvg and RFA, clean and under 25% data and
  omniscient corruption, seeds 0 and 1, 2 rounds: twelve runs in one process."""
  root = tmp_path_factory.mktemp('tiny_sweep')
  result = fork_server.python_m(
      'experiments.robustness_sweep',
      ['--algorithms=fedavg,rfa',
       '--corruptions=data,omniscient', '--data_fractions=0,0.25', '--update_fractions=0,0.25', '--seeds=0,1',
       '--total_rounds=2', '--client_epochs_per_round=1', f'--root_output_dir={root}', '--experiment_name=s'],
      timeout=900,
  )
  return result, root


@pytest.mark.slow
def test_tiny_sweep_writes_csv_table_and_figure(tiny_sweep):
  result, tmp_path = tiny_sweep
  assert result.returncode == 0, result.stderr[-3000:]
  rows = _results(tmp_path)
  # per algorithm and seed: rho = 0 once, data 0.25, omniscient 0.25
  assert len(rows) == 2 * 2 * 3
  assert {float(r['calls_per_round']) for r in rows if r['algorithm'] == 'rfa'} == {3.0}
  assert all(float(r['corruption_weight_share']) >= 0.25 for r in rows if float(r['fraction']) == 0.25)
  table = (tmp_path / 's' / 'results.md').read_text()
  assert '## omniscient corruption' in table and '| rfa | 3 |' in table
  assert (tmp_path / 's' / 'accuracy_vs_corruption.png').stat().st_size > 10_000


def test_unknown_algorithm_is_a_usage_error(tmp_path):
  result = fork_server.python_m(
      'experiments.robustness_sweep',
      ['--algorithms=fedavg,krum',
       f'--root_output_dir={tmp_path}'],
      timeout=300,
  )
  assert result.returncode != 0 and "--algorithms: unknown ['krum']" in result.stderr


def test_label_concentration_for_a_task_without_label_mixtures_is_a_usage_error(tmp_path):
  result = fork_server.python_m(
      'experiments.robustness_sweep',
      ['--task=synthetic_regression',
       '--label_concentration=100', f'--root_output_dir={tmp_path}'],
      timeout=300,
  )
  assert result.returncode != 0
  assert "--label_concentration applies to the tasks digits, not 'synthetic_regression'" in result.stderr
  assert not (tmp_path / 'robustness_sweep').exists()  # refused before the sweep started


def _results(tmp_path, name='s') -> list[dict]:
  """The rows of sweep `name`'s results.csv."""
  with open(tmp_path / name / 'results.csv') as f:
    return list(csv.DictReader(f))


def _sweep(tmp_path, *flags):
  return fork_server.python_m(
      'experiments.robustness_sweep',
      ['--algorithms=fedavg', '--corruptions=omniscient',
       '--update_fractions=0', '--client_epochs_per_round=1', f'--root_output_dir={tmp_path}',
       '--experiment_name=s', *flags],
      timeout=900,
  )


@pytest.fixture(scope='module')
def one_run_sweep(tmp_path_factory):
  """The root directory of a finished sweep of one run (FedAvg, clean, seed 0, 1 round); tests copy it."""
  root = tmp_path_factory.mktemp('one_run_sweep')
  first = _sweep(root, '--seeds=0', '--total_rounds=1')
  assert first.returncode == 0, first.stderr[-3000:]
  return root


@pytest.mark.slow
def test_a_grown_sweep_runs_only_its_new_runs_and_other_settings_are_refused(one_run_sweep, tmp_path):
  shutil.copytree(one_run_sweep, tmp_path, dirs_exist_ok=True)
  seed0 = _results(tmp_path)
  grown = _sweep(tmp_path, '--seeds=0,1', '--total_rounds=1')
  assert grown.returncode == 0, grown.stderr[-3000:]
  assert 'resuming: 1 of 2 runs already in results.csv' in grown.stdout
  rows = _results(tmp_path)
  assert [r['seed'] for r in rows] == ['0', '1'] and rows[0] == seed0[0]
  changed = _sweep(tmp_path, '--seeds=0,1', '--total_rounds=2')
  assert changed.returncode != 0
  assert '--total_rounds was 1, now 2' in changed.stderr and 'give a new --experiment_name' in changed.stderr


@pytest.mark.slow
def test_a_runs_result_does_not_depend_on_the_runs_before_it(tiny_sweep, tmp_path):
  # In the tiny sweep, RFA's clean run of seed 0 comes after FedAvg's six runs, clean and corrupted.
  swept, sweep_root = tiny_sweep
  assert swept.returncode == 0, swept.stderr[-3000:]
  alone = _sweep(tmp_path, '--algorithms=rfa', '--seeds=0', '--total_rounds=2', '--experiment_name=alone')
  assert alone.returncode == 0, alone.stderr[-3000:]
  [rfa_after_others] = [r for r in _results(sweep_root)
                        if (r['algorithm'], r['corruption'], r['seed']) == ('rfa', 'none', '0')]
  [rfa_alone] = _results(tmp_path, 'alone')
  assert (rfa_alone['accuracy'], rfa_alone['loss']) == (rfa_after_others['accuracy'], rfa_after_others['loss'])


@pytest.mark.slow
def test_label_flipping_runs_at_the_update_fractions(tmp_path):
  result = _sweep(tmp_path, '--corruptions=label_flipping', '--update_fractions=0,0.3', '--seeds=0',
                  '--total_rounds=1')
  assert result.returncode == 0, result.stderr[-3000:]
  rows = _results(tmp_path)
  assert [(r['corruption'], r['fraction']) for r in rows] == [('none', '0.0'), ('label_flipping', '0.3')]
  assert float(rows[1]['corruption_weight_share']) >= 0.3
  assert '## label_flipping corruption' in (tmp_path / 's' / 'results.md').read_text()


@pytest.mark.slow
def test_a_sweep_recorded_before_the_server_and_validation_flags_resumes_at_their_defaults(one_run_sweep, tmp_path):
  shutil.copytree(one_run_sweep, tmp_path, dirs_exist_ok=True)
  path = tmp_path / 's' / 'run_settings.json'
  recorded = json.loads(path.read_text())
  added = ('server_learning_rate', 'centered_clipping_radius', 'centered_clipping_iterations',
           'norm_filter_multiplier', 'validation_fraction', 'rounds_after_attack')
  assert {name: recorded[name] for name in added} == dict(
      server_learning_rate=1.0, centered_clipping_radius=1.0, centered_clipping_iterations=3,
      norm_filter_multiplier=2.0, validation_fraction=None, rounds_after_attack=0,
  )
  path.write_text(json.dumps({name: value for name, value in recorded.items() if name not in added}))
  resumed = _sweep(tmp_path, '--seeds=0', '--total_rounds=1')
  assert resumed.returncode == 0 and 'resuming: 1 of 1 runs' in resumed.stdout, resumed.stderr[-3000:]
  path.write_text(json.dumps({name: value for name, value in recorded.items() if name not in added}))
  validation = _sweep(tmp_path, '--seeds=0', '--total_rounds=1', '--validation_fraction=0.2')
  assert validation.returncode != 0 and '--validation_fraction was absent, now 0.2' in validation.stderr
  # A sweep recorded before every run started from one drawn initial model is not resumed: its runs' initial
  # models depended on the runs before them.
  path.write_text(json.dumps({name: value for name, value in recorded.items() if name != 'initial_model'}))
  before_drawn_model = _sweep(tmp_path, '--seeds=0', '--total_rounds=1')
  assert before_drawn_model.returncode != 0
  assert '--initial_model was absent, now "one for every run, drawn from seed 0"' in before_drawn_model.stderr


@pytest.mark.slow
def test_a_zero_server_learning_rate_leaves_every_algorithm_at_the_initial_model(tmp_path):
  """The sweep's --server_learning_rate reaches the process: at 0 FedAvg and centered clipping (whatever its
  radius) both evaluate the same initial model, on the validation parts with --validation_fraction."""
  accuracies = {}
  for name, flags in (('fedavg', ()), ('centered_clipping', ('--centered_clipping_radius=0.01',))):
    result = fork_server.python_m(
        'experiments.robustness_sweep',
        [f'--algorithms={name}', '--corruptions=omniscient',
         '--update_fractions=0', '--seeds=0', '--total_rounds=1', '--client_epochs_per_round=1',
         '--server_learning_rate=0', '--validation_fraction=0.2', f'--root_output_dir={tmp_path}',
         f'--experiment_name={name}', *flags],
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    accuracies[name] = float(_results(tmp_path, name)[0]['accuracy'])
  assert accuracies['fedavg'] == accuracies['centered_clipping']


@pytest.mark.slow
def test_defence_chains_run_beside_the_algorithms_with_f_from_rho(tmp_path):
  result = _sweep(tmp_path, "--defences=arc>mean; nnm>krum(select=0)", '--update_fractions=0,0.2', '--seeds=0',
                  '--total_rounds=1')
  assert result.returncode == 0, result.stderr[-3000:]
  rows = _results(tmp_path)
  assert [(r['algorithm'], r['fraction']) for r in rows] == [
      ('fedavg', '0.0'), ('fedavg', '0.2'), ('arc>mean', '0.0'), ('arc>mean', '0.2'),
      ('nnm>krum(select=0)', '0.0'), ('nnm>krum(select=0)', '0.2')]
  # f = ceil(0.2 * 10) = 2 at rho = 0.2: ARC's two quantile passes and the mean; at rho = 0, f = 0 and ARC is
  # the identity (the mean alone).
  calls = {(r['algorithm'], r['fraction']): float(r['calls_per_round']) for r in rows}
  assert calls[('arc>mean', '0.0')] == 1.0 and calls[('arc>mean', '0.2')] == 3.0
  assert (tmp_path / 's' / 'runs' / 'nnm_krum_select=0_omniscient_0.2_seed0').is_dir()
  assert '| arc>mean |' in (tmp_path / 's' / 'results.md').read_text()


@pytest.mark.parametrize('defences,message', [
    ('arc>foo', "--defences: defence 'arc>foo': unknown component 'foo'"),
    ('centered_clipping', "--defences: ['centered_clipping'] would be labelled like the algorithms"),
])
def test_a_bad_defence_is_a_usage_error(tmp_path, defences, message):
  result = _sweep(tmp_path, f'--defences={defences}')
  assert result.returncode != 0 and message in result.stderr
  assert not (tmp_path / 's').exists()  # refused before the sweep started


@pytest.mark.slow
def test_attack_specs_and_grids_key_the_runs_name_the_tables_and_resume(tmp_path):
  """ALIE's grid and a parametrised attack: each canonical spec is a run's corruption (results.csv key), a table,
  and a run directory; a grown list resumes, and a spec spelt differently is the same run."""
  first = _sweep(tmp_path, '--algorithms=coordinate_median', '--corruptions=alie_grid,norm_aware(direction=ipm,c=1.40)',
                 '--update_fractions=0,0.3', '--seeds=0', '--total_rounds=1')
  assert first.returncode == 0, first.stderr[-3000:]
  kinds = [r['corruption'] for r in _results(tmp_path)]
  assert kinds == ['none', 'alie', 'alie(z=1)', 'alie(z=2)', 'norm_aware(direction=ipm,c=1.4)']
  table = (tmp_path / 's' / 'results.md').read_text()
  assert '## alie(z=2) corruption' in table and '## norm_aware(direction=ipm,c=1.4) corruption' in table
  assert (tmp_path / 's' / 'runs' / 'coordinate_median_norm_aware-direction=ipm-c=1.4_0.3_seed0').is_dir()
  grown = _sweep(tmp_path, '--algorithms=coordinate_median',
                 '--corruptions=alie,alie(z=1.0),alie(z=2),norm_aware(c=1.4,direction=ipm),mimic',
                 '--update_fractions=0,0.3', '--seeds=0', '--total_rounds=1')
  assert grown.returncode == 0, grown.stderr[-3000:]
  assert 'resuming: 5 of 6 runs already in results.csv' in grown.stdout


@pytest.mark.parametrize('corruptions, message', [
    ('omniscient,alie(q=1)', "--corruptions: attack 'alie'"),
    ('omniscient,poison', "--corruptions: unknown attack 'poison'"),
])
def test_a_bad_attack_spec_is_a_usage_error(tmp_path, corruptions, message):
  result = fork_server.python_m(
      'experiments.robustness_sweep',
      ['--algorithms=fedavg,rfa', f'--corruptions={corruptions}',
       f'--root_output_dir={tmp_path}'],
      timeout=300,
  )
  assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
  assert not (tmp_path / 'robustness_sweep').exists()


def _metrics(run_dir) -> dict:
  """round -> the eval/accuracy and eval/attack_success_rate of a run's metrics.csv ('' where not evaluated)."""
  with open(run_dir / 'metrics.csv') as f:
    return {int(r['round']): (r['eval/accuracy'], r.get('eval/attack_success_rate', '')) for r in csv.DictReader(f)}


@pytest.mark.slow
def test_targeted_attacks_give_the_asr_at_the_attacks_end_and_after_it_and_a_backdoor_table(tmp_path):
  """Attackers in round 1 of 2 (--rounds_after_attack=1): every run is evaluated at rounds 1 and 2; a row holds the
  round-1 evaluation as *_at_attack_end and the final ASR; the clean run has no ASR. Constrain-and-scale runs (its
  boost and its attackers' objective reach the process). The same command resumes."""
  flags = ('--corruptions=backdoor(size=4),constrain_and_scale(size=4.0)', '--update_fractions=0,0.1', '--seeds=0',
           '--total_rounds=2', '--rounds_after_attack=1')
  result = _sweep(tmp_path, *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = _results(tmp_path)
  assert [(r['corruption'], r['fraction']) for r in rows] == [
      ('none', '0.0'), ('backdoor(size=4)', '0.1'), ('constrain_and_scale(size=4)', '0.1')]
  runs = tmp_path / 's' / 'runs'
  for row, run in zip(rows, ('fedavg_none_0_seed0', 'fedavg_backdoor-size=4_0.1_seed0',
                             'fedavg_constrain_and_scale-size=4_0.1_seed0')):
    evaluations = _metrics(runs / run)
    assert (row['rounds_after_attack'], row['attack_end_round']) == ('1', '1')
    assert float(row['accuracy_at_attack_end']) == float(evaluations[1][0])
    assert float(row['accuracy']) == float(evaluations[2][0])
    if row['corruption'] == 'none':
      assert row['attack_success_rate'] == row['attack_success_rate_at_attack_end'] == ''
    else:
      assert float(row['attack_success_rate_at_attack_end']) == float(evaluations[1][1])
      assert float(row['attack_success_rate']) == float(evaluations[2][1])
      assert 0 <= float(row['attack_success_rate']) <= 1
  table = (tmp_path / 's' / 'backdoor.md').read_text()
  assert '## rho = 0.1' in table and 'ASR 1 round after the attackers stop' in table and '| fedavg | 1 |' in table
  assert (tmp_path / 's' / 'backdoor_asr.png').stat().st_size > 10_000
  assert json.loads((tmp_path / 's' / 'run_settings.json').read_text())['rounds_after_attack'] == 1
  resumed = _sweep(tmp_path, *flags)
  assert resumed.returncode == 0 and 'resuming: 3 of 3 runs' in resumed.stdout, resumed.stderr[-3000:]


def test_a_durability_window_that_does_not_fit_in_the_rounds_is_a_usage_error(tmp_path):
  """The sweep's refusal (`targeted_runs.check`, whose other refusals its tests name) reaches the command line."""
  result = _sweep(tmp_path, '--corruptions=backdoor', '--total_rounds=2', '--rounds_after_attack=2')
  assert result.returncode != 0, result.stderr[-2000:]
  message = '--rounds_after_attack=2 does not fit in --total_rounds=2: the attackers need at least one round'
  assert message in result.stderr
  assert not (tmp_path / 's').exists()  # refused before the sweep started
