"""The runner's flags of the learning algorithm: which one, its learning rates, and each algorithm's own
hyperparameters (RFA, the robust rules and --defence, Delta-FL, Fed+, personalized RFA, FedProx, MtFEEL and its
uplink channel).

Imports no TensorFlow. The enum choices and defaults that the library defines in modules importing TensorFlow are
spelt out here; `tests/experiments/test_train_flags.py` checks that they are the library's. Which algorithm reads
which flag is `experiments.flag_users`' table.
"""

from absl import flags

from tff_robust.aggregators.defences import registry as defence_registry
from tff_robust.simulation import algorithm_names

# The library's constants: `delta_fl`, `fedplus`, `delta_median`, `channels`, `mtfeel` and `dde`.
QUANTILE_METHODS = ('exact', 'secure', 'secure_mm')
DEFAULT_QUANTILE_PASSES = {'secure': 2, 'secure_mm': 30}
DEFAULT_FEDPLUS_DELTA = 0.1
FEDPLUS_SOLVERS = ('irls', 'fixed_point')
FEDPLUS_INIT_CLIENT_FROM_VALUES = ('initial_global', 'current_global')
DEFAULT_FEDPLUS_MAX_ITERATIONS = 30
CHANNEL_NAMES = ('none', 'rayleigh', 'outage', 'bsc')
OUTAGE_ACTIONS = ('drop', 'random')
MTFEEL_UPDATE_ORDERS = ('w_then_alpha', 'alpha_then_w')
DDE_OUTPUTS = ('last', 'max')

