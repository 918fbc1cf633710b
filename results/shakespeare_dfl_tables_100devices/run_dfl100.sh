#!/usr/bin/env bash
# Delta-FL Tables 2-3 at the paper's cohort (100 devices a round), issue 36 item 3: FedAvg and Delta-FL at
# theta = 0.8 and 0.5, seeds 0-2, the GRU flagfile on the plays. Two runs at once (one per core), nice 19; a finished
# run (summary.json with `rounds` >= ROUNDS) is skipped, an unfinished one resumes from its newest checkpoint (the
# runner's own resume; a larger --total_rounds continues a finished run, whose learning-rate schedule does not depend
# on it). ROUNDS (default 200; the paper's 600 if time allows) is the horizon of every run.
cd "$(dirname "$0")/../.."  # the repository root
out=results/shakespeare_dfl_tables_100devices/runs
rounds=${ROUNDS:-200}
common=(--flagfile=experiments/configs/superquantile_fl/table2_3_shakespeare_rnn.cfg --shakespeare_source=plays
  --total_rounds=$rounds --clients_per_round=100 --max_client_examples=64 --max_evaluated_devices=100
  --rounds_per_eval=50 --rounds_per_checkpoint=10 --noprogress_bar --root_output_dir=$out)
run() {  # experiment name, flags...
  local exp=$1; shift
  # finished at this horizon: skip (a run finished at a shorter one resumes from its last checkpoint and continues)
  [ -f $out/$exp/summary.json ] && .venv/bin/python -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['rounds'] < $rounds)" $out/$exp/summary.json && return
  mkdir -p $out
  echo "$(date -Is) start $exp" >> $out/../wall_times.log
  nice -n 19 .venv/bin/python -m experiments.train "${common[@]}" "$@" --experiment_name=$exp >> $out/$exp.log 2>&1
  local status=$?  # read before any other command (a `$(date)` beside it would report its own status)
  echo "$(date -Is) end $exp status $status" >> $out/../wall_times.log
}
for seed in 0 1 2; do
  run fedavg_seed$seed --algorithm=fedavg --seed=$seed &
  run delta_fl_theta0.5_seed$seed --algorithm=delta_fl --conformity_level=0.5 --seed=$seed &
  wait
done
run delta_fl_theta0.8_seed0 --algorithm=delta_fl --conformity_level=0.8 --seed=0 &
run delta_fl_theta0.8_seed1 --algorithm=delta_fl --conformity_level=0.8 --seed=1 &
wait
run delta_fl_theta0.8_seed2 --algorithm=delta_fl --conformity_level=0.8 --seed=2
