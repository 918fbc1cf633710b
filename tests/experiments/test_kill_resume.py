"""A training run killed with SIGKILL resumes from its last checkpoint to the uninterrupted run's result."""

import os
import signal
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from tests import repository
from tests.experiments import train_runs

_ROUNDS = 6
_FLAGS = ('--task=digits', '--algorithm=rfa', f'--total_rounds={_ROUNDS}', '--rounds_per_eval=2',
          '--clients_per_round=5', '--rounds_per_checkpoint=1')
_KILL_AFTER_CHECKPOINT = 3


def _start(tmp_path, name):
  return subprocess.Popen(
      [*train_runs.TRAIN_COMMAND, f'--root_output_dir={tmp_path}', f'--experiment_name={name}', *_FLAGS],
      cwd=repository.ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
  )


def _kill_after_checkpoint(process, checkpoint_dir, timeout=600):
  train_runs.wait_for_path(checkpoint_dir, process, timeout)
  process.send_signal(signal.SIGKILL)
  assert process.wait(timeout=60) == -signal.SIGKILL


def _assert_same_run(tmp_path, name, reference='uninterrupted'):
  for array, expected in zip(train_runs.model_weights(tmp_path, name), train_runs.model_weights(tmp_path, reference),
                             strict=True):
    np.testing.assert_allclose(array, expected, rtol=1e-5, atol=1e-6)
  summary, rows = train_runs.outputs(tmp_path, name)
  expected_summary, expected_rows = train_runs.outputs(tmp_path, reference)
  assert [row['round'] for row in rows] == [str(r) for r in range(1, _ROUNDS + 1)]  # each round released once
  for key in ('train/loss', 'aggregator/objective/1'):
    np.testing.assert_allclose([float(row[key]) for row in rows], [float(row[key]) for row in expected_rows],
                               rtol=1e-5, err_msg=key)
  for key in ('eval/accuracy', 'eval/loss', 'secure_average_calls'):
    np.testing.assert_allclose(summary[key], expected_summary[key], rtol=1e-5, err_msg=key)
  assert sorted(_tensorboard_steps(tmp_path / name, 'train/loss')) == list(range(1, _ROUNDS + 1))  # each round once


def _tensorboard_steps(run_dir, tag):
  """The steps of `tag`'s summaries in the run's TensorBoard event files (the files' order is not asserted)."""
  steps = []
  for path in sorted((run_dir / 'tensorboard').iterdir()):
    for record in tf.data.TFRecordDataset(str(path)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      steps.extend(event.step for value in event.summary.value if value.tag == tag)
  return steps


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_result_and_skips_a_truncated_checkpoint(tmp_path):
  uninterrupted = train_runs.train(tmp_path, *_FLAGS, name='uninterrupted')
  assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

  killed = _start(tmp_path, 'killed')
  checkpoints = tmp_path / 'killed' / 'checkpoints' / 'program_state'
  _kill_after_checkpoint(killed, checkpoints / f'round_{_KILL_AFTER_CHECKPOINT}')
  assert not (tmp_path / 'killed' / 'summary.json').exists()
  resumed = train_runs.train(tmp_path, *_FLAGS, name='killed')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  _assert_same_run(tmp_path, 'killed')

  newest = checkpoints / f'round_{_ROUNDS}'
  largest = max((path for path in newest.rglob('*') if path.is_file()), key=lambda path: path.stat().st_size)
  os.truncate(largest, largest.stat().st_size // 2)
  restarted = train_runs.train(tmp_path, *_FLAGS, name='killed')
  assert restarted.returncode == 0, restarted.stderr[-3000:]
  assert f'Checkpoint of round {_ROUNDS} is damaged and was skipped' in restarted.stderr
  assert (tmp_path / 'killed' / 'checkpoints' / 'damaged' / 'program_state' / f'round_{_ROUNDS}').is_dir()
  _assert_same_run(tmp_path, 'killed')  # round 6 ran again from the checkpoint of round 5