ALGORITHM = flags.DEFINE_enum('algorithm', 'rfa', algorithm_names.ALGORITHM_NAMES, 'Learning algorithm.')
flags.DEFINE_float(
    'client_learning_rate', 0.1, 'Client SGD learning rate.', lower_bound=0.0
)
flags.DEFINE_float(
    'server_learning_rate', 1.0, 'Server SGD learning rate on the aggregated update.', lower_bound=0.0
)
flags.DEFINE_integer(
    'rfa_num_passes', 3, 'Secure-average calls per RFA aggregation (1 mean + Weiszfeld steps).', lower_bound=1
)
flags.DEFINE_float('rfa_smoothing', 1e-6, 'Weiszfeld smoothing nu > 0.', lower_bound=1e-30)
flags.DEFINE_float(
    'trim_fraction', 0.1, 'trimmed_mean: fraction dropped at each end, in [0, 0.5).', lower_bound=0.0,
    upper_bound=0.4999999,
)
DEFENCE = flags.DEFINE_string(
    'defence', None,
    'With --algorithm=fedavg: its aggregator, a defence chain of the registry (tff_robust.aggregators.defences): '
    'pre-aggregators then one rule joined by ">", parameters in brackets, e.g. "arc>gm", '
    '"bucketing(s=2)>centered_clipping(tau=0.3,iters=3)" (quote it in a shell). Pre-aggregators: '
    f'{", ".join(defence_registry.PRE_AGGREGATOR_NAMES)}; rules: {", ".join(defence_registry.RULE_NAMES)}. '
    'Presets name a whole chain: ' + ', '.join(f'{name} = {chain}' for name, chain in defence_registry.PRESETS.items())
    + ' (the secure-compatible chain with the best worst case; README, "Which defence when"). Parameters come '
    'from the spec alone (unset: the registry\'s defaults; f: --num_byzantine). Unset: fedavg\'s '
    'weighted mean; the other --algorithm names are aliases of chains.',
)
flags.DEFINE_integer(
    'num_byzantine', 1, 'multi_krum, bulyan, and the f of --defence components that take one (arc, nnm, krum, '
    'bulyan; trimmed_mean\'s beta = f / clients_per_round): number f of Byzantine clients tolerated.', lower_bound=0
)
flags.DEFINE_integer(
    'num_selected', 0, 'multi_krum: updates averaged; 0 means clients_per_round - num_byzantine.', lower_bound=0
)
flags.DEFINE_float(
    'clipping_norm', 1.0, 'norm_clipping: L2 bound of each client update.', lower_bound=1e-30
)
flags.DEFINE_integer(
    'bucket_size', 2, 'bucketing_rfa: clients per bucket s (random buckets each round).', lower_bound=1
)
flags.DEFINE_float(
    'centered_clipping_radius', 1.0, 'centered_clipping: L2 bound tau of each residual w_i - v.',
    lower_bound=1e-30,
)
flags.DEFINE_integer(
    'centered_clipping_iterations', 3, 'centered_clipping: secure averages per round.', lower_bound=1
)
flags.DEFINE_float(
    'norm_filter_multiplier', 2.0,
    'filtered_centered_clipping: clients whose update norm exceeds this multiple (>= 1) of the cohort\'s '
    'secure median norm drop out before centered clipping.', lower_bound=1.0,
)
CONFORMITY_LEVEL = flags.DEFINE_float(
    'conformity_level', 0.5, 'delta_fl: conformity level theta in (0, 1]; 1 is FedAvg.', lower_bound=1e-9,
    upper_bound=1.0,
)
QUANTILE_METHOD = flags.DEFINE_enum(
    'quantile_method', 'exact', QUANTILE_METHODS,
    'delta_fl: exact (losses gathered, Algorithm 2), secure (histogram search by secure averages) or '
    'secure_mm (MM by secure averages, Algorithm 3).',
)
flags.DEFINE_integer(
    'quantile_passes', None,
    'delta_fl secure quantile: secure passes per round; default '
    f'{DEFAULT_QUANTILE_PASSES["secure"]} for secure, {DEFAULT_QUANTILE_PASSES["secure_mm"]} for secure_mm (the '
    'smallest with >= 98% agreement with the exact filter, benchmarks/quantile_passes.py).',
    lower_bound=1,
)
THRESHOLD_PERIOD = flags.DEFINE_integer(
    'threshold_period', 1, 'delta_fl: recompute the threshold every this many rounds (T_eta).', lower_bound=1
)
FEDPLUS_SIGMA = flags.DEFINE_float(
    'fedplus_sigma', 1.0, 'fedplus_*: proximal penalty sigma >= 0 (kappa = 1 / (1 + lr sigma)).', lower_bound=0.0
)
FEDPLUS_DELTA = flags.DEFINE_float(
    'fedplus_delta', DEFAULT_FEDPLUS_DELTA, 'fedplus_*: smoothing/personalisation threshold delta > 0.',
    lower_bound=1e-30,
)
LOCAL_INIT_MIXING = flags.DEFINE_float(
    'local_init_mixing', 0.0, 'fedplus_*: lambda in [0, 1]; local training starts at (1-lambda) w_k + lambda w.',
    lower_bound=0.0, upper_bound=1.0,
)
FEDPLUS_INIT_CLIENT_FROM = flags.DEFINE_enum(
    'fedplus_init_client_from', 'initial_global', FEDPLUS_INIT_CLIENT_FROM_VALUES,
    'fedplus_*: where a client\'s local model starts before its first round: initial_global (the initial global '
    'model, the paper\'s Algorithm 1) or current_global (the global model of that round).',
)
flags.DEFINE_enum(
    'fedplus_solver', 'irls', FEDPLUS_SOLVERS,
    'fedplus_geomed/comed: irls (reweighted means) or fixed_point (the paper\'s iteration (25)).',
)
flags.DEFINE_integer(
    'fedplus_max_iterations', DEFAULT_FEDPLUS_MAX_ITERATIONS,
    'fedplus_geomed/comed: secure sums per aggregation after the first mean.', lower_bound=1,
)
PERSONAL_LEARNING_RATE = flags.DEFINE_float(
    'personal_learning_rate', None,
    'personalized_rfa: learning rate >= 0 of the personal step (u_i); unset: --client_learning_rate, as in the '
    'paper.', lower_bound=0.0,
)
FEDPROX_MU = flags.DEFINE_float(
    'fedprox_mu', 0.01,
    'fedprox: proximal strength mu >= 0 of (mu/2)||w - w_t||^2 (0: FedAvg); needs client_learning_rate * mu < 1.',
    lower_bound=0.0,
)
CHANNEL = flags.DEFINE_enum(
    'channel', 'none', CHANNEL_NAMES,
    'mtfeel/signsgd uplink for the sign bits: none (error-free), rayleigh (per-bit BPSK over Rayleigh fading), '
    'outage (block outage, Theorem 3) or bsc (binary symmetric channel).',
)
SNR_DB = flags.DEFINE_float('snr_db', 10.0, 'rayleigh/outage channel: SNR in dB (finite).')
FLIP_PROBABILITY = flags.DEFINE_float(
    'flip_probability', 0.0, 'bsc channel: bit flip probability p in [0, 1].', lower_bound=0.0, upper_bound=1.0
)
flags.DEFINE_float(
    'outage_rate', 1.0, 'outage channel: rate r = d/B > 0 in bits per channel use.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'on_outage', 'drop', OUTAGE_ACTIONS, 'outage channel: drop the packet or receive random bits.'
)
flags.DEFINE_float(
    'alpha_learning_rate', 0.1, 'mtfeel: step mu >= 0 of the alpha update (0 freezes alpha).', lower_bound=0.0
)
flags.DEFINE_float(
    'pen_scale', 1.0, 'mtfeel: weight M sqrt((N/2) log(|Lambda|/delta)) >= 0 of the variance penalty of (7).',
    lower_bound=0.0,
)
flags.DEFINE_enum(
    'mtfeel_update_order', 'w_then_alpha', MTFEEL_UPDATE_ORDERS,
    'mtfeel: weight the signs with alpha^t (w_then_alpha, Algorithm 2) or alpha^{t+1} (the proof\'s order).',
)
flags.DEFINE_integer(
    'dde_steps', 20, 'mtfeel: discrepancy-estimation ascent steps before training (0: dhat = 0).', lower_bound=0
)
flags.DEFINE_float(
    'dde_learning_rate', 0.01, 'mtfeel: discrepancy-estimation ascent step > 0.', lower_bound=1e-30
)
flags.DEFINE_enum(
    'dde_output', 'last', DDE_OUTPUTS, 'mtfeel: discrepancy estimate at the last step or the running max.'
)
CLIENT_LR_DECAY = flags.DEFINE_float(
    'client_lr_decay', 1.0,
    'Step decay c in (0, 1] of the client learning rate: gamma_0 c^floor(t / t_0) in round t + 1 (1: constant).',
    lower_bound=1e-30, upper_bound=1.0,
)
CLIENT_LR_DECAY_ROUNDS = flags.DEFINE_integer(
    'client_lr_decay_rounds', 1, 'Rounds t_0 between two decays of the client learning rate.', lower_bound=1
)
