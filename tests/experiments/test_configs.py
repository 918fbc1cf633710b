"""The papers' flagfiles (experiments/configs/<paper>/<experiment>.cfg): valid runner flags, one per published
experiment, and each runs 2 rounds in-process on offline data (TFF synthetic EMNIST/Shakespeare, a tiny
Sentiment140 prepared by TFDS's builder, the offline tasks as they are).
"""

import glob
import os
import re

import pytest

from tests import repository
from tests.experiments import train_runs
# The tiny Sentiment140 data_dir fixture (module-scoped) of the Sent140 task tests, reused here.
from tests.tasks import sent140_files

CONFIG_DIR = os.path.join(repository.ROOT, 'experiments', 'configs')
CONFIGS = sorted(os.path.relpath(p, CONFIG_DIR) for p in glob.glob(os.path.join(CONFIG_DIR, '*', '*.cfg')))

# The published experiments: paper -> figure/table ids (RFA Fig. 2-6, Delta-FL Tables 2-3, Fed+ Table 2 /
# Fig. 4, MtFEEL Fig. 4). A flagfile named '<id>[_<id digits>...]_<rest>.cfg' covers them, e.g. table2_3_x: table2, table3.
REQUIRED_EXPERIMENTS = {
    'rfa': {'fig2', 'fig3', 'fig4', 'fig5', 'fig6'},
    'superquantile_fl': {'table2', 'table3'},
    'fedplus': {'table2', 'fig4'},
    'mtfeel': {'fig4'},
}
# Tasks whose full-scale data comes from the network: their smoke runs use TFF synthetic data or a tiny Sentiment140.
_SYNTHETIC_DATA_TASKS = ('emnist_', 'shakespeare_')
_SENT140_TASKS = ('sent140_',)
_EVERY_DEVICE_ALGORITHMS = ('mtfeel', 'signsgd')
_SMALL_COHORT = 3


def experiments_covered(config_name: str) -> set[str]:
  """'table2_3_emnist_linear.cfg' -> {'table2', 'table3'}; 'fig4a_rayleigh_snr.cfg' -> {'fig4'}."""
  match = re.match(r'(fig|table)(\d+)[a-z]?((?:_\d+)*)_', os.path.basename(config_name))
  if not match:
    return set()
  kind, first, more = match.groups()
  return {f'{kind}{n}' for n in [first, *more.split('_')[1:]]}


def _flag_lines(config: str) -> list[str]:
  with open(os.path.join(CONFIG_DIR, config)) as f:
    lines = [line.strip() for line in f]
  return [line for line in lines if line and not line.startswith(('#', '//'))]


@pytest.fixture(scope='module')
def sent140_data_dir(tmp_path_factory):
  return sent140_files.prepare_data_dir(tmp_path_factory.mktemp('sentiment140_csv'), tmp_path_factory.mktemp('tfds'))


@pytest.fixture
def flag_values():
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import train_flags  # pylint: disable=g-import-not-at-top,unused-import  (defines the flags)
  flags.FLAGS.unparse_flags()
  yield flags.FLAGS
  flags.FLAGS.unparse_flags()


def test_every_published_experiment_has_a_flagfile():
  assert CONFIGS, f'no flagfiles under {CONFIG_DIR}'
  for paper, required in REQUIRED_EXPERIMENTS.items():
    covered = set().union(*(experiments_covered(c) for c in CONFIGS if c.startswith(paper + os.sep)))
    assert required <= covered, f'{paper}: no flagfile for {sorted(required - covered)}'
  assert {c.split(os.sep)[0] for c in CONFIGS} == set(REQUIRED_EXPERIMENTS)
  assert all(experiments_covered(c) for c in CONFIGS), 'every flagfile is named after its figure or table'


