"""The training loop with stateful clients: personal models survive a kill-and-resume from a checkpoint."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.core import fedplus as fedplus_reference
from tff_robust.processes import fedplus
from tff_robust.simulation import client_state_store
from tff_robust.simulation import training_loop
from tff_robust.tasks import synthetic_regression_fedplus

_ROUNDS = 6


class _Interrupted(Exception):
  pass


def _task_and_process(init_client_from='initial_global'):
  task = synthetic_regression_fedplus.create_task(client_epochs=1, client_batch_size=10, seed=0)
  process = fedplus.build_fedplus_process(
      task.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=1e-4), variant='geomed', sigma=1.0,
      init_client_from=init_client_from,
  )
  return task, process


@pytest.fixture(scope='module')
def task_and_process():
  return _task_and_process()


def _run(task, process, output_dir, client_data_fn=None, rounds_per_checkpoint=2):
  return training_loop.run_training(
      process, task, client_data_fn or task.client_dataset, total_rounds=_ROUNDS, clients_per_round=4,
      rounds_per_eval=3, seed=3, output_dir=output_dir, show_progress=False,
      rounds_per_checkpoint=rounds_per_checkpoint,
  )


def _personal_models(output_dir, process, task):
  store = client_state_store.ClientStateStore(
      os.path.join(output_dir, 'client_states'), process.initial_client_state(process.initialize())
  )
  return {cid: store.get([cid])[0] for cid in task.train_data.client_ids}


def _killing_after(task, num_rounds, cohort_size=4):
  """client_data_fn that raises when round num_rounds + 1 asks for its first client's data."""
  calls = {'n': 0}

  def client_data_fn(client_id):
    calls['n'] += 1
    if calls['n'] > num_rounds * cohort_size:
      raise _Interrupted()
    return task.client_dataset(client_id)

  return client_data_fn


def _assert_same_run(reference_dir, resumed_dir, process, task):
  expected, actual = _personal_models(reference_dir, process, task), _personal_models(resumed_dir, process, task)
  for cid in expected:
    for actual_leaf, expected_leaf in zip(tf.nest.flatten(actual[cid]), tf.nest.flatten(expected[cid])):
      np.testing.assert_allclose(actual_leaf, expected_leaf, atol=1e-6, err_msg=cid)
  with open(os.path.join(reference_dir, 'summary.json')) as f:
    reference_summary = json.load(f)
  with open(os.path.join(resumed_dir, 'summary.json')) as f:
    resumed_summary = json.load(f)
  for key in ('eval/mse', 'personal/loss_mean', 'personal/loss_p90', 'secure_average_calls', 'train/loss'):
    np.testing.assert_allclose(resumed_summary[key], reference_summary[key], rtol=1e-5, err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize('init_client_from', fedplus.INIT_CLIENT_FROM)
def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_personal_models(init_client_from, tmp_path):
  task, process = _task_and_process(init_client_from)
  _run(task, process, str(tmp_path / 'reference'), rounds_per_checkpoint=0)
  resumed = str(tmp_path / 'resumed')
  with pytest.raises(_Interrupted):
    _run(task, process, resumed, client_data_fn=_killing_after(task, 5))  # checkpoints at rounds 2 and 4
  _run(task, process, resumed)
  _assert_same_run(str(tmp_path / 'reference'), resumed, process, task)
  _run(task, process, resumed)  # a finished run started again resumes at its last round and only re-evaluates
  _assert_same_run(str(tmp_path / 'reference'), resumed, process, task)
  with open(os.path.join(resumed, 'metrics.csv')) as f:
    rounds = [int(line.split(',')[0]) for line in f.readlines()[1:]]
  assert rounds == list(range(1, _ROUNDS + 1))  # round 5 released once, after the resume


@pytest.mark.slow
def test_a_damaged_checkpoint_is_skipped_for_the_previous_one(task_and_process, tmp_path):
  task, process = task_and_process
  _run(task, process, str(tmp_path / 'reference'), rounds_per_checkpoint=0)
  resumed = str(tmp_path / 'resumed')
  with pytest.raises(_Interrupted):
    _run(task, process, resumed, client_data_fn=_killing_after(task, 5))
  program_state = os.path.join(resumed, 'checkpoints', 'program_state', 'round_4')
  largest = max((os.path.join(root, name) for root, _, names in os.walk(program_state) for name in names),
                key=os.path.getsize)
  with open(largest, 'r+b') as f:  # a truncated checkpoint file (unique to round 4, unlike hard-linked states)
    f.truncate(os.path.getsize(largest) // 2)
  with pytest.raises(_Interrupted):  # resumes from round 2 (round 4 is damaged): rounds 3..5 run again
    _run(task, process, resumed, client_data_fn=_killing_after(task, 3))
  _run(task, process, resumed)
  _assert_same_run(str(tmp_path / 'reference'), resumed, process, task)
  assert os.path.isdir(os.path.join(resumed, 'checkpoints', 'damaged', 'program_state', 'round_4'))


@pytest.mark.slow  # a training run of the runner
def test_fedplus_runs_also_release_each_clients_anchor_model_against_numpy(task_and_process, tmp_path):
  """`personal_anchor/*`: each party's anchor w~ + prox(w_k - w~) (eq. (2), FedGeoMed+'s block soft-threshold at
  delta = 0.1, `core.fedplus.prox`) scored on its own test half, from the saved models, in NumPy."""
  task, process = task_and_process
  output_dir = str(tmp_path / 'run')
  summary = training_loop.run_training(
      process, task, task.client_dataset, total_rounds=2, clients_per_round=4, rounds_per_eval=2, seed=3,
      output_dir=output_dir, show_progress=False, rounds_per_checkpoint=0,
  )
  global_model = np.load(os.path.join(output_dir, 'model_weights.npz'))['trainable_0'].astype(np.float64)
  losses = []
  for cid, local in _personal_models(output_dir, process, task).items():
    local = np.asarray(local[0], np.float64)
    anchor = global_model + fedplus_reference.prox((local - global_model).ravel(), 0.1, 'l2').reshape(local.shape)
    x, y = [np.stack([np.asarray(e[k]) for e in task.personal_test_data.create_tf_dataset_for_client(cid)])
            for k in ('x', 'y')]
    losses.append(np.mean((x @ anchor - y.reshape(-1, 1)) ** 2))
  np.testing.assert_allclose(summary['personal_anchor/loss_mean'], np.mean(losses), rtol=1e-4)
  assert summary['personal_anchor/loss_mean'] != pytest.approx(summary['personal/loss_mean'], rel=1e-3)
