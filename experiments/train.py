r"""Trains a federated model with one of tff_robust's algorithms on a simulation task.

Example (works offline):
  python -m experiments.train --task=digits --algorithm=rfa
  python -m experiments.train --task=digits_cohorts --algorithm=mtfeel --channel=rayleigh --snr_db=10

Writes <root_output_dir>/<experiment_name>/{run_settings.json, metrics.csv, tensorboard/, summary.json,
model_weights.npz} (MtFEEL, which has no global model: alpha.npy and discrepancies.npy instead of
model_weights.npz). A directory holds one run: the same command resumes it from its newest checkpoint
(--rounds_per_checkpoint), a command with other settings is refused (--overwrite starts afresh).

Exit status: 0 trained; 2 refused (one line on stderr names the flag, NaN and +-inf in float flags included, or
what in the run's directory is damaged; flags are checked before TensorFlow is loaded); 3 the model became
non-finite (training stopped in that round, summary.json's nonfinite_model_round) or no client's update counted in
--stop_after_rounds_without_update rounds in a row (summary.json's no_counted_update_stop_round);
4 the run's own TFF worker died, e.g. killed or out of memory (one line names its signal or status and its log);
130 interrupted by Ctrl-C (one line says where the run resumes from). After 4 or 130 the same command resumes.

Where clients run: in a TFF worker_binary, by default a local one this run starts. TFF's PyPI wheel's is built
without CUDA, so clients run on the CPU's cores (`--gpus=auto` says so in one line, `--gpus=0` is refused);
`--worker_binary=PATH` (or $TFF_ROBUST_WORKER_BINARY) starts a worker built from TFF's source with CUDA instead.
`--gpus`, `--max_concurrent_computation_calls` and `--worker_binary` configure the local worker. Remote: start
`python -m tff_robust.runtime.worker_service --port=8000` on the host that should compute, then pass
`--tff_worker_address=HOST:8000` (several comma-separated addresses shard each cohort over the workers; through an
SSH tunnel to the service's default 127.0.0.1, or with `--tff_worker_credentials=DIR` to workers serving mutual TLS).
"""

import os
import sys

# Before TensorFlow is imported: TensorFlow 2.14 logs three harmless C++ errors at import (cuDNN, cuFFT, cuBLAS
# factories "already registered"); level 3 keeps them out of the runner's output. TF_CPP_MIN_LOG_LEVEL=0 shows all.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
# gRPC's C core logs a failed TLS handshake at INFO before the runner's own one-line refusal says why.
os.environ.setdefault('GRPC_VERBOSITY', 'ERROR')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top

from experiments import exit_statuses  # pylint: disable=g-import-not-at-top
from experiments import train_flags  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top

flags.adopt_module_key_flags(train_flags)  # --help lists them


def check(argv) -> None:
  """The checks of parsed flags that need no TensorFlow; raises train_flags.Refusal."""
  if len(argv) > 1:
    raise train_flags.Refusal(f'unexpected positional arguments: {" ".join(argv[1:])}')
  train_flags.check_root_output_dir()
  train_flags.check_local_worker()
  train_flags.check_remote_workers()
  train_flags.check_run_directory()


def main(argv) -> int:
  """Runs the command whose flags are parsed: `check`, then `train_program.run` (which imports TensorFlow)."""
  check(argv)
  # TensorFlow is imported here, not at the top, so that refusals come first (and outside `app.run`, which would
  # break Keras's functional models: NOTES.md).
  from experiments import train_program  # pylint: disable=g-import-not-at-top
  return train_program.run()


def _run_command() -> None:
  app.define_help_flags()  # --help, --helpfull: print the help and exit
  argv = finite_flags.parse_flags(sys.argv)  # absl's checks, then no float flag NaN or infinite
  logging.use_absl_handler()
  try:
    sys.exit(main(argv))
  except train_flags.Refusal as error:
    finite_flags.refuse(error)
  except KeyboardInterrupt:  # outside the rounds (`train_program.run` reports one during them)
    sys.stderr.write('Interrupted; the same command resumes the run from its newest checkpoint, if it has one.\n')
    sys.exit(exit_statuses.INTERRUPTED)


if __name__ == '__main__':
  _run_command()
