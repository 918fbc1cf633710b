"""Every Python and shell block of README.md and docs/ runs in a test or is marked, with a reason, as not run.

Python blocks run with pytest-markdown-docs in a child pytest (`tests/markdown_blocks.py` marks them by the comment
before each block): the unmarked ones here in the default set, the `<!-- slow: ... -->` ones in the slow set, which
also checks that they print no `ERROR` line (the secure-aggregation guide's promise). A shell block's commands are
parsed with their binaries' flags and run shrunk by `tests/test_readme_examples.py` and the tests it names; the
set-up, pytest and mkdocs commands are what CI runs. A shell block with any other command must be marked.
"""

import os
import re
import subprocess
import sys

import pytest

from tests import markdown_blocks
from tests import repository
from tests import test_readme_examples

# Commands of the documents that CI (.ci/run) runs as written.
_RUN_BY_CI = ('bash scripts/setup.sh', 'SKIP_MAIN_JOB=1 bash scripts/setup.sh', '.venv/bin/mkdocs build --strict')
_SHELL_SYNTAX = re.compile(r'^(?:for \w+ in [^;]+|do|done|)$')


def _unchecked_statements(code: str) -> list[str]:
  """The statements of a shell block that no test runs: neither a `.venv/bin/python -m` command of a module in
  `test_readme_examples._RUN_BY` nor a command CI runs."""
  unchecked = []
  for line in test_readme_examples._code_blocks(f'```\n{code}```\n')[0]:  # pylint: disable=protected-access
    code_part = '' if line.lstrip().startswith('#') else line.split(' #', 1)[0]
    for statement in re.split(r';|&&', code_part):
      statement = statement.strip()
      statement = statement[3:].strip() if statement.startswith('do ') else statement
      words = statement.split()
      if _SHELL_SYNTAX.match(statement) or statement in _RUN_BY_CI:
        continue
      run_by = test_readme_examples._RUN_BY  # pylint: disable=protected-access
      if words[:2] == ['.venv/bin/python', '-m'] and len(words) > 2 and words[2] in run_by:
        continue
      unchecked.append(statement)
  return unchecked


def _all_blocks():
  return [block for path in markdown_blocks.DOCUMENTS for block in markdown_blocks.blocks(path)]


def test_the_documents_have_python_and_shell_blocks():
  languages = {block.language for block in _all_blocks()}
  assert {'python', 'bash'} <= languages


def test_every_block_is_run_or_marked_not_run_with_a_reason():
  problems = []
  for block in _all_blocks():
    where = f'{block.path.relative_to(repository.ROOT)}:{block.line}'
    if block.language in markdown_blocks.PYTHON or block.marker == 'not run':
      continue  # Python blocks all run (the child pytest), unless marked
    if block.language in markdown_blocks.SHELL:
      if block.marker == 'slow':
        problems.append(f'{where}: shell blocks run through their binaries\' tests; `slow` marks Python blocks only')
      unchecked = _unchecked_statements(block.code)
      if unchecked:
        problems.append(f'{where}: no test runs {unchecked}; mark the block <!-- not run: reason -->')
    elif block.language and block.marker is None and block.language not in ('text', 'ini', 'yaml'):
      problems.append(f'{where}: a {block.language!r} block: run it in a test or mark it <!-- not run: reason -->')
  assert problems == []


def test_a_block_neither_run_nor_marked_is_caught():
  assert _unchecked_statements('ssh -N -L 8000:localhost:8000 host &\n.venv/bin/python -m experiments.train\n') == [
      'ssh -N -L 8000:localhost:8000 host &']
  assert _unchecked_statements('for a in x y; do .venv/bin/python -m experiments.train --a=$a; done\n') == []


def _run_python_blocks(selection: str) -> subprocess.CompletedProcess:
  """pytest-markdown-docs over README.md and docs/ in a child pytest, in one process (-n 0), `-s` so that what a
  block prints reaches this test."""
  return subprocess.run(
      [sys.executable, '-m', 'pytest', '--markdown-docs', '-p', 'tests.markdown_blocks', 'README.md', 'docs',
       '-n', '0', '-p', 'no:cacheprovider', '-m', selection, '-s', '-rs'],
      cwd=repository.ROOT, capture_output=True, text=True, timeout=900,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '1'},
  )


def test_the_python_blocks_of_the_default_set_run():
  result = _run_python_blocks('not slow')
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
  assert ' passed' in result.stdout


@pytest.mark.slow
def test_the_slow_python_blocks_run_and_print_no_error_line():
  result = _run_python_blocks('slow')
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
  assert re.search(r'\b3 passed', result.stdout), result.stdout[-2000:]
  errors = [line for line in (result.stdout + result.stderr).splitlines() if 'ERROR' in line]
  assert errors == []
