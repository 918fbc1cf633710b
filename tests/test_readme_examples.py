"""Every command in the code blocks of README.md and docs/ names a binary that exists and flags that binary accepts.

Each `.venv/bin/python -m <module> <flags>` line (shell `for` loops take their first value, `HOST` is
`localhost`) is parsed by the module's own absl flags, validators included, in one fresh interpreter per
module: a renamed flag, a value out of range or a flagfile that moved fails here. Which test runs each binary
end to end is `_RUN_BY`; the README's training commands themselves run in `tests/experiments/test_train.py`,
`test_train_defaults.py` and `test_configs.py`.
"""

import collections
import json
import re
import shlex
import subprocess
import sys

import pytest

from tests import fork_server
from tests import repository

_PYTHON = '.venv/bin/python'
_LOOP = re.compile(r'for (\w+) in ([^;]+);')

# Every module the README runs, and a test that runs it end to end (the benchmarks shrunk to one round).
_RUN_BY = {
    'pytest': None,
    'experiments.train': 'tests/experiments/test_train_defaults.py',
    'experiments.robustness_sweep': 'tests/experiments/test_robustness_sweep.py',
    'experiments.superquantile_tables': 'tests/experiments/test_superquantile_tables.py',
    'experiments.fedplus_tables': 'tests/experiments/test_fedplus_tables.py',
    'experiments.mtfeel_sweep': 'tests/experiments/test_mtfeel_sweep.py',
    'experiments.paper_report': 'tests/experiments/test_convergence_curves.py',
    'experiments.backdoor_report': 'tests/experiments/test_backdoor_report.py',
    'tff_robust.runtime.worker_service': 'tests/experiments/test_remote_workers.py',
    'benchmarks.scaling': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.rfa_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.delta_fl_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.fedplus_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.mtfeel_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.isolation_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.relay_overhead': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.parallel_workers': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.evaluation_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.final_evaluation_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.defence_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.attack_cost': 'tests/benchmarks/test_readme_benchmarks.py',
    'benchmarks.shakespeare_round_cost': 'tests/benchmarks/test_readme_benchmarks.py',
}


def _code_blocks(text: str) -> list[list[str]]:
  """The lines of each fenced code block, backslash continuations joined."""
  blocks, inside, pending = [], False, ''
  for line in text.splitlines():
    if line.strip().startswith('```'):
      inside = not inside
      if inside:
        blocks.append([])
      continue
    if not inside:
      continue
    if line.rstrip().endswith('\\'):
      pending += line.rstrip()[:-1] + ' '
      continue
    blocks[-1].append(pending + line)
    pending = ''
  return blocks


def _commands(text: str) -> list[tuple[str, list[str]]]:
  """(module, flags) of every `.venv/bin/python -m` command, `for` variables bound to their first value."""
  commands = []
  for block in _code_blocks(text):
    bindings = {}
    for line in block:
      line = line.split(' #', 1)[0]
      bindings.update((name, values.split()[0]) for name, values in _LOOP.findall(line))
      for name in sorted(bindings, key=len, reverse=True):
        line = line.replace(f'${{{name}}}', bindings[name]).replace(f'${name}', bindings[name])
      for statement in re.split(r';|&&', line):
        if _PYTHON not in statement:  # e.g. prose in a text block, which shlex could not split
          continue
        words = shlex.split(statement.replace('HOST:', 'localhost:'), comments=True)
        words = words[1:] if words[:1] == ['do'] else words
        if words[:2] == [_PYTHON, '-m']:
          commands.append((words[2], words[3:]))
  return commands


def test_the_command_reader_binds_loops_and_joins_continuations():
  text = ('```bash\nfor a in fedavg rfa; do for s in 0 1; do .venv/bin/python -m experiments.train --algorithm=$a \\\n'
          '    --experiment_name=${a}_$s; done; done\n.venv/bin/python -m benchmarks.scaling   # comment\n```\n'
          '.venv/bin/python -m not.in.a.block $a\n```\n.venv/bin/python -m x.y --n=$a\n```\n')
  assert _commands(text) == [('experiments.train', ['--algorithm=fedavg', '--experiment_name=fedavg_0']),
                             ('benchmarks.scaling', []), ('x.y', ['--n=$a'])]


DOCUMENTS = [repository.ROOT / 'README.md', *sorted((repository.ROOT / 'docs').rglob('*.md'))]


def readme_commands() -> list[tuple[str, list[str]]]:
  """The commands of README.md and every page of docs/."""
  return [command for document in DOCUMENTS for command in _commands(document.read_text())]


def test_every_binary_the_readme_runs_is_known_and_its_end_to_end_test_exists():
  modules = {module for module, _ in readme_commands()}
  assert modules == set(_RUN_BY)
  assert [test for test in _RUN_BY.values() if test and not (repository.ROOT / test).exists()] == []


def _flags_by_module() -> dict:
  by_module = collections.defaultdict(list)
  for module, argv in readme_commands():
    if module != 'pytest':
      by_module[module].append(argv)
  return dict(by_module)


def _parse_errors(module: str, argvs: list[list[str]]) -> list[str]:
  """The flag errors of each argv parsed by `module`'s absl flags, in a process of its own (`readme_flag_parse`)."""
  result = fork_server.python_m('tests.readme_flag_parse', [module, json.dumps(argvs)], timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('module', sorted(set(_RUN_BY) - {'pytest'}))
def test_every_readme_command_of_a_binary_parses_with_its_flags(module):
  assert _parse_errors(module, _flags_by_module()[module]) == []


def test_a_stale_flag_is_caught():
  errors = _parse_errors('experiments.train', [['--no_such_flag=1'], ['--task=nope']])
  assert len(errors) == 2 and 'no_such_flag' in errors[0] and 'nope' in errors[1]


def test_the_readme_help_command_prints_the_flags():
  """absl's help flags exit with status 1 after printing (`absl.flags._helpers`), before TensorFlow loads."""
  result = subprocess.run([sys.executable, '-m', 'experiments.train', '--helpfull'], cwd=repository.ROOT,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 1 and '--task' in result.stdout and '--corruption' in result.stdout
