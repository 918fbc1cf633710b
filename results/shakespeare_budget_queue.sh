#!/usr/bin/env bash
# Issue 43's runs at the budget the pilot chose on validation data (results/shakespeare_budget_pilot/README.md), in
# the order that gives a first answer to each question soonest: the test-split check of the budget
# (shakespeare_budget_test/run.sh), then seed 0 of RFA Fig. 2, the defence table (item 3), the Delta-FL pilot's
# choice continued to 80 rounds on validation data, seed 0 of Delta-FL Tables 2-3, RFA and FedAvg at rho = 0.1
# omniscient, then seeds 1 and 2 of both grids.
#   RFA's LSTM: 50 roles a round, at most 1,500 windows a role a round, 80 rounds, gamma_0 = 1.28, C = 1 (constant);
#   Delta-FL's GRU: 100 roles a round, the same cap, gamma_0 = 1.28, C = 1, for 40 or 80 rounds: 80 if the pilot's
#   validation run, continued from 40 to 80 rounds, lowered its test-device error mean (100 validation devices) by at
#   least 1 point, else 40 (a rule fixed before that run; the test-split check missed <= 55% by half a point at 40
#   rounds, results/shakespeare_budget_test/README.md). Runs made for 40 rounds are then continued to 80.
# The flagfiles' model, batch and local epoch (1) are kept; the test split is evaluated every 10 rounds over every
# test window (RFA) or every test device (Delta-FL). One run at a time, nice 19, a checkpoint every 5 rounds: the same
# command skips finished runs (a summary.json of at least the run's --total_rounds) and resumes an unfinished one from
# its newest checkpoint.
# A run that two tables share is linked, not run twice: the clean FedAvg runs of seed 0 are the test-split check's
# runs (same flags), RFA's clean seed-0 run is both RFA Fig. 2's and the defence table's.
# Two lanes share the work (2026-11-29: one run alone left ~20% of the 2 cores idle, in its single-threaded Python
# between the worker's computations): `main` (the order above) and `second` (the Delta-FL horizon, seed 0 of the
# Delta-FL tables, RFA and FedAvg at rho = 0.1, then seeds 2 and 1 of both grids: the main lane's from the other
# end). A run is locked while one lane trains it (flock on runs/.locks/<name>); the other lane skips it, except the
# horizon's run, which both wait for.
# Run from the repository root of a worktree:
#   setsid nohup bash results/shakespeare_budget_queue.sh main > /tmp/budget_queue.log 2>&1 < /dev/null &
#   setsid nohup bash results/shakespeare_budget_queue.sh second > /tmp/budget_queue2.log 2>&1 < /dev/null &
cd "$(dirname "$0")/.."  # the repository root
# nice 19 alone does not make the runs yield to other work here: with sched_autogroup (on in this kernel) `setsid`
# starts a task group of its own, groups share the cores equally whatever their tasks' nice, and nice orders tasks
# only within a group (found 2026-11-29: a test suite beside the lanes got a third of the cores). So the group is
# lowered too.
[ -w /proc/self/autogroup ] && echo 19 > /proc/self/autogroup

rfa_flags=(--flagfile=experiments/configs/rfa/fig2_shakespeare_lstm_data_corruption.cfg --clients_per_round=50
  --total_rounds=80 --max_client_examples=1500 --client_learning_rate=1.28 --client_lr_decay=1)
dfl_rounds=40  # until dfl_horizon says otherwise
dfl_flags() {  # the Delta-FL grid's flags at $1 rounds (default dfl_rounds), into dfl
  dfl=(--flagfile=experiments/configs/superquantile_fl/table2_3_shakespeare_rnn.cfg --clients_per_round=100
    --total_rounds=${1:-$dfl_rounds} --client_lr_decay_rounds=10 --max_client_examples=1500
    --client_learning_rate=1.28 --client_lr_decay=1)
}
clean=(--corruption=none --corruption_fraction=0)

