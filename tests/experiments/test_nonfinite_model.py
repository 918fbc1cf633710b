"""A run whose model becomes non-finite stops in that round, and a run in which no client's update counts stops
after --stop_after_rounds_without_update such rounds in a row: each says so in its log and summary.json, exits
with 3."""

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


# A client learning rate so large (finite: NaN is refused at the flag) that every client's second SGD step
# overflows float32: each update is non-finite and left out, the model keeps its initial value and stays finite.
_NO_UPDATE_COUNTS = ('--task=synthetic_regression', '--algorithm=fedavg', '--client_learning_rate=1e30')


def _warning(round_num: int, total_rounds: int) -> str:
  return (f"Round {round_num} of {total_rounds}: no client's update counted (cohort of 10: num_nonfinite_updates = "
          '10, num_empty_datasets = 0)')


def test_a_run_in_which_no_update_counts_stops_after_three_such_rounds_and_names_them(tmp_path):
  result = train_runs.train(tmp_path, *_NO_UPDATE_COUNTS, '--rounds_per_eval=1')
  assert result.returncode == 3, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['no_counted_update_stop_round'] == summary['rounds'] == summary['rounds_without_counted_update'] == 3
  assert 'nonfinite_model_round' not in summary
  assert [int(row['round']) for row in rows] == [1, 2, 3]
  assert all(row['counted_updates'] == '0' and row['num_nonfinite_updates'] == '10' for row in rows)
  assert len({row['eval/loss'] for row in rows}) == 1 and math.isfinite(float(rows[0]['eval/loss']))  # never moved
  assert all(_warning(r, 100) in result.stderr for r in (1, 2, 3))
  assert ("Rounds 1-3 of 100: no client's update counted in 3 consecutive rounds "
          '(stop_after_rounds_without_update=3); training stopped in round 3') in result.stderr


@pytest.mark.slow
def test_the_stop_can_be_turned_off_and_a_resumed_run_counts_its_earlier_rounds(tmp_path):
  first = train_runs.train(tmp_path, *_NO_UPDATE_COUNTS, '--total_rounds=2', '--rounds_per_checkpoint=1',
                           '--stop_after_rounds_without_update=0')
  assert first.returncode == 0, first.stderr[-3000:]
  assert train_runs.outputs(tmp_path)[0]['rounds_without_counted_update'] == 2
  assert _warning(2, 2) in first.stderr and 'training stopped' not in first.stderr
  resumed = train_runs.train(tmp_path, *_NO_UPDATE_COUNTS, '--total_rounds=6', '--rounds_per_checkpoint=1')
  assert resumed.returncode == 3, resumed.stderr[-3000:]
  assert 'resumed from round 2 of 6' in resumed.stdout + resumed.stderr
  assert "Rounds 1-3 of 6: no client's update counted in 3 consecutive rounds" in resumed.stderr
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['rounds_without_counted_update'] == 3 and summary['no_counted_update_stop_round'] == 3
  assert [row['counted_updates'] for row in rows] == ['0', '0', '0']
