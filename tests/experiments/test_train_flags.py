"""Refusals of `python -m experiments.train`: one line on stderr naming the flag, exit status 2, no traceback and
no help; the flags (NaN and +-inf in float flags included) are checked before TensorFlow is imported. Also: the
choices the runner's flag modules spell out are the library's."""

import os
import subprocess
import sys

import pytest

from tests import repository

# Runs the runner as `python -m experiments.train ARGS` does, then reports whether TensorFlow got imported.
_PROBE = '\n'.join((
    'import runpy, sys',
    'try:',
    "  runpy.run_module('experiments.train', run_name='__main__', alter_sys=True)",
    'finally:',
    "  print('tensorflow imported:', 'tensorflow' in sys.modules)",
))


def user_environment(**extra) -> dict:
  """The environment of a user's shell: without the test session's TF_CPP_MIN_LOG_LEVEL (tests/conftest.py)."""
  environment = {name: value for name, value in os.environ.items() if name != 'TF_CPP_MIN_LOG_LEVEL'}
  return {**environment, **extra}


def _run(tmp_path, *flags, environment=None):
  return subprocess.run(
      [sys.executable, '-c', _PROBE, '--noprogress_bar', f'--root_output_dir={tmp_path}', '--experiment_name=run',
       *flags],
      cwd=repository.ROOT, capture_output=True, text=True, timeout=600, env=environment or user_environment(),
  )


def _assert_one_line_refusal(result, *names):
  lines = result.stderr.splitlines()
  assert result.returncode == 2, result.stderr[-3000:]
  assert len(lines) == 1 and lines[0].startswith('error: '), result.stderr[-3000:]
  assert all(name in lines[0] for name in names), lines[0]


@pytest.mark.parametrize('flags, names', [
    (('--total_roundz=3',), ('total_roundz', 'total_rounds')),  # a typo: absl suggests the flag
    (('--total_rounds=0',), ('--total_rounds',)),
    (('--algorithm=fedavgg',), ('--algorithm',)),
    (('--algorithm=fedavg', '--minibatch_fraction=0.1'), ('--minibatch_fraction', '--algorithm=fedavg')),
    (('--task=digits_cohorts', '--label_concentration=100'), ('--label_concentration', 'digits_cohorts')),
    (('--gpus=first',), ('--gpus',)),
    (('--corruption=poison',), ('--corruption', "unknown attack 'poison'")),
    (('--corruption=backdoor(target=12)',), ('--corruption=backdoor(target=12)', 'target must be a class in [0, 9]')),
    # absl's lower_bound=0.0 lets NaN through and bounds inf from one side only (issue 34: both trained, exit 0)
    (('--client_learning_rate=nan', '--total_rounds=1'), ('--client_learning_rate=nan', 'not NaN')),
    (('--server_learning_rate=inf', '--total_rounds=1'), ('--server_learning_rate=inf', 'must be finite')),
    (('--task=synthetic_regression', '--corruption=label_flipping'),
     ('--corruption=label_flipping', 'tasks with class labels', '--task=synthetic_regression')),
    (('unexpected',), ('positional', 'unexpected')),
    (('--algorithm=fedavg', '--defence=arc>foo'), ('--defence', "unknown component 'foo'", 'rules: mean')),
    (('--algorithm=fedavg', '--defence=bucketing>krum'), ('--defence', 'krum cannot follow bucketing')),
    (('--algorithm=rfa', '--defence=arc>gm'), ('--defence', '--algorithm=fedavg')),
    (('--corruption=alie(q=1)',), ('--corruption', "attack 'alie'", 'parameters: z')),
    (('--corruption=min_max(direction=up)',), ('--corruption', 'direction must be one of unit_vec, std, sign')),
    (('--corruption=alie(z=1)', '--alie_z=2'), ('--alie_z applies to --corruption=alie', 'not --corruption=alie(z=1)')),
])
def test_a_bad_flag_is_refused_in_one_line_before_tensorflow_is_imported(tmp_path, flags, names):
  result = _run(tmp_path, *flags)
  _assert_one_line_refusal(result, *names)
  assert result.stdout.splitlines() == ['tensorflow imported: False']
  assert not (tmp_path / 'run').exists()


def test_an_unwritable_output_directory_is_refused_before_tensorflow_is_imported(tmp_path):
  a_file = tmp_path / 'a_file'
  a_file.write_text('')
  result = _run(tmp_path, f'--root_output_dir={a_file}/runs')
  _assert_one_line_refusal(result, f'--root_output_dir={a_file}/runs', 'Not a directory')
  assert result.stdout.splitlines() == ['tensorflow imported: False']


