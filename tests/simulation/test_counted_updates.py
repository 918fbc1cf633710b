"""`counted_updates`: the updates that counted, from each kind of process's metrics (what each reports is checked
on hostile cohorts in `tests/processes/test_hostile_clients.py`), and the rounds in which none did."""

import logging

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_robust.aggregators.defences import building
from tff_robust.simulation import counted_updates
from tff_robust.simulation import metrics_utils

_NO_CLIENT_WORK_LOSSES = {'client_work': {'num_nonfinite_updates': 0, 'num_empty_datasets': 0}}


@pytest.mark.parametrize('metrics, cohort_size, expected', [
    # TFF's model-delta client work (FedAvg, RFA, FedProx, the stateful processes, FedSGD): the cohort less the
    # clients left out for a non-finite update or an empty dataset.
    ({'client_work/num_nonfinite_updates': 3, 'client_work/num_empty_datasets': 1}, 10, 6),
    ({'client_work/num_nonfinite_updates': 9, 'client_work/num_empty_datasets': 1}, 10, 0),
    # ... and a secure robust aggregator leaves out what still arrives non-finite (a poisoned update)
    ({'client_work/num_nonfinite_updates': 3, 'client_work/num_empty_datasets': 0,
      'aggregator/num_nonfinite_clients': 2}, 10, 5),
    # Delta-FL: its filter's kept clients are those that trained and sent a positive weight
    ({'client_work/filter/num_kept': 2, 'client_work/filter/num_nonfinite_losses': 5,
      'client_work/num_nonfinite_updates': 1, 'client_work/num_empty_datasets': 0}, 10, 2),
    ({'client_work/filter/num_kept': 0, 'client_work/num_nonfinite_updates': 0}, 10, 0),
    # the gather-based rules count their usable rows (weight-0 rows are among their num_nonfinite_clients)
    ({'client_work/num_nonfinite_updates': 3, 'client_work/num_empty_datasets': 1,
      'aggregator/num_nonfinite_clients': 4, 'aggregator/num_clients_used': 6,
      'aggregator/insufficient_clients': 0}, 10, 6),
    # ... and skip the round when too few remain
    ({'client_work/num_nonfinite_updates': 5, 'client_work/num_empty_datasets': 0,
      'aggregator/num_nonfinite_clients': 5, 'aggregator/num_clients_used': 5,
      'aggregator/insufficient_clients': 1}, 10, 0),
    # MtFEEL, signSGD: non-finite devices in the aggregator's count, empty ones in the client work's
    ({'aggregator/num_nonfinite_clients': 2, 'client_work/num_empty_datasets': 1}, 30, 27),
    ({'aggregator/num_nonfinite_clients': 30, 'client_work/num_empty_datasets': 0}, 30, 0),
    # FLAME: only its majority cluster reaches the aggregate
    ({'client_work/num_nonfinite_updates': 0, 'client_work/num_empty_datasets': 0,
      'aggregator/num_nonfinite_clients': 0, 'aggregator/num_clients_used': 10,
      'aggregator/num_admitted_clients': 6}, 10, 6),
    # the norm filter's dropped clients, at the top of a chain or deeper, and with a secure rule after it
    ({'client_work/num_nonfinite_updates': 1, 'client_work/num_empty_datasets': 0,
      'aggregator/num_dropped_clients': 2, 'aggregator/inner/num_nonfinite_clients': 0}, 10, 7),
    ({'client_work/num_nonfinite_updates': 0, 'client_work/num_empty_datasets': 0,
      'aggregator/mean/num_dropped_clients': 3}, 10, 7),
    ({'client_work/num_nonfinite_updates': 0, 'client_work/num_empty_datasets': 0,
      'aggregator/num_dropped_clients': 10}, 10, 0),
    # a process that reports none of these: unknown
    ({'client_work/train/loss': 0.5}, 10, None),
])
def test_the_counted_updates_of_each_kind_of_process(metrics, cohort_size, expected):
  assert counted_updates.count(metrics, cohort_size) == expected


