"""Every algorithm of the runner reads a client's data in as few client calls per round as its maths needs.

A `federated_map` over the client datasets is one TensorFlow call per client in TFF's worker, with the client's
dataset serialised into it: the counts that every process reports (non-finite updates, empty datasets) are read in
the call that trains, not in one more. Delta-FL needs two: the losses of the broadcast model decide, through the
server's quantile, who trains.
"""

import pytest
import tensorflow_federated as tff

from tests.client_data_calls import data_reading_client_maps
from tff_robust.simulation import algorithms
from tff_robust import tasks

_TWO_CALLS = {'delta_fl': 'the loss pass, then training of the kept clients'}


@pytest.fixture(scope='module')
def task():
  return tasks.create_task('digits', client_epochs=1, client_batch_size=16, seed=0, use_synthetic_data=True)


@pytest.mark.parametrize('name', algorithms.ALGORITHM_NAMES)
def test_each_algorithm_reads_client_data_in_one_call_per_round(task, name):
  process = algorithms.build_learning_process(
      name, task.model_fn, algorithms.AlgorithmConfig(client_learning_rate=0.01), clients_per_round=10
  )
  next_computation = tff.templates.IterativeProcess.next.fget(process)  # under the subclasses' Python `next`
  assert data_reading_client_maps(next_computation) == (2 if name in _TWO_CALLS else 1), name


def test_an_attacked_round_reads_data_and_flags_in_one_call(task):
  process = algorithms.build_learning_process(
      'fedavg', task.model_fn, algorithms.AlgorithmConfig(client_learning_rate=0.01), clients_per_round=10,
      update_attack='omniscient',
  )
  assert data_reading_client_maps(process.next) == 1
