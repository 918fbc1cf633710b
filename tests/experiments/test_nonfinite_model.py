"""A run whose model becomes non-finite stops in that round, says so in its log and summary.json, exits with 3."""

import math

import pytest

from tests.experiments import train_runs


@pytest.mark.parametrize('flags, evidence', [
    # The case, default flags: RFA at the default learning rates diverges; the weights stay finite but so
    # large that the training loss overflows (and afterwards every update would be dropped as non-finite).
    (('--task=synthetic_regression_fedplus',), 'train/loss = inf'),
    # A server step (1e300 is inf in float32) that makes the weights themselves non-finite.
    (('--task=synthetic_regression', '--algorithm=fedavg', '--server_learning_rate=1e300'), 'NaN or Inf weights'),
])
def test_a_diverging_run_stops_in_the_first_nonfinite_round_and_says_so(tmp_path, flags, evidence):
  result = train_runs.train(tmp_path, *flags)
  assert result.returncode == 3, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  stop = summary['nonfinite_model_round']
  assert summary['rounds'] == stop < 100 and [int(row['round']) for row in rows] == list(range(1, stop + 1))
  assert f'Round {stop} of 100: the model became non-finite ({evidence})' in result.stderr
  finite = lambda row: all(math.isfinite(float(row[key])) for key in ('train/loss', 'eval/loss') if row.get(key))
  assert all(finite(row) for row in rows[:-1]) and (evidence.startswith('NaN') or not finite(rows[-1]))
  assert rows[-1]['eval/loss']  # the stopping round is evaluated