def test_the_reasons_name_the_metrics_as_metrics_csv_does():
  metrics = {'client_work/num_nonfinite_updates': 10.0, 'client_work/num_empty_datasets': 0, 'client_work/x': 1}
  assert counted_updates.reasons(metrics, 10) == 'cohort of 10: num_nonfinite_updates = 10, num_empty_datasets = 0'
  assert counted_updates.reasons({}, 4) == 'cohort of 4'


_NONE = {'client_work/num_nonfinite_updates': 10, 'client_work/num_empty_datasets': 0}
_SOME = {'client_work/num_nonfinite_updates': 4, 'client_work/num_empty_datasets': 0}


def _record(rounds, rounds_metrics, caplog):
  for round_num, metrics in rounds_metrics:
    rounds.record(round_num, 100, metrics, 10)
  return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_each_round_without_a_counted_update_is_one_warning_and_three_in_a_row_stop(caplog):
  rounds = counted_updates.RoundsWithoutUpdate(3)
  warnings = _record(rounds, [(1, _NONE), (2, _NONE), (3, _SOME), (4, _NONE), (5, _NONE)], caplog)
  assert warnings == [
      f"Round {r} of 100: no client's update counted (cohort of 10: num_nonfinite_updates = 10, "
      'num_empty_datasets = 0).' for r in (1, 2, 4, 5)
  ]
  assert rounds.rounds == [1, 2, 4, 5]
  assert [rounds.stop_message(r, 100) for r in (2, 3, 5)] == [None] * 3  # round 3 counted 6: the streak restarts
  rounds.record(6, 100, _NONE, 10)
  assert rounds.stop_message(6, 100).startswith(
      "Rounds 4-6 of 100: no client's update counted in 3 consecutive rounds "
      '(stop_after_rounds_without_update=3); training stopped in round 6'
  )


def test_a_resumed_run_continues_its_streak_and_zero_never_stops(caplog):
  resumed = counted_updates.RoundsWithoutUpdate(3, earlier=[2, 7, 8])
  _record(resumed, [(9, _NONE)], caplog)
  assert resumed.rounds == [2, 7, 8, 9] and resumed.stop_message(9, 100).startswith('Rounds 7-9 of 100')
  never = counted_updates.RoundsWithoutUpdate(0)
  _record(never, [(r, _NONE) for r in range(1, 11)], caplog)
  assert len(never.rounds) == 10 and never.stop_message(10, 100) is None


@pytest.mark.parametrize('stop_after', [-1, 1.5, True])
def test_a_bad_stop_after_is_refused(stop_after):
  with pytest.raises(ValueError, match='stop_after must be an integer >= 0'):
    counted_updates.RoundsWithoutUpdate(stop_after)


@pytest.mark.parametrize('spec, depth', [('norm_filter(k=2)>gm', 'aggregator'),
                                         ('clipping(c=100)>norm_filter(k=2)>mean', 'aggregator/mean')])
def test_a_norm_filter_at_any_depth_of_a_chain_leaves_its_dropped_clients_uncounted(spec, depth):
  """The metric names as a real chain reports them: one of six clients, 50 times the others' norm, is dropped."""
  factory = building.build_factory(spec, clients_per_round=6, num_byzantine=1)
  process = factory.create(tff.TensorType(np.float32, [3]), tff.TensorType(np.float32))
  values = [np.full(3, 1.0 + 0.1 * i, np.float32) for i in range(5)] + [np.full(3, 50.0, np.float32)]
  measurements = process.next(process.initialize(), values, [1.0] * 6).measurements
  flat = metrics_utils.flatten_metrics({'aggregator': measurements, **_NO_CLIENT_WORK_LOSSES})
  assert flat[f'{depth}/num_dropped_clients'] == 1
  assert counted_updates.count(flat, 6) == 5
