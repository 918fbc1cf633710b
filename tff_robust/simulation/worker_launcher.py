"""Starts TFF's C++ `worker_binary` so that it dies with the process that launched it.

Usage (internal, by `execution_context`): `python -m tff_robust.simulation.worker_launcher PARENT_PID
BINARY [ARGS...]`. The launcher asks Linux to SIGKILL it when its parent dies (`PR_SET_DEATHSIG`), then
replaces itself with the worker binary (the death signal survives `execve`). So even a parent killed with
SIGKILL, which runs no `atexit` handler, leaves no worker holding the terminal's or CI's pipes open.
"""

import ctypes
import os
import signal
import sys

_PR_SET_DEATHSIG = 1


def main(argv: list[str]) -> None:
  if len(argv) < 3:
    raise SystemExit('usage: worker_launcher PARENT_PID BINARY [ARGS...]')
  parent_pid = int(argv[1])
  binary_and_args = argv[2:]
  if sys.platform.startswith('linux'):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), 'prctl(PR_SET_DEATHSIG) failed')
  # The parent may have died before prctl took effect: then nobody would ever stop the worker.
  if os.getppid() != parent_pid:
    raise SystemExit(0)
  os.execv(binary_and_args[0], binary_and_args)


if __name__ == '__main__':
  main(sys.argv)
