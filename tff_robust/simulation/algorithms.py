"""Learning algorithms selectable by name (the runner's `--algorithm`)."""

import tensorflow_federated as tff

from tff_robust.processes import rfa

ALGORITHM_NAMES = ('fedavg', 'rfa', 'rfa_one_step')


def build_learning_process(
    name: str,
    model_fn,
    *,
    client_learning_rate: float,
    server_learning_rate: float,
    rfa_num_passes: int = 3,
    rfa_smoothing: float = 1e-6,
) -> tff.learning.templates.LearningProcess:
  """Builds the learning process `name` with SGD on the clients and SGD on the server."""
  client_optimizer = tff.learning.optimizers.build_sgdm(learning_rate=client_learning_rate)
  server_optimizer = tff.learning.optimizers.build_sgdm(learning_rate=server_learning_rate)
  if name == 'fedavg':
    return tff.learning.algorithms.build_weighted_fed_avg(model_fn, client_optimizer, server_optimizer)
  if name == 'rfa':
    return rfa.build_rfa_process(
        model_fn, client_optimizer, server_optimizer, num_passes=rfa_num_passes, smoothing=rfa_smoothing
    )
  if name == 'rfa_one_step':
    return rfa.build_rfa_process(
        model_fn, client_optimizer, server_optimizer, one_step=True, smoothing=rfa_smoothing
    )
  raise ValueError(f'algorithm must be one of {ALGORITHM_NAMES}, got {name!r}')
