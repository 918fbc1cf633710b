"""Exit statuses of the runner and of the sweep and table binaries besides 0 (and 1, an unexpected error).

A module of its own, with no flags, so that every binary can use them (`experiments.train_flags` defines the
runner's flags, which the sweeps define again under their own meaning).
"""

from tff_robust.command_line import finite_flags

REFUSED = finite_flags.REFUSED  # a flag (NaN, inf, out of range) or the run's directory was refused, one line
# the global model became non-finite (summary.json has `nonfinite_model_round`), or no client's update counted in
# --stop_after_rounds_without_update consecutive rounds (`no_counted_update_stop_round`)
NONFINITE_MODEL = 3
WORKER_EXITED = 4  # the run's own TFF worker died (killed, out of memory)
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process that Ctrl-C ended
