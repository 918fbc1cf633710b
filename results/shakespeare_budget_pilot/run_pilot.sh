#!/usr/bin/env bash
# Issue 43 item 1: choose the per-round budget and the learning-rate schedule of the papers' Shakespeare tasks on
# a validation split (20% of each training role's windows, --validation_fraction=0.2), clean FedAvg only, as the
# RFA paper tunes gamma_0 and C (App. D.2.3: gamma_t = gamma_0 C^floor(t/t_0), grid search for a fixed horizon).
# The paper's cohort, batch, local epochs and model are kept (the flagfiles). One run at a time (a worker uses both
# cores), nice 19; a finished run (summary.json) is skipped, an unfinished one resumes from its newest checkpoint.
#   RFA LSTM, 50 roles, cap 1500 windows a role a round, 80 rounds, t_0 = 20: gamma_0 in {0.32, 0.64, 1.28} x C in {1, 0.5},
#     and gamma_0 = 2.56 at C = 1
#   Delta-FL GRU, 100 roles, cap 1500, 40 rounds, t_0 = 10: gamma_0 in {0.32, 0.64, 1.28} x C in {1, 0.5}
#   then, at each task's best (gamma_0, C) by final validation accuracy: the same run with every window (no cap),
#   to see what the cap costs.
cd "$(dirname "$0")/../.."  # the repository root
out=results/shakespeare_budget_pilot/runs
mkdir -p $out
rfa=(--flagfile=experiments/configs/rfa/fig2_shakespeare_lstm_data_corruption.cfg --algorithm=fedavg
  --corruption=none --corruption_fraction=0 --clients_per_round=50 --total_rounds=80 --client_lr_decay_rounds=20)
dfl=(--flagfile=experiments/configs/superquantile_fl/table2_3_shakespeare_rnn.cfg --algorithm=fedavg
  --clients_per_round=100 --total_rounds=40 --client_lr_decay_rounds=10)
common=(--shakespeare_source=plays --validation_fraction=0.2 --max_evaluated_devices=100 --rounds_per_eval=5
  --rounds_per_checkpoint=5 --seed=0 --noprogress_bar --root_output_dir=$out)
run() {  # experiment name, flags...
  local exp=$1; shift
  [ -f $out/$exp/summary.json ] && return
  echo "$(date -Is) start $exp" >> $out/../wall_times.log
  nice -n 19 .venv/bin/python -m experiments.train "$@" "${common[@]}" --experiment_name=$exp >> $out/$exp.log 2>&1
  local status=$?
  echo "$(date -Is) end $exp status $status" >> $out/../wall_times.log
}
best() {  # task prefix -> "gamma0 C" of the finished run with the highest final validation accuracy
  .venv/bin/python - "$out" "$1" <<'PY'
import json, pathlib, sys
runs = [p for p in pathlib.Path(sys.argv[1]).glob(sys.argv[2] + '_cap1500_lr*/summary.json')]
best = max(runs, key=lambda p: json.loads(p.read_text())['eval/accuracy'])
_, _, lr, decay = best.parent.name.split('_')
print(lr[2:], decay[5:])
PY
}
# Order (changed 2026-11-28 after the three C = 1 RFA runs): the Delta-FL runs at C = 1 first (their cost and
# learning are the larger unknown), then RFA at C = 0.5, then gamma_0 = 2.56 at C = 1 (1.28 was the best of the
# first three, at the grid's edge), then Delta-FL at C = 0.5.
rfa_run() { run rfa_cap1500_lr$1_decay$2 "${rfa[@]}" --max_client_examples=1500 --client_learning_rate=$1 --client_lr_decay=$2; }
dfl_run() { run dfl_cap1500_lr$1_decay$2 "${dfl[@]}" --max_client_examples=1500 --client_learning_rate=$1 --client_lr_decay=$2; }
for lr in 0.32 0.64 1.28; do rfa_run $lr 1; done
rfa_run 0.32 0.5
for lr in 0.32 0.64 1.28; do dfl_run $lr 1; done
for lr in 0.64 1.28; do rfa_run $lr 0.5; done
rfa_run 2.56 1
for lr in 0.32 0.64 1.28; do dfl_run $lr 0.5; done
read lr decay < <(best rfa)
run rfa_nocap_lr${lr}_decay${decay} "${rfa[@]}" --client_learning_rate=$lr --client_lr_decay=$decay
read lr decay < <(best dfl)
run dfl_nocap_lr${lr}_decay${decay} "${dfl[@]}" --client_learning_rate=$lr --client_lr_decay=$decay