finished() {  # run directory, flags...: whether its summary.json records at least the flags' --total_rounds
  local dir=$1 rounds=0 flag; shift
  for flag; do case $flag in --total_rounds=*) rounds=${flag#*=};; esac; done
  [ -f $dir/summary.json ] && .venv/bin/python -c \
    "import json, sys; sys.exit(json.load(open(sys.argv[1]))['rounds'] < int(sys.argv[2]))" $dir/summary.json $rounds
}
lock() {  # results directory, experiment name: opens the run's lock file as fd $lock_fd
  mkdir -p results/$1/runs/.locks
  exec {lock_fd}> results/$1/runs/.locks/$2
}
run() {  # results directory, experiment name, flags... (last: they override the defaults here)
  local table=$1 out=results/$1/runs exp=$2 lock_fd; shift 2
  finished $out/$exp "$@" && return
  lock $table $exp
  flock -n $lock_fd || { exec {lock_fd}>&-; return; }  # the other lane is training it
  finished $out/$exp "$@" && { exec {lock_fd}>&-; return; }  # the other lane finished it meanwhile
  echo "$(date -Is) start $exp" >> $out/../wall_times.log
  nice -n 19 .venv/bin/python -m experiments.train --shakespeare_source=plays --rounds_per_eval=10 \
    --rounds_per_checkpoint=5 --noprogress_bar --root_output_dir=$out --experiment_name=$exp "$@" >> $out/$exp.log 2>&1
  local status=$?  # read before any other command
  echo "$(date -Is) end $exp status $status" >> $out/../wall_times.log
  exec {lock_fd}>&-
}
wait_run() {  # results directory, experiment name: returns once no lane trains the run
  local lock_fd
  lock $1 $2
  flock $lock_fd
  exec {lock_fd}>&-
}
link_run() {  # results directory, experiment name, the same run's directory relative to results/
  mkdir -p results/$1/runs
  [ -e results/$1/runs/$2 ] || ln -s ../../$3 results/$1/runs/$2
}

rfa_fig2() {  # seed
  local seed=$1
  for alg in fedavg rfa; do
    if [ $alg$seed = fedavg0 ]; then
      link_run shakespeare_budget_rfa_fig2 fedavg_clean_seed0 shakespeare_budget_test/runs/rfa_fedavg_cap1500_lr1.28_decay1
    else
      run shakespeare_budget_rfa_fig2 ${alg}_clean_seed$seed "${rfa_flags[@]}" "${clean[@]}" --algorithm=$alg --seed=$seed
    fi
    run shakespeare_budget_rfa_fig2 ${alg}_omniscient_rho0.25_seed$seed "${rfa_flags[@]}" --algorithm=$alg \
      --corruption=omniscient --corruption_fraction=0.25 --seed=$seed
    run shakespeare_budget_rfa_fig2 ${alg}_data_rho0.25_seed$seed "${rfa_flags[@]}" --algorithm=$alg \
      --corruption=data --corruption_fraction=0.25 --seed=$seed
  done
}
dfl_tables() {  # seed
  local seed=$1
  dfl_flags
  if [ $seed = 0 ]; then  # the test-split check's run (continued to dfl_rounds if it ran fewer)
    run shakespeare_budget_test dfl_fedavg_cap1500_lr1.28_decay1 "${dfl[@]}" --algorithm=fedavg --seed=0
    link_run shakespeare_budget_dfl_tables fedavg_seed0 shakespeare_budget_test/runs/dfl_fedavg_cap1500_lr1.28_decay1
  else
    run shakespeare_budget_dfl_tables fedavg_seed$seed "${dfl[@]}" --algorithm=fedavg --seed=$seed
  fi
  # theta = 0.5 first (since 2026-12-05 16:00, with seeds 1-2 left): the Delta-FL claim's verdict needs its seeds
  for theta in 0.5 0.8; do
    run shakespeare_budget_dfl_tables delta_fl_theta${theta}_seed$seed "${dfl[@]}" --algorithm=delta_fl \
      --conformity_level=$theta --seed=$seed
  done
}
defence_table() {  # issue 43 item 3: rho = 0.2, seed 0
  local attack name
  for attack in none 'norm_aware(c=1.4)' 'ipm(eps=2)' 'line_search(direction=ipm)'; do
    name=$(echo "$attack" | tr -d '()=,' | sed s/^none$/clean/)
    for defence in recommended_secure rfa; do
      if [ $defence = rfa ] && [ "$attack" = none ]; then  # RFA clean, seed 0: RFA Fig. 2's run
        link_run shakespeare_budget_defence rfa_clean shakespeare_budget_rfa_fig2/runs/rfa_clean_seed0
        continue
      fi
      if [ $defence = rfa ]; then d=(--algorithm=rfa); else d=(--algorithm=fedavg --defence=recommended_secure); fi
      if [ "$attack" = none ]; then a=("${clean[@]}"); else a=(--corruption="$attack" --corruption_fraction=0.2); fi
      run shakespeare_budget_defence ${defence}_${name}$([ "$attack" = none ] || echo _rho0.2) "${rfa_flags[@]}" "${d[@]}" "${a[@]}" --seed=0
    done
  done
  # FedAvg clean, seed 0 (its clean cell): the test-split check's run
  link_run shakespeare_budget_defence fedavg_clean shakespeare_budget_test/runs/rfa_fedavg_cap1500_lr1.28_decay1
  run shakespeare_budget_defence fedavg_norm_awarec1.4_rho0.2 "${rfa_flags[@]}" --algorithm=fedavg \
    --corruption='norm_aware(c=1.4)' --corruption_fraction=0.2 --seed=0
}

