"""The tests' fork server gives what `subprocess.run` of a fresh interpreter gives, and nothing of a run outlives it.

The reference is always the same command run by `subprocess.run` in a fresh interpreter.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests import fork_server
from tests.experiments import train_runs

_PROBE = textwrap.dedent('''\
    import os, sys, tempfile
    print('argv', sys.argv[1:], 'cwd', os.getcwd(), 'path0', sys.path[0], 'name', __name__)
    print('FORK_SERVER_PROBE', os.environ.get('FORK_SERVER_PROBE'), 'tmp', tempfile.gettempdir())
    print('stdin', repr(sys.stdin.read()))
    sys.stdout.write('carriage\\r\\nreturns\\rhere\\n')
    print('to stderr', file=sys.stderr)
    ending = sys.argv[1]
    if ending == 'raise':
      raise ValueError('an uncaught error')
    if ending == 'message':
      sys.exit('exits with a message')
    if ending.isdigit():
      sys.exit(int(ending))
    ''')


@pytest.fixture(scope='module')
def server():
  """A fork server of this module's own: `fork_server.run` would restart the session's for each other environment."""
  started = fork_server.ForkServer(os.environ)
  yield started
  started.stop()


@pytest.fixture
def probe_dir(tmp_path):
  (tmp_path / 'fork_server_probe.py').write_text(_PROBE)
  return tmp_path


def _fresh(module, args, cwd, env):
  return subprocess.run([sys.executable, '-m', module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                        stdin=subprocess.DEVNULL, timeout=120)


def _alive(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as stat:
      return stat.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


@pytest.mark.parametrize('ending', ['0', '3', 'raise', 'message', 'return'])
def test_returncode_stdout_and_stderr_are_those_of_a_fresh_interpreter(server, probe_dir, ending):
  env = dict(os.environ, FORK_SERVER_PROBE='set', TMPDIR=str(probe_dir))
  forked = server.run('fork_server_probe', [ending], cwd=probe_dir, env=env, timeout=120)
  fresh = _fresh('fork_server_probe', [ending], probe_dir, env)
  assert forked.returncode == fresh.returncode
  assert forked.stdout == fresh.stdout
  if ending == 'raise':  # the tracebacks' frames differ (runpy's entry points); the error line does not
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == 'ValueError: an uncaught error'
  else:
    assert forked.stderr == fresh.stderr
  assert forked.args == fresh.args


def test_each_request_gets_its_own_environment_and_working_directory(server, probe_dir, tmp_path_factory):
  other_dir = tmp_path_factory.mktemp('other')
  (other_dir / 'fork_server_probe.py').write_text(_PROBE)
  requests = ((probe_dir, {'FORK_SERVER_PROBE': 'first'}), (other_dir, {'FORK_SERVER_PROBE': 'second'}),
              (probe_dir, {}))
  for directory, extra in requests:
    env = {**{k: v for k, v in os.environ.items() if k != 'FORK_SERVER_PROBE'}, **extra, 'TMPDIR': str(directory)}
    run = server.run('fork_server_probe', ['0'], cwd=directory, env=env, timeout=120)
    assert f"cwd {directory} path0 {directory} name __main__" in run.stdout
    assert f"FORK_SERVER_PROBE {extra.get('FORK_SERVER_PROBE')} tmp {directory}\n" in run.stdout


def test_a_request_in_another_environment_restarts_the_session_server_with_it(tmp_path):
  """Variables read at import (TF_CPP_MIN_LOG_LEVEL, CUDA_VISIBLE_DEVICES, ...) must reach the imports too."""
  (tmp_path / 'parent.py').write_text("import os\nprint(os.getppid(), os.environ['TF_CPP_MIN_LOG_LEVEL'])\n")
  servers = []
  for level in ('1', '1', '0'):
    run = fork_server.run('parent', [], cwd=tmp_path, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL=level), timeout=600)
    server_pid, seen_level = run.stdout.split()
    assert seen_level == level
    servers.append(server_pid)
  assert servers[0] == servers[1] != servers[2]


def test_a_timeout_kills_the_run_and_its_children_and_returns_its_output_so_far(server, tmp_path):
  (tmp_path / 'sleeper.py').write_text(textwrap.dedent('''\
      import subprocess, sys, time
      import os, subprocess, sys, time
      child = subprocess.Popen(['sleep', '600'])
      print(os.getpid(), child.pid, flush=True)
      time.sleep(600)
      '''))
  with pytest.raises(subprocess.TimeoutExpired) as raised:
    server.run('sleeper', [], cwd=tmp_path, env=os.environ, timeout=5)
  assert raised.value.timeout == 5 and raised.value.cmd == [sys.executable, '-m', 'sleeper']
  assert not any(_alive(int(pid)) for pid in raised.value.stdout.split())
  (tmp_path / 'quick.py').write_text("print('served')\n")  # the server serves on after a timeout
  assert server.run('quick', [], cwd=tmp_path, env=os.environ, timeout=60).stdout == 'served\n'


def test_a_process_left_behind_by_a_run_fails_the_request_and_is_killed(server, tmp_path):
  (tmp_path / 'leaker.py').write_text("import subprocess\nsubprocess.Popen(['sleep', '600'])\n")
  with pytest.raises(fork_server.LeakedProcessesError) as raised:
    server.run('leaker', [], cwd=tmp_path, env=os.environ, timeout=60)
  (leaked,) = re.findall(r'(\d+) \(sleep\)', str(raised.value))
  assert not _alive(int(leaked))


def _absl_messages(stderr: str) -> list[str]:
  """The messages of absl's log lines (`W1124 08:32:00.833653 PID file.py:62] message`), not TensorFlow's."""
  return [line.split('] ', 1)[1] for line in stderr.splitlines() if re.match(r'[IWE]\d{4} ', line)]


@pytest.mark.slow
def test_a_forked_training_run_writes_and_prints_what_a_fresh_one_does(tmp_path):
  # The second forked run starts with the first's AutoGraph conversions made by the server (autograph_warmup).
  flags = ('--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=2', '--rounds_per_eval=1')
  fresh = train_runs.train(tmp_path / 'fresh', *flags, fresh_interpreter=True)
  assert fresh.returncode == 0, fresh.stderr[-3000:]
  fresh_summary, fresh_rows = train_runs.outputs(tmp_path / 'fresh')
  del fresh_summary['seconds_per_round']
  for name in ('forked', 'forked_again'):
    forked = train_runs.train(tmp_path / name, *flags)
    assert forked.returncode == 0, forked.stderr[-3000:]
    assert forked.stdout.replace(str(tmp_path / name), str(tmp_path / 'fresh')) == fresh.stdout
    assert _absl_messages(forked.stderr) == _absl_messages(fresh.stderr)
    for forked_array, fresh_array in zip(train_runs.model_weights(tmp_path / name),
                                         train_runs.model_weights(tmp_path / 'fresh'), strict=True):
      assert (forked_array == fresh_array).all()
    forked_summary, forked_rows = train_runs.outputs(tmp_path / name)
    assert forked_rows == fresh_rows
    del forked_summary['seconds_per_round']
    assert forked_summary == fresh_summary


_CONVERTS = textwrap.dedent('''\
    import json
    import tensorflow as tf
    from tests import autograph_warmup
    from tff_robust.aggregators import structure_math
    cached = [code.co_qualname for code, _ in autograph_warmup.conversions()]
    tf.function(lambda x: structure_math.global_l2_norm([x]))(tf.constant([3.0, 4.0]))
    print(json.dumps(cached))
    ''')


def test_a_run_starts_with_the_autograph_conversions_of_the_runs_before_it_and_the_server_stays_single_threaded(
    server, tmp_path):
  (tmp_path / 'converts.py').write_text(_CONVERTS)
  threads = lambda: len(os.listdir(f'/proc/{server._process.pid}/task'))  # pylint: disable=protected-access
  before = threads()
  first, second = (server.run('converts', [], cwd=tmp_path, env=os.environ, timeout=120) for _ in range(2))
  assert first.returncode == second.returncode == 0, (first.stderr[-3000:], second.stderr[-3000:])
  assert 'global_l2_norm' not in json.loads(first.stdout) and 'global_l2_norm' in json.loads(second.stdout)
  assert threads() == before  # converting ran no TensorFlow runtime: forking stays as safe as before