@pytest.mark.parametrize('flags, names', [
    (('--clients_per_round=31',), ('--clients_per_round', '[1, 30]', "'digits'")),
    (('--task=digits_cohorts', '--algorithm=mtfeel', '--clients_per_round=10'),
     ('--clients_per_round', 'number of clients', '30')),
    (('--algorithm=bulyan', '--clients_per_round=5'), ('--algorithm=bulyan', 'clients_per_round=5')),
    (('--algorithm=fedavg', '--defence=arc>gm', '--num_byzantine=5', '--clients_per_round=10'),
     ('--defence=arc>gm', 'num_byzantine', 'num_clients / 2')),
])
def test_a_setting_the_task_or_the_algorithm_cannot_run_is_refused_in_one_line(tmp_path, flags, names):
  result = _run(tmp_path, *flags)
  _assert_one_line_refusal(result, *names)  # no help dump, no TFF 'Popen' error at exit
  assert not (tmp_path / 'run').exists()


def test_missing_offline_data_is_one_sentence(tmp_path):
  offline = user_environment(HTTP_PROXY='http://127.0.0.1:9', HTTPS_PROXY='http://127.0.0.1:9')  # no download
  result = _run(tmp_path, '--task=emnist_linear_rfa', f'--data_cache_dir={tmp_path / "empty_cache"}',
                environment=offline)
  _assert_one_line_refusal(result, '--task=emnist_linear_rfa', 'Could not load EMNIST', 'emnist_all.sqlite')


def test_the_choices_spelt_out_for_the_flags_are_the_library_constants():
  from experiments import algorithm_flags  # pylint: disable=g-import-not-at-top
  from experiments import corruption_flags  # pylint: disable=g-import-not-at-top
  from tff_robust.aggregators import channels  # pylint: disable=g-import-not-at-top
  from tff_robust.aggregators import delta_median  # pylint: disable=g-import-not-at-top
  from tff_robust.processes import dde  # pylint: disable=g-import-not-at-top
  from tff_robust.processes import delta_fl  # pylint: disable=g-import-not-at-top
  from tff_robust.processes import fedplus  # pylint: disable=g-import-not-at-top
  from tff_robust.processes import mtfeel  # pylint: disable=g-import-not-at-top
  from tff_robust.aggregators import update_corruption  # pylint: disable=g-import-not-at-top
  from tff_robust.simulation import corruption  # pylint: disable=g-import-not-at-top
  assert algorithm_flags.QUANTILE_METHODS == delta_fl.QUANTILE_METHODS
  assert algorithm_flags.DEFAULT_QUANTILE_PASSES == delta_fl.DEFAULT_QUANTILE_PASSES
  assert algorithm_flags.DEFAULT_FEDPLUS_DELTA == fedplus.DEFAULT_DELTA
  assert algorithm_flags.FEDPLUS_SOLVERS == delta_median.SOLVERS
  assert algorithm_flags.FEDPLUS_INIT_CLIENT_FROM_VALUES == fedplus.INIT_CLIENT_FROM
  assert algorithm_flags.DEFAULT_FEDPLUS_MAX_ITERATIONS == delta_median.DEFAULT_MAX_ITERATIONS
  assert algorithm_flags.CHANNEL_NAMES == channels.CHANNEL_NAMES
  assert algorithm_flags.OUTAGE_ACTIONS == channels.OUTAGE_ACTIONS
  assert algorithm_flags.MTFEEL_UPDATE_ORDERS == mtfeel.UPDATE_ORDERS
  assert algorithm_flags.DDE_OUTPUTS == dde.OUTPUTS
  assert corruption_flags.DATA_CORRUPTIONS == corruption.DATA_CORRUPTIONS
  assert corruption_flags.DEFAULT_IPM_EPSILON == update_corruption.DEFAULT_IPM_EPSILON


def test_the_flag_defaults_are_the_algorithm_config_defaults():
  import dataclasses  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import train_flags  # pylint: disable=g-import-not-at-top,unused-import  (defines the flags)
  from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top
  for field in dataclasses.fields(algorithms.AlgorithmConfig):
    default = flags.FLAGS[field.name].default
    assert default == field.default or (field.name == 'num_selected' and default == 0), field.name
