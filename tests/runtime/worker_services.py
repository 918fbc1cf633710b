"""`python -m tff_robust.runtime.worker_service` in a process of its own, as a user starts it, for the tests."""

import os
import shutil
import signal
import subprocess
import sys
import time

import portpicker
import pytest

from tests import repository

SERVICE_COMMAND = (sys.executable, '-m', 'tff_robust.runtime.worker_service')
SERVING = 'TFF worker serving on '  # the service's first line once it serves


class Service:
  """A started service: its process, its port and the file its stderr goes to."""

  def __init__(self, log_path, *flags, port=None):
    self.port = port or portpicker.pick_unused_port()
    self.log_path = log_path
    with open(log_path, 'w') as log:
      self.process = subprocess.Popen(
          [*SERVICE_COMMAND, f'--port={self.port}', '--gpus=none', *flags], cwd=repository.ROOT,
          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
      )

  def log(self) -> str:
    with open(self.log_path) as log:
      return log.read()

  def wait_until_serving(self, timeout=120.0) -> 'Service':
    """Returns once the service said where it serves; fails if it ended or said nothing in `timeout` s."""
    deadline = time.monotonic() + timeout
    while SERVING not in self.log():
      assert self.process.poll() is None, self.log()[-3000:]
      assert time.monotonic() < deadline, f'worker_service said nothing in {timeout} s'
      time.sleep(0.05)
    return self

  def worker_pid(self) -> int:
    """The worker binary's pid: the service's only child (the launcher became the binary), or the service itself
    with --network_isolation=off (it became the binary)."""
    with open(f'/proc/{self.process.pid}/task/{self.process.pid}/children') as children:
      workers = children.read().split()
    return int(workers[0]) if workers else self.process.pid

  def lines(self, fragment: str) -> list[str]:
    return [line for line in self.log().splitlines() if fragment in line]

  def new_lines(self, fragment: str, already: int, timeout=10.0) -> list[str]:
    """The lines holding `fragment` after the first `already`, once there is one (the log may lag a client)."""
    deadline = time.monotonic() + timeout
    while len(self.lines(fragment)) <= already and time.monotonic() < deadline:
      time.sleep(0.05)
    return self.lines(fragment)[already:]

  def stop(self) -> int:
    """SIGTERM, as a user's `kill` does; returns the exit status."""
    self.process.send_signal(signal.SIGTERM)
    return self.process.wait(timeout=30)


def run(*flags, env=None) -> subprocess.CompletedProcess:
  """The finished run of a service command that ends by itself (a refusal)."""
  return subprocess.run([*SERVICE_COMMAND, '--gpus=none', *flags], cwd=repository.ROOT, capture_output=True, text=True,
                        timeout=120, stdin=subprocess.DEVNULL, env=env)


def private_network_refusal() -> str:
  """'' where this process may create a private network namespace (as `worker_service` does), else the kernel's
  refusal: the service then refuses to start, so tests of a serving service skip."""
  result = subprocess.run(
      [sys.executable, '-c', 'from tff_robust.runtime import worker_launcher; worker_launcher.enter_private_network()'],
      cwd=repository.ROOT, capture_output=True, text=True, timeout=60)
  return '' if result.returncode == 0 else result.stderr.strip().splitlines()[-1]


def make_certificates(directory, *names) -> str:
  """`scripts/make_test_certificates.sh directory names...`: a CA, worker/ and driver/ (see the script); returns
  `directory`. Skips the calling test where `openssl` is missing."""
  if shutil.which('openssl') is None:
    pytest.skip('openssl is not installed: scripts/make_test_certificates.sh needs it')
  subprocess.run(['bash', repository.ROOT / 'scripts' / 'make_test_certificates.sh', str(directory), *names],
                 check=True, capture_output=True, timeout=60)
  return str(directory)


def tls_flags(certificates: str) -> tuple[str, str, str]:
  """The service's --tls_* flags for the worker/ files of `make_certificates`."""
  worker = os.path.join(certificates, 'worker')
  return (f'--tls_cert={worker}/server.pem', f'--tls_key={worker}/server.key',
          f'--tls_client_ca={worker}/client_ca.pem')
