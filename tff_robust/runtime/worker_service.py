r"""Serves TFF's C++ executor service (`worker_binary`) on a port, in the foreground, for remote runs.

    python -m tff_robust.runtime.worker_service --port=8000 [--gpus=auto|none|0,1] \
        [--max_concurrent_computation_calls=N] [--worker_binary=PATH]

then, on the machine that drives training:

    python -m experiments.train --tff_worker_address=HOST:8000 ...

The process replaces itself with the worker binary (same pid, so stopping this process stops the worker):
`--worker_binary`, else $TFF_ROBUST_WORKER_BINARY, else the one shipped in the TFF wheel, which is built without
CUDA, so that with it client computations run on this host's CPU cores (`gpu_placement`; `--gpus=auto` says so
in one line, `--gpus=0` is refused). A worker built from TFF's source with CUDA is how a GPU serves.

Security: the binary listens on every network interface (TFF 0.87 cannot bind it to one address) and serves
unauthenticated, unencrypted gRPC; whoever reaches the port can run any TensorFlow graph (file reads and writes
included) as this user. The service says so in one line when it starts. Run it only where no one else can reach
the port: a private network, or a firewall rule admitting only the driving machine, or behind an SSH tunnel
(`ssh -N -L 8000:localhost:8000 compute-host` on the driver, then `--tff_worker_address=localhost:8000`), as
the guide "Where clients run" (docs/guides/where_clients_run.md) shows.

A bad flag is refused with one line on stderr naming it, exit status 2 (as `experiments.train` does). Nothing
here imports TensorFlow unless `--gpus` must count the GPUs of a worker that can use them.
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging

from tff_robust.command_line import finite_flags
from tff_robust.runtime import gpu_placement
from tff_robust.runtime import worker_binaries

_PORT = flags.DEFINE_integer('port', 8000, 'Port to serve on, in [1, 65535].', lower_bound=1, upper_bound=65535)
_GPUS = flags.DEFINE_string(
    'gpus', gpu_placement.AUTO,
    "GPUs the worker may use: 'auto', 'none' or '0,1' (TFF's PyPI worker has no CUDA: CPU only).",
)
_MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', None,
    'Parallel calls of one computation (e.g. client training) at most; unset: one per CPU core this service may '
    'use, as the runner\'s local worker; non-positive: no limit (TFF\'s default).',
)
_WORKER_BINARY = flags.DEFINE_string(
    'worker_binary', None,
    f'The executor binary to serve, e.g. TFF\'s worker built with CUDA; unset: '
    f'${worker_binaries.ENVIRONMENT_VARIABLE}, else the TFF wheel\'s worker_binary (no CUDA).',
)

_EXPOSURE_WARNING = (
    'WARNING: this TFF worker is unauthenticated and reachable on every network interface (port {port}): '
    'anyone who can connect can run code as this user; firewall the port or reach it through an SSH tunnel.'
)


def main(argv: list[str]) -> None:
  """The `worker_service` binary: parses its flags (one-line refusals, exit status 2), chooses the worker binary and
  GPUs, then serves TFF's executor service on `--port` until stopped."""
  app.define_help_flags()  # --help, --helpfull: print the help and exit
  positional = finite_flags.parse_flags(argv)  # a bad value (NaN, inf included) ends here in one line, status 2
  if len(positional) > 1:
    finite_flags.refuse(f'unexpected positional arguments: {" ".join(positional[1:])}')
  logging.use_absl_handler()
  try:
    binary = worker_binaries.resolve(_WORKER_BINARY.value, name='--worker_binary')
    visible_gpus = gpu_placement.visible_gpus_setting(_GPUS.value, binary)
  except ValueError as error:
    finite_flags.refuse(error)
  if visible_gpus is not None:
    os.environ['CUDA_VISIBLE_DEVICES'] = visible_gpus
  print(f'TFF worker serving on port {_PORT.value} (pid {os.getpid()}): {binary}', file=sys.stderr, flush=True)
  print(_EXPOSURE_WARNING.format(port=_PORT.value), file=sys.stderr, flush=True)
  concurrency = gpu_placement.client_concurrency(_MAX_CONCURRENT_COMPUTATION_CALLS.value)
  os.execv(binary, [binary, f'--port={_PORT.value}', f'--max_concurrent_computation_calls={concurrency}'])


if __name__ == '__main__':
  main(sys.argv)
