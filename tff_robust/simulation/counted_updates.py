"""How many clients' updates counted in a round, from the metrics every process reports; rounds with none.

A client's update counts when it reaches the aggregate with a positive weight: it trained on data and its
update was finite and not filtered out. A round in which none counts learned nothing from its cohort (the
global model keeps its value, or moves by the server optimizer's momentum alone), however many rounds run.
Each process reports what it left out (`tests/processes/test_hostile_clients.py` checks the counts):
  - its client work, `client_work/num_nonfinite_updates` (a non-finite update, left out with weight 0) and
    `client_work/num_empty_datasets` (nothing to train on). Delta-FL reports the clients that trained and sent
    their update with a positive weight directly, `client_work/filter/num_kept` (the others were filtered out,
    had a non-finite loss or update, or no data); MtFEEL and signSGD, whose devices' signs are aggregated
    without a client work, count their non-finite devices in `aggregator/num_nonfinite_clients`;
  - its aggregator: the gather-based rules use `aggregator/num_clients_used` rows, or none when they report
    `aggregator/insufficient_clients` = 1 (the round is skipped), and FLAME only its majority cluster,
    `aggregator/num_admitted_clients`; the others leave the values that arrive non-finite out and count them in
    `aggregator/num_nonfinite_clients`;
  - the norm filter, at any depth of a chain (`aggregator/num_dropped_clients`, `aggregator/mean/...`): the
    clients it set to weight 0, beyond its threshold or non-finite (a client the client work already left out
    has norm 0 and weight 0: the filter keeps it, so no client is subtracted twice).
"""

from typing import Mapping, Optional, Sequence

from absl import logging

# The metrics that say why updates did not count, as `count` reads them (keys of flattened process metrics).
_NONFINITE_UPDATES = 'client_work/num_nonfinite_updates'
_EMPTY_DATASETS = 'client_work/num_empty_datasets'
_KEPT = 'client_work/filter/num_kept'
_AGGREGATOR_NONFINITE = 'aggregator/num_nonfinite_clients'
_ROWS_USED = 'aggregator/num_clients_used'
_INSUFFICIENT = 'aggregator/insufficient_clients'
_ADMITTED = 'aggregator/num_admitted_clients'
_DROPPED = 'num_dropped_clients'  # the norm filter's, under `aggregator/` at the depth of the chain it sits at
REASONS = (_NONFINITE_UPDATES, _EMPTY_DATASETS, _KEPT, 'client_work/filter/num_nonfinite_losses',
           _AGGREGATOR_NONFINITE, _ROWS_USED, _INSUFFICIENT, _ADMITTED, f'aggregator/{_DROPPED}')


def count(metrics: Mapping[str, float], cohort_size: int) -> Optional[int]:
  """The number of the round's `cohort_size` clients whose update counted (module docstring); None for a process
  that reports none of the metrics it is read from."""
  if _KEPT in metrics:
    counted = int(metrics[_KEPT])
  elif any(key in metrics for key in (_NONFINITE_UPDATES, _EMPTY_DATASETS, _AGGREGATOR_NONFINITE, _ROWS_USED)):
    counted = cohort_size - int(metrics.get(_NONFINITE_UPDATES, 0)) - int(metrics.get(_EMPTY_DATASETS, 0))
  else:
    return None
  counted -= sum(int(value) for key, value in metrics.items()
                 if key.startswith('aggregator/') and key.rsplit('/', 1)[-1] == _DROPPED)
  if _ROWS_USED in metrics:  # the gather-based rules drop rows of weight 0 too: their own count is exact
    if metrics.get(_INSUFFICIENT):
      return 0
    return max(min(counted, int(metrics[_ROWS_USED]), int(metrics.get(_ADMITTED, metrics[_ROWS_USED]))), 0)
  return max(counted - int(metrics.get(_AGGREGATOR_NONFINITE, 0)), 0)


def reasons(metrics: Mapping[str, float], cohort_size: int) -> str:
  """'cohort of 10: num_nonfinite_updates = 10, num_empty_datasets = 0': the `REASONS` metrics the process
  reported, named as in metrics.csv."""
  named = [f'{key.removeprefix("client_work/")} = {int(metrics[key])}' for key in REASONS if key in metrics]
  return f'cohort of {cohort_size}: {", ".join(named)}' if named else f'cohort of {cohort_size}'


class RoundsWithoutUpdate:
  """The rounds of a run in which no client's update counted: each logged as one warning line, and the run told
  to stop once `stop_after` (> 0) of them come in a row (0: never)."""

  def __init__(self, stop_after: int, earlier: Sequence[int] = ()):
    """`earlier`: such rounds of the run before it was resumed, in order (the last ones may start a streak)."""
    if isinstance(stop_after, bool) or not isinstance(stop_after, int) or stop_after < 0:
      raise ValueError(f'stop_after must be an integer >= 0, got {stop_after!r}')
    self.stop_after = stop_after
    self.rounds = list(earlier)

  def streak(self, round_num: int) -> list:
    """The rounds without a counted update that end in `round_num`, consecutive, oldest first."""
    streak = []
    for earlier in reversed(self.rounds):
      if earlier != round_num - len(streak):
        break
      streak.insert(0, earlier)
    return streak

  def record(self, round_num: int, total_rounds: int, metrics: Mapping[str, float], cohort_size: int) -> Optional[
      int]:
    """Counts round `round_num`'s counted updates (None: the process does not say); a round with none is logged
    and remembered."""
    counted = count(metrics, cohort_size)
    if counted == 0:
      self.rounds.append(round_num)
      logging.warning("Round %d of %d: no client's update counted (%s).", round_num, total_rounds,
                      reasons(metrics, cohort_size))
    return counted

  def stop_message(self, round_num: int, total_rounds: int) -> Optional[str]:
    """Why the run stops in round `round_num` (`stop_after` rounds in a row without a counted update), or None."""
    streak = self.streak(round_num)
    if not self.stop_after or len(streak) < self.stop_after:
      return None
    return (f"Rounds {streak[0]}-{streak[-1]} of {total_rounds}: no client's update counted in {len(streak)} "
            f'consecutive rounds (stop_after_rounds_without_update={self.stop_after}); training stopped in round '
            f'{round_num} (summary.json: no_counted_update_stop_round). Every update was non-finite, filtered out '
            'or from an empty dataset: lower the learning rates or check the data.')
