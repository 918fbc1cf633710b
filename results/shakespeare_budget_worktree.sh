#!/usr/bin/env bash
# Issue 43: (re)starts the Shakespeare budget lanes in their own worktree, on this machine or a new one. Run from
# anywhere, after this checkout's set-up (.venv):
#   bash results/shakespeare_budget_worktree.sh [WORKTREE]      # default /work/wt/exp-pilot
# A missing worktree is made at the commit every run of issue 43 used (9bd97f1), with this checkout's .venv, the
# finished runs of results/shakespeare_budget_*/ and the queue; then each kit of
# results/shakespeare_budget_inflight/ (results/shakespeare_budget_sync.sh) whose checkpoint is newer than the
# worktree's own is put back, so that its run resumes from it. Lanes already running are left alone; START_LANES=0
# prepares the worktree without starting any.
set -euo pipefail
cd "$(dirname "$0")/.."
source results/shakespeare_budget_checkpoints.sh
main=$PWD
worktree=${1:-/work/wt/exp-pilot}
experiment_commit=9bd97f1

if [ ! -d "$worktree" ]; then
  mkdir -p "$(dirname "$worktree")"
  git worktree prune
  git worktree add --detach "$worktree" "$experiment_commit"
  ln -s "$main/.venv" "$worktree/.venv"
  for table in results/shakespeare_budget_*/; do
    table=$(basename "$table")
    [ "$table" = shakespeare_budget_inflight ] && continue
    rm -rf "$worktree/results/$table" && cp -a "results/$table" "$worktree/results/$table"
  done
  # Only into a new worktree: bash reads a running script as it goes, so a running lane's file is not rewritten.
  cp results/shakespeare_budget_queue.sh "$worktree/results/"
fi

for kit in results/shakespeare_budget_inflight/*/*/; do
  [ -d "$kit" ] || continue
  kit=${kit%/} name=$(basename "$kit") table=$(basename "$(dirname "$kit")")
  run=$worktree/results/shakespeare_budget_$table/runs/$name
  [ "$(newest_round "$kit")" -gt "$(newest_round "$run")" ] || continue
  mkdir -p "$run/checkpoints/program_state"
  cp -a "$kit"/checkpoints/program_state/round_* "$run/checkpoints/program_state/"
  cp "$kit"/{metrics.csv,run_settings.json} "$run/"
  [ -f "$kit/$name.log" ] && cp "$kit/$name.log" "$run/../"
  echo "put back $table/$name at round $(newest_round "$kit")"
done

[ "${START_LANES:-1}" = 1 ] || exit 0  # START_LANES=0: prepare the worktree only
cd "$worktree"
for lane in main second; do
  if pgrep -f "shakespeare_budget_queue.sh $lane" > /dev/null; then
    echo "lane $lane already running"
  else
    setsid nohup bash results/shakespeare_budget_queue.sh "$lane" > "/tmp/budget_queue_$lane.log" 2>&1 < /dev/null &
    echo "lane $lane started (log /tmp/budget_queue_$lane.log)"
  fi
done
