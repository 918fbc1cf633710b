"""Runs `algorithm_rounds`' two rounds of each named algorithm on remote TFF workers and saves the final models.

  python -m tests.runtime.remote_rounds --addresses=HOST:PORT,HOST:PORT [--credentials=DIR] --directory=DIR \
      rfa delta_fl

Started by a test inside another network namespace, as a driver on another host. Each algorithm NAME starts from
the model in DIR/NAME_initial.npz (the test's: another Python process may draw another initial model), and
DIR/NAME.npz receives its model after the rounds (`set_remote_execution_context(addresses, credentials_dir=...)`),
which the test compares with the same rounds on its local worker.
"""

import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from tests.simulation import algorithm_rounds  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument('--addresses', required=True)
  parser.add_argument('--credentials')
  parser.add_argument('--directory', required=True)
  parser.add_argument('algorithms', nargs='+')
  args = parser.parse_args()
  execution_context.set_remote_execution_context(args.addresses.split(','), credentials_dir=args.credentials)
  remote = tff.framework.get_context_stack().current
  task, _, cohort = algorithm_rounds.task_and_cohort()
  for name in args.algorithms:
    process = algorithm_rounds.build_process(name, task)
    with np.load(os.path.join(args.directory, f'{name}_initial.npz')) as initial:
      initial_weights = [initial[key] for key in initial.files]
    state, _ = algorithm_rounds.run_rounds(remote, process, cohort, initial_weights=initial_weights)
    np.savez(os.path.join(args.directory, f'{name}.npz'), *algorithm_rounds.flat_model_weights(process, state))


if __name__ == '__main__':
  main()
