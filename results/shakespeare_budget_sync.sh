#!/usr/bin/env bash
# Issue 43: brings what the experiment worktree's lanes (results/shakespeare_budget_queue.sh) have made into this
# checkout, then rebuilds the reports. Run from anywhere:
#   bash results/shakespeare_budget_sync.sh [WORKTREE]      # default /work/wt/exp-pilot
# - A finished run (a summary.json, its lock not held): metrics.csv, summary.json, run_settings.json, devices.csv and
#   its log, into results/shakespeare_budget_<table>/runs/ (no checkpoints, weights or TensorBoard events); a run
#   shared by two tables stays a symbolic link.
# - An unfinished run: its newest checkpoint, metrics.csv, run_settings.json and log, into
#   results/shakespeare_budget_inflight/<table>/<run>/. The machine under this checkout can be replaced between
#   sessions, and the worktree's checkpoints with it (seen twice: 2026-11-29 and 2026-12-05, each losing up to
#   80 minutes of a run); results/shakespeare_budget_worktree.sh puts a kit back, and the run resumes from it.
#   A kit of a run that has since finished is removed.
# Sessions commit what this changes.
set -euo pipefail
cd "$(dirname "$0")/.."
source results/shakespeare_budget_checkpoints.sh
worktree=${1:-/work/wt/exp-pilot}
inflight=results/shakespeare_budget_inflight
tables=(pilot test rfa_fig2 dfl_tables defence)

copy_if_present() {  # destination directory, files...
  local destination=$1 file; shift
  for file; do [ -f "$file" ] && cp "$file" "$destination/"; done; return 0
}

for table in "${tables[@]}"; do
  source=$worktree/results/shakespeare_budget_$table target=results/shakespeare_budget_$table
  [ -d "$source/runs" ] || continue
  mkdir -p "$target/runs"
  copy_if_present "$target" "$source/wall_times.log"
  for run in "$source"/runs/*/; do
    run=${run%/} name=$(basename "$run")
    if [ -L "$run" ]; then cp -P "$run" "$target/runs/"; continue; fi
    lock=$source/runs/.locks/$name
    if [ -f "$run/summary.json" ] && { [ ! -e "$lock" ] || flock -n "$lock" true; }; then
      mkdir -p "$target/runs/$name"
      copy_if_present "$target/runs/$name" "$run"/{metrics.csv,summary.json,run_settings.json,devices.csv}
      copy_if_present "$target/runs" "$source/runs/$name.log"
      rm -rf "${inflight:?}/$table/$name"
      continue
    fi
    round=$(newest_round "$run")
    [ "$round" -gt 0 ] || continue
    kit=$inflight/$table/$name
    rm -rf "$kit" && mkdir -p "$kit/checkpoints/program_state"
    cp -a "$run/checkpoints/program_state/round_$round" "$kit/checkpoints/program_state/"
    copy_if_present "$kit" "$run"/{metrics.csv,run_settings.json} "$source/runs/$name.log"
  done
done
find "$inflight" -mindepth 1 -type d -empty -delete 2>/dev/null || true

for table in rfa_fig2 dfl_tables; do
  .venv/bin/python -m experiments.paper_report --inputs=results/shakespeare_budget_$table/runs \
    --output_dir=results/shakespeare_budget_$table
done
.venv/bin/python -m experiments.worst_case_tables --runs=results/shakespeare_budget_defence/runs \
  --output=results/shakespeare_budget_defence/worst_case.md