def test_every_flagfile_holds_valid_runner_flags_and_a_comment_header(flag_values):
  from experiments import train_flags  # pylint: disable=g-import-not-at-top
  runner_flags = {flag.name for flag in train_flags.runner_flags(flag_values)}
  for config in CONFIGS:
    with open(os.path.join(CONFIG_DIR, config)) as f:
      text = f.read()
    assert text.startswith('# Reproduces: '), config
    for heading in ('# This file: ', '# Other points: ', '# Data: ', '# Settings: ', '# Deviations / unknowns: '):
      assert heading in text, f'{config} lacks {heading!r}'
    lines = _flag_lines(config)
    names = [line.removeprefix('--').split('=')[0] for line in lines]
    assert all(line.startswith('--') for line in lines), config
    assert set(names) <= runner_flags, f'{config}: not runner flags: {sorted(set(names) - runner_flags)}'
    assert len(names) == len(set(names)), f'{config} sets a flag twice'
    assert {'algorithm', 'task', 'total_rounds', 'clients_per_round', 'seed'} <= set(names), config
    assert 'root_output_dir' not in names and 'experiment_name' not in names, config
    flag_values.unparse_flags()
    flag_values(['train', f'--flagfile={os.path.join(CONFIG_DIR, config)}'])  # types, bounds, cross-flag checks (TF-free)
    assert all(flag_values[name].present for name in names), config


def _smoke_overrides(config: str, tmp_path) -> list[str]:
  """2 rounds, 1 local epoch (2 with stragglers, so they train fewer), on offline data, with a cohort the small data
  holds (the sign-vote algorithms train every device every round, so they keep theirs)."""
  values = dict(line.removeprefix('--').split('=', 1) for line in _flag_lines(config))
  epochs = 2 if float(values.get('straggler_fraction', 0)) > 0 else 1
  overrides = ['--total_rounds=2', '--rounds_per_eval=2', f'--client_epochs_per_round={epochs}', '--noprogress_bar',
               f'--root_output_dir={tmp_path}', '--experiment_name=run']
  if values['task'].startswith(_SYNTHETIC_DATA_TASKS):
    overrides.append('--use_synthetic_data')
  if values['algorithm'] not in _EVERY_DEVICE_ALGORITHMS:
    overrides.append(f'--clients_per_round={min(_SMALL_COHORT, int(values["clients_per_round"]))}')
  return overrides


def _smoke_settings(config: str) -> tuple:
  """The flags of `config`'s smoke run (its file's flags, then the overrides): equal settings, equal runs."""
  values = dict(line.removeprefix('--').split('=', 1) for line in _flag_lines(config))
  values.update(o.removeprefix('--').partition('=')[::2] for o in _smoke_overrides(config, 'TMP'))
  return tuple(sorted(values.items()))


def _first_config_with_the_same_smoke_run(config: str) -> str:
  return next(c for c in CONFIGS if _smoke_settings(c) == _smoke_settings(config))


@pytest.mark.slow
@pytest.mark.parametrize('config', CONFIGS)
def test_flagfile_runs_two_rounds_offline(config, tmp_path, monkeypatch, request):
  from tff_robust.tasks import sent140  # pylint: disable=g-import-not-at-top

  values = dict(line.removeprefix('--').split('=', 1) for line in _flag_lines(config))
  twin = _first_config_with_the_same_smoke_run(config)
  if twin != config:  # e.g. a Fig. 4 curve and the Fig. 2 point differ only in --rounds_per_eval
    pytest.skip(f'same 2-round run as {twin} after the smoke overrides')
  if values['task'].startswith(_SENT140_TASKS):
    monkeypatch.setenv('TFDS_DATA_DIR', request.getfixturevalue('sent140_data_dir'))  # built once per module
    monkeypatch.delenv(sent140.GLOVE_PATH_ENV, raising=False)
  result = train_runs.train_here(tmp_path, f'--flagfile={os.path.join(CONFIG_DIR, config)}',
                                 *_smoke_overrides(config, tmp_path))  # on the session's TFF worker
  assert result.returncode == 0, result.stderr
  summary, _ = train_runs.outputs(tmp_path)
  assert summary['rounds'] == 2
  assert summary['algorithm'] == values['algorithm'] and summary['task'] == values['task']
  assert summary['seed'] == int(values['seed'])
  assert summary['corruption'] == values.get('corruption', 'none')
  for option in ('split_seed', 'num_devices', 'l2_regularization', 'straggler_fraction'):  # reached the run
    if float(values.get(option, 0)):
      assert summary[option] == float(values[option]), option
