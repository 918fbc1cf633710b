"""No binary of the package accepts a NaN or infinite float flag: one line naming the flag, exit status 2.

absl's float bounds compare with `<` and `>`, which NaN passes. `finite_flags.parse_flags` parses every binary's
command line and refuses NaN in every float flag, and +-inf in every one that does not `allow_infinity`.
Checked here: the rule itself on a private `FlagValues`; that every binary (every module of `experiments`,
`benchmarks` and `tff_robust` with a `__main__` block that uses absl) parses with it; and, in a process of each
binary's own, every one of its float flags at NaN, inf and -inf.
"""

import ast
import json
import math
import os

from absl import flags
import pytest

from tests import fork_server
from tests import repository
from tff_robust.command_line import finite_flags

# The binaries issue 34 names; `_binaries` must find at least these.
_KNOWN_BINARIES = (
    'experiments.train', 'experiments.robustness_sweep', 'experiments.superquantile_tables',
    'experiments.fedplus_tables', 'experiments.mtfeel_sweep', 'experiments.paper_report', 'benchmarks.scaling',
    'benchmarks.rfa_cost', 'benchmarks.delta_fl_cost', 'tff_robust.runtime.worker_service',
)


def _main_block(tree: ast.Module):
  """The body of `if __name__ == '__main__':`, or None."""
  for node in tree.body:
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name) and node.test.left.id == '__name__'):
      return node.body
  return None


def _binaries() -> dict:
  """{module: its syntax tree} of every module that runs as a binary with absl flags."""
  found = {}
  for package in ('experiments', 'benchmarks', 'tff_robust'):
    for path in (repository.ROOT / package).rglob('*.py'):
      tree = ast.parse(path.read_text())
      uses_absl = any(isinstance(node, ast.ImportFrom) and node.module == 'absl' for node in tree.body)
      if _main_block(tree) is not None and uses_absl:
        found['.'.join(path.relative_to(repository.ROOT).with_suffix('').parts)] = tree
  return found


def _is_parse_flags(node: ast.AST) -> bool:
  return (isinstance(node, ast.Attribute) and node.attr == 'parse_flags' and isinstance(node.value, ast.Name)
          and node.value.id == 'finite_flags')


def _calls_parse_flags(tree: ast.Module) -> bool:
  """Whether the binary's command line goes through `finite_flags.parse_flags`: as `app.run`'s `flags_parser`,
  or called directly (`experiments.train`, which parses before importing TensorFlow)."""
  return any(
      isinstance(node, ast.Call) and (_is_parse_flags(node.func) or any(
          keyword.arg == 'flags_parser' and _is_parse_flags(keyword.value) for keyword in node.keywords))
      for node in ast.walk(tree)
  )


def test_the_scan_finds_every_binary_the_issue_names():
  assert set(_KNOWN_BINARIES) <= set(_binaries())


@pytest.mark.parametrize('binary', sorted(_binaries()))
def test_every_binary_parses_its_command_line_with_the_finite_check(binary):
  tree = _binaries()[binary]
  assert _calls_parse_flags(tree), f'{binary} does not parse with finite_flags.parse_flags'
  app_runs = [node for statement in _main_block(tree) for node in ast.walk(statement) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr == 'run']
  # `app.run(main)` alone would parse with absl's own parser
  assert all(any(_is_parse_flags(k.value) for k in call.keywords if k.arg == 'flags_parser') for call in app_runs)


def _probe(binary: str) -> dict:
  """{'--flag=value': [exit status, stderr]} of `tests.finite_flag_probe` in a process of the binary's own."""
  result = fork_server.python_m('tests.finite_flag_probe', [binary])
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize('binary', sorted(_binaries()))
def test_every_float_flag_of_every_binary_refuses_nan_and_infinity_in_one_line(binary):
  results = _probe(binary)
  if binary == 'experiments.train':  # the runner's 30-odd float flags
    assert {'--client_learning_rate=nan', '--server_learning_rate=inf', '--snr_db=-inf'} <= set(results)
  for argument, (status, stderr) in results.items():
    lines = stderr.splitlines()
    assert status == finite_flags.REFUSED and len(lines) == 1, (argument, status, stderr)
    assert lines[0].startswith('error: ') and argument.split('=')[0] in lines[0], (argument, lines)


