# Sourced by results/shakespeare_budget_sync.sh and results/shakespeare_budget_worktree.sh.

newest_round() {  # run directory: the round N of its newest checkpoint (checkpoints/program_state/round_N), 0 if none
  ls -d "$1"/checkpoints/program_state/round_* 2>/dev/null | sed 's/.*round_//' | sort -n | tail -1 | grep . || echo 0
}