extend_dfl_pilot() {
  # Delta-FL's horizon, chosen on validation data: the pilot's chosen run (results/shakespeare_budget_pilot/)
  # continued from its round-40 checkpoint to 80 rounds, its learning rate constant. Its test-split check missed the
  # issue's target by half a point at round 40 (shakespeare_budget_test/README.md).
  dfl_flags 80
  run shakespeare_budget_pilot dfl_cap1500_lr1.28_decay1 "${dfl[@]}" --algorithm=fedavg --validation_fraction=0.2 \
    --max_evaluated_devices=100 --rounds_per_eval=5 --seed=0
  wait_run shakespeare_budget_pilot dfl_cap1500_lr1.28_decay1  # if the other lane is continuing it
}

dfl_horizon() {  # prints Delta-FL's rounds: 80 if the continued pilot's validation error mean fell >= 1 point, else 40
  .venv/bin/python -c "
import csv, sys
error = {int(r['round']): float(r['eval/error_mean']) for r in csv.DictReader(open(sys.argv[1])) if r['eval/error_mean']}
print(80 if 80 in error and error[80] <= error[40] - 0.01 else 40)" \
    results/shakespeare_budget_pilot/runs/dfl_cap1500_lr1.28_decay1/metrics.csv
}

rho_0_1() {  # RFA and FedAvg at rho = 0.1 omniscient, seed 0
  for alg in fedavg rfa; do
    run shakespeare_budget_rfa_fig2 ${alg}_omniscient_rho0.1_seed0 "${rfa_flags[@]}" --algorithm=$alg \
      --corruption=omniscient --corruption_fraction=0.1 --seed=0
  done
}
choose_dfl_horizon() {
  extend_dfl_pilot
  dfl_rounds=$(dfl_horizon)
  echo "$(date -Is) Delta-FL horizon from the validation pilot: $dfl_rounds rounds" >> results/shakespeare_budget_pilot/wall_times.log
}

case ${1:-main} in
  main)
    bash results/shakespeare_budget_test/run.sh
    rfa_fig2 0
    defence_table
    choose_dfl_horizon
    dfl_tables 0
    rho_0_1
    for seed in 1 2; do rfa_fig2 $seed; done
    for seed in 1 2; do dfl_tables $seed; done;;
  second)
    choose_dfl_horizon
    dfl_tables 0
    rho_0_1
    for seed in 2 1; do rfa_fig2 $seed; done
    for seed in 2 1; do dfl_tables $seed; done;;
  *) echo "usage: $0 [main|second]" >&2; exit 2;;
esac