def test_the_sweeps_float_lists_are_among_the_checked_flags():
  results = _probe('experiments.mtfeel_sweep')
  assert {'--snr_db_values=nan', '--flip_probabilities=inf', '--pen_scale=nan'} <= set(results)


def test_a_sweep_refuses_a_nan_learning_rate_before_it_starts(tmp_path):
  """The issue's case: `robustness_sweep --client_learning_rate=nan` started its sweep."""
  result = fork_server.python_m('experiments.robustness_sweep',
                                ['--client_learning_rate=nan', f'--root_output_dir={tmp_path}', '--total_rounds=1'])
  assert result.returncode == finite_flags.REFUSED, result.stderr[-3000:]
  assert result.stderr.splitlines() == ['error: --client_learning_rate=nan: must be a number, not NaN']
  assert not os.listdir(tmp_path)


@pytest.fixture
def flag_values():
  """A private registry with a float, a multi float, a float list and a float flag that allows infinity."""
  values = flags.FlagValues()
  flags.DEFINE_float('rate', 0.1, 'A rate.', lower_bound=0.0, flag_values=values)
  flags.DEFINE_float('unset_rate', None, 'A rate or unset.', flag_values=values)
  flags.DEFINE_multi_float('rates', [0.1], 'Rates.', flag_values=values)
  finite_flags.define_float_list('levels', [0.5, 0.1], 'Levels.', flag_values=values)
  finite_flags.allow_infinity(
      flags.DEFINE_float('test_finite_flags_bound', math.inf, 'A bound, inf: none.', flag_values=values)
  )
  flags.DEFINE_string('name', 'x', 'Not a float flag.', flag_values=values)
  return values


def _error(flag_values, *arguments) -> str:
  try:
    finite_flags.parse_checked(['binary', *arguments], flag_values)
  except flags.Error as error:
    return str(error)
  return ''


def test_the_float_flags_are_found_by_their_parser(flag_values):
  assert [flag.name for flag in finite_flags.float_flags(flag_values)] == [
      'levels', 'rate', 'rates', 'test_finite_flags_bound', 'unset_rate'
  ]


@pytest.mark.parametrize('arguments, message', [
    (('--rate=nan',), '--rate=nan: must be a number, not NaN'),  # lower_bound=0.0 alone lets NaN through
    (('--rate=inf',), '--rate=inf: must be finite'),
    (('--unset_rate=-inf',), '--unset_rate=-inf: must be finite'),
    (('--rates=1', '--rates=nan'), '--rates=1.0,nan: must be a number, not NaN'),
    (('--levels=0.5,inf',), '--levels=0.5,inf: must be finite'),
    (('--levels=0.5,x',), 'could not convert string to float'),
    (('--test_finite_flags_bound=nan',), '--test_finite_flags_bound=nan: must be a number, not NaN'),
])
def test_nan_anywhere_and_infinity_where_not_allowed_are_refused_naming_the_flag(flag_values, arguments, message):
  assert message in _error(flag_values, *arguments)


@pytest.mark.parametrize('arguments', [
    (), ('--rate=1e30', '--unset_rate=-2.5', '--levels=', '--name=nan'), ('--test_finite_flags_bound=-inf',),
])
def test_finite_values_unset_flags_and_allowed_infinities_pass(flag_values, arguments):
  assert _error(flag_values, *arguments) == ''
  assert flag_values['levels'].value == ([] if '--levels=' in arguments else [0.5, 0.1])


def test_a_refusal_is_one_line_and_exit_status_2(capsys):
  with pytest.raises(SystemExit) as exit_:
    finite_flags.refuse('flag --rate=nan:\n  must be a number')
  assert exit_.value.code == finite_flags.REFUSED == 2
  assert capsys.readouterr().err == 'error: flag --rate=nan: must be a number\n'
