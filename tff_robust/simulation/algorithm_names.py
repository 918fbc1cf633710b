"""The names of the learning algorithms (the runner's `--algorithm`) and the kinds they fall into.

Imports no TensorFlow, so that a runner checks its flags before loading it; `algorithms` builds the algorithms.
"""

ALGORITHM_NAMES = (
    'fedavg', 'rfa', 'rfa_one_step',
    'coordinate_median', 'trimmed_mean', 'multi_krum', 'bulyan', 'norm_clipping',
    'delta_fl', 'bucketing_rfa', 'centered_clipping', 'filtered_centered_clipping',
    'fedplus_avg', 'fedplus_geomed', 'fedplus_comed', 'personalized_rfa', 'local_only', 'fedprox',
    'mtfeel', 'fedsgd', 'signsgd',
)
# Algorithms that are FedAvg's model-delta process with a defence of the registry as aggregator
# (`tff_robust.aggregators.defences`): each name is an alias of a chain (`algorithms.defence_spec`); `--defence`
# replaces the chain of `fedavg`.
DEFENCE_ALGORITHM_NAMES = (
    'fedavg', 'rfa', 'rfa_one_step', 'coordinate_median', 'trimmed_mean', 'multi_krum', 'bulyan', 'norm_clipping',
    'bucketing_rfa', 'centered_clipping', 'filtered_centered_clipping',
)
# Algorithms whose clients keep a state between rounds (`StatefulClientProcess`).
STATEFUL_ALGORITHM_NAMES = ('fedplus_avg', 'fedplus_geomed', 'fedplus_comed', 'personalized_rfa', 'local_only')
# Algorithms in which every device takes part in every round, knowing its index (`IndexedClientsProcess`).
INDEXED_ALGORITHM_NAMES = ('mtfeel', 'signsgd')
# Algorithms whose clients send one gradient of their whole dataset per round (no local epochs).
FULL_GRADIENT_ALGORITHM_NAMES = ('fedsgd', 'mtfeel', 'signsgd')
# Algorithms built as `tff.learning` processes whose hparams hold the client optimizer's learning rate (so a
# learning-rate schedule can set it round by round: `schedules.set_client_learning_rate`).
CLIENT_SCHEDULE_ALGORITHM_NAMES = (
    'fedavg', 'rfa', 'rfa_one_step', 'coordinate_median', 'trimmed_mean', 'multi_krum', 'bulyan', 'norm_clipping',
    'delta_fl', 'bucketing_rfa', 'centered_clipping', 'filtered_centered_clipping',
)
