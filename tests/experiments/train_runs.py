"""Runs `python -m experiments.train` in a subprocess, as a user does, and reads back what it wrote."""

import csv
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_COMMAND = (sys.executable, '-m', 'experiments.train', '--noprogress_bar')


def train(tmp_path, *flags, timeout=600, name='run'):
  """The finished `subprocess.CompletedProcess` of one run writing to `tmp_path/name`."""
  return subprocess.run(
      [*TRAIN_COMMAND, f'--root_output_dir={tmp_path}', f'--experiment_name={name}', *flags],
      cwd=REPO, capture_output=True, text=True, timeout=timeout,
  )


def outputs(tmp_path, name='run'):
  """(summary.json as a dict, metrics.csv as a list of row dicts) of run `name`."""
  with open(tmp_path / name / 'summary.json') as f:
    summary = json.load(f)
  with open(tmp_path / name / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  return summary, rows


def model_weights(tmp_path, name='run'):
  """The final model of run `name` as a list of arrays, in `model_weights.npz` order."""
  with np.load(tmp_path / name / 'model_weights.npz') as arrays:
    return [arrays[key] for key in arrays.files]


def wait_for_path(path, process, timeout=600):
  """Polls until `path` exists; fails if `process` ends first or `timeout` seconds pass."""
  deadline = time.monotonic() + timeout
  while not os.path.exists(path):
    assert process.poll() is None, f'the run ended before {path} existed'
    assert time.monotonic() < deadline, f'no {path} after {timeout}s'
    time.sleep(0.05)
