r"""Serves TFF's C++ executor service (`worker_binary`) on a port, in the foreground, for remote runs.

  python -m tff_robust.simulation.worker_service --port=8000 [--gpus=auto|none|0,1] \
      [--max_concurrent_computation_calls=N]

then, on the machine that drives training:

  python -m experiments.train --tff_worker_address=HOST:8000 ...

The process replaces itself with the binary shipped in the TFF wheel (same pid, so stopping this process
stops the worker). Security: the binary listens on every network interface (TFF 0.87 cannot bind it to one
address) and serves unauthenticated, unencrypted gRPC; whoever reaches the port can run any TensorFlow graph
(file reads and writes included) as this user. The service says so in one line when it starts. Run it only
where no one else can reach the port: a private network, or a firewall rule admitting only the driving
machine, or behind an SSH tunnel (`ssh -N -L 8000:localhost:8000 compute-host` on the driver, then
`--tff_worker_address=localhost:8000`), as the README's "Remote workers and GPUs" shows.
"""

import os
import sys

from absl import app
from absl import flags

from tff_robust.simulation import execution_context
from tff_robust.simulation import finite_flags
from tff_robust.simulation import gpu_placement

_PORT = flags.DEFINE_integer('port', 8000, 'Port to serve on, in [1, 65535].', lower_bound=1, upper_bound=65535)
_GPUS = flags.DEFINE_string('gpus', gpu_placement.AUTO, "GPUs the worker may use: 'auto', 'none' or '0,1'.")
_MAX_CONCURRENT_COMPUTATION_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', -1,
    'Parallel calls of one computation (e.g. client training) at most; non-positive: no limit.',
)

_EXPOSURE_WARNING = (
    'WARNING: this TFF worker is unauthenticated and reachable on every network interface (port {port}): '
    'anyone who can connect can run code as this user; firewall the port or reach it through an SSH tunnel.'
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  try:
    visible_gpus = gpu_placement.visible_gpus_setting(_GPUS.value)
  except ValueError as error:
    raise app.UsageError(str(error)) from None
  if visible_gpus is not None:
    os.environ['CUDA_VISIBLE_DEVICES'] = visible_gpus
  binary = execution_context.worker_binary_path()
  print(f'TFF worker serving on port {_PORT.value} (pid {os.getpid()})', file=sys.stderr, flush=True)
  print(_EXPOSURE_WARNING.format(port=_PORT.value), file=sys.stderr, flush=True)
  os.execv(binary, [binary, f'--port={_PORT.value}',
                    f'--max_concurrent_computation_calls={_MAX_CONCURRENT_COMPUTATION_CALLS.value}'])


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
