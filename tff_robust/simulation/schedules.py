"""Client learning-rate schedules of the papers' experiments, applied round by round through hparams."""

from typing import Callable


def step_decay(initial: float, decay: float, period: int) -> Callable[[int], float]:
  """gamma(round) = gamma_0 c^floor(t / t_0) with t = round - 1: the step decay of the RFA and Delta-FL runs.

  Args:
    initial: gamma_0 >= 0, the learning rate of the first `period` rounds.
    decay: c in (0, 1]; 1 is a constant learning rate.
    period: t_0 >= 1 rounds between decays.
  """
  if not initial >= 0:
    raise ValueError(f'initial learning rate must be >= 0, got {initial}')
  if not 0 < decay <= 1:
    raise ValueError(f'decay must be in (0, 1], got {decay}')
  if period < 1:
    raise ValueError(f'period must be >= 1 round, got {period}')
  return lambda round_num: initial * decay ** ((round_num - 1) // period)


def set_client_learning_rate(process, state, learning_rate: float):
  """`state` with the client optimizer's learning rate set, for processes exposing TFF's hparams.

  Raises:
    TypeError: if `process` has no `get_hparams` with a `client_work` learning rate (e.g. the stateful and
      sign-vote processes).
  """
  hparams = process.get_hparams(state) if hasattr(process, 'get_hparams') else None
  if not isinstance(hparams, dict) or 'learning_rate' not in hparams.get('client_work', {}):
    raise TypeError(f'{type(process).__name__} exposes no client learning rate in its hparams to schedule')
  hparams['client_work']['learning_rate'] = learning_rate
  return process.set_hparams(state, hparams)
