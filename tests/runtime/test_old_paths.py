"""The execution machinery moved from `tff_robust.simulation` to `tff_robust.runtime`, and the flag parser to
`tff_robust.command_line` (issue 34); the old paths the README and docs/api.md named keep working for now: each old
module is the moved module itself, and `python -m tff_robust.simulation.worker_service` still serves."""

import importlib
import os
import signal
import subprocess
import sys
import time

import portpicker
import pytest

from tff_robust.runtime import execution_context

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MOVED = {
    'execution_context': 'tff_robust.runtime.execution_context',
    'composing_context': 'tff_robust.runtime.composing_context',
    'gpu_placement': 'tff_robust.runtime.gpu_placement',
    'worker_binaries': 'tff_robust.runtime.worker_binaries',
    'worker_service': 'tff_robust.runtime.worker_service',
    'finite_flags': 'tff_robust.command_line.finite_flags',
}


_OLD_IS_MOVED = '''
import importlib, sys
name, moved = sys.argv[1:]
old = importlib.import_module(f'tff_robust.simulation.{name}')
assert old is importlib.import_module(moved), (old, moved)
assert getattr(importlib.import_module('tff_robust.simulation'), name) is old
'''


@pytest.mark.parametrize('name', sorted(_MOVED))
def test_the_old_path_is_the_moved_module(name):
  # In a fresh interpreter: worker_service defines absl flags (--gpus, ...) that the runner's flags module, which
  # other tests import into this process, defines too.
  subprocess.run([sys.executable, '-c', _OLD_IS_MOVED, name, _MOVED[name]], check=True, cwd=_REPO,
                 env={**os.environ, 'PYTHONPATH': _REPO}, timeout=300)


def test_a_patch_through_the_old_path_is_seen_by_the_moved_module(monkeypatch):
  from tff_robust.simulation import gpu_placement as old  # pylint: disable=g-import-not-at-top
  from tff_robust.runtime import gpu_placement as new  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(old, 'cpu_cores', lambda: 7)
  assert new.client_concurrency(None) == 7  # one concurrent call per CPU core the module reports


def test_the_documented_old_entry_point_is_the_running_context():
  from tff_robust.simulation.execution_context import set_local_execution_context  # pylint: disable=g-import-not-at-top
  assert set_local_execution_context is execution_context.set_local_execution_context
  # One module, so one worker per process: the old path returns the session's running worker, starting none.
  assert set_local_execution_context() is execution_context.set_local_execution_context()


def test_python_m_the_old_worker_service_path_serves(tmp_path):
  record = tmp_path / 'started'
  stand_in = tmp_path / 'worker'
  stand_in.write_text(f'#!/bin/sh\necho "$$ $*" > {record}.tmp && mv {record}.tmp {record}\nexec sleep 60\n')
  stand_in.chmod(0o755)
  port = portpicker.pick_unused_port()
  service = subprocess.Popen(
      [sys.executable, '-m', 'tff_robust.simulation.worker_service', f'--port={port}', f'--worker_binary={stand_in}',
       '--max_concurrent_computation_calls=3'],
      cwd=_REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
  )
  try:
    deadline = time.monotonic() + 60
    while not record.exists():
      assert service.poll() is None, service.stderr.read()
      assert time.monotonic() < deadline, 'the old worker_service path started nothing in 60 s'
      time.sleep(0.05)
  finally:
    service.send_signal(signal.SIGTERM)
    service.wait(timeout=30)
  pid, *arguments = record.read_text().split()
  assert int(pid) == service.pid and arguments == [f'--port={port}', '--max_concurrent_computation_calls=3']


def test_python_m_the_old_worker_service_path_refuses_a_bad_flag_in_one_line():
  result = subprocess.run([sys.executable, '-m', 'tff_robust.simulation.worker_service', '--port=0'], cwd=_REPO,
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr[-3000:]
  assert result.stderr.startswith('error: ') and '--port' in result.stderr
