"""The runner's defaults run: the runner guide's examples (docs/guides/runner.md) as written (up to the number of rounds), and the sign-vote
algorithms without --clients_per_round (every device of the task, each trains every round)."""

import os
import re

import pytest

from tests import repository
from tests import test_readme_examples
from tests.experiments import train_runs

_README_RUNNER_COMMAND = '.venv/bin/python -m experiments.train '


def _readme_examples() -> list[list[str]]:
  """The flags of every `experiments.train` command in the runner guide's first block that trains a model."""
  with open(os.path.join(repository.ROOT, 'docs', 'guides', 'runner.md')) as f:
    block = f.read().split('```bash\n', 1)[1].split('```', 1)[0]
  lines = [line.split('#')[0].strip() for line in block.splitlines() if line.startswith(_README_RUNNER_COMMAND)]
  return [line.removeprefix(_README_RUNNER_COMMAND).split() for line in lines if '--help' not in line]


def test_the_readme_examples_are_the_two_this_file_runs():
  assert _readme_examples() == [['--task=digits', '--algorithm=rfa'],
                                ['--task=emnist_cnn', '--algorithm=rfa_one_step', '--use_synthetic_data']]


@pytest.mark.slow
def test_the_readme_emnist_example_runs_as_written_but_for_its_rounds(tmp_path):
  """The full 100 rounds take ~100 s here; `test_train.py` runs the digits example at its default 100 rounds. TFF's
  baseline EMNIST task runs offline on its synthetic data (`test_train.py` runs its Shakespeare task so)."""
  result = train_runs.train(tmp_path, *_readme_examples()[1], '--total_rounds=2')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['clients_per_round'] == 1  # TFF's synthetic EMNIST: 1 training client, 1 test device
  assert len(rows) == 2 and 0.0 <= summary['eval/accuracy'] <= 1.0 and summary['eval/loss'] > 0
  assert summary['secure_average_calls'] == 2  # one-step RFA: one secure average a round
  assert 0.0 <= summary['train/error_p90'] <= 1.0  # per-device evaluation of the training devices


@pytest.mark.parametrize('algorithm, flags', [('signsgd', ()), ('mtfeel', ('--dde_steps=1',))])
def test_sign_vote_algorithms_default_to_every_device_of_the_task(tmp_path, algorithm, flags):
  result = train_runs.train_here(tmp_path, '--task=digits_cohorts', f'--algorithm={algorithm}', '--total_rounds=1',
                                 '--client_batch_size=20', *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['clients_per_round'] == 30
  assert float(rows[0]['aggregator/channel/bits']) == 30 * 650 * (30 if algorithm == 'mtfeel' else 1)
  assert re.search(r'"clients_per_round": null', (tmp_path / 'run' / 'run_settings.json').read_text())


def _readme_runner_commands() -> list[list[str]]:
  """The flags of the README's `experiments.train` commands (its "Run an experiment" block)."""
  with open(os.path.join(repository.ROOT, 'README.md')) as f:
    commands = test_readme_examples._commands(f.read())  # pylint: disable=protected-access
  return [argv for module, argv in commands if module == 'experiments.train']


def test_the_readme_has_a_runner_command_and_a_flagfile_command():
  commands = _readme_runner_commands()
  assert len(commands) == 2 and not commands[0][0].startswith('--flagfile') and commands[1][0].startswith('--flagfile')


@pytest.mark.slow
@pytest.mark.parametrize('index', [0, 1], ids=['runner', 'flagfile'])
def test_the_readme_runner_commands_run_shrunk_to_two_rounds(tmp_path, index):
  result = train_runs.train(tmp_path, *_readme_runner_commands()[index], '--total_rounds=2', '--rounds_per_eval=2')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path, name=_experiment_name(_readme_runner_commands()[index]))
  assert summary['rounds'] == 2 and len(rows) == 2


def _experiment_name(argv: list[str]) -> str:
  """The run directory's name: the command's own `--experiment_name`, else train_runs' default."""
  names = [flag.split('=', 1)[1] for flag in argv if flag.startswith('--experiment_name=')]
  return names[-1] if names else 'run'
