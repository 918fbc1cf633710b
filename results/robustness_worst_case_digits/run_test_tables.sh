#!/usr/bin/env bash
# Issue 35 item 4: worst-case tables on the test split with the hyperparameters chosen once on validation
# (results/robustness_worst_case_digits/validation: norm_filter(k=2)>centered_clipping(tau=0.3) for the chain,
# tau = 0.1 for centered clipping alone and after ARC). Each table is one robustness_sweep directory, resumable (the
# same command continues from its results.csv) and grown phase by phase (a grown grid adds only its new runs):
#   1. the chosen defence, 5 local epochs, rho 0.2 and 0.25, seeds 0-2 (the acceptance figure);
#   2. the same at 1 local epoch (the runner's default);
#   3. the baselines beside it (FedAvg, RFA, centered clipping, ARC + centered clipping) in the same tables;
#   4. rho = 0.1 and Dirichlet(0.1).
# Every sweep skips its finished runs, so the script can be rerun as it is until every table is done (a finished
# sweep only rewrites its tables). The order is that of the third session (2026-11-27), after phases 1-2 and the
# 5-epoch baselines had finished: the 1-epoch baselines, then at rho = 0.1 and on Dirichlet(0.1) the secure defences
# beside the chain (centered clipping, ARC + centered clipping) before FedAvg and RFA.
# Two sweeps at once (one per core), nice 5.
cd "$(dirname "$0")/../.."  # the repository root
export PYTHONPATH=$PWD
out=results/robustness_worst_case_digits
suite='data,label_flipping,omniscient,gaussian,sign_flipping,alie_grid,ipm_grid,norm_aware(c=1.4),norm_aware(direction=ipm,c=1.4),min_max,min_max(direction=std),min_max(direction=sign),min_sum,min_sum(direction=std),min_sum(direction=sign),fang_trimmed_mean,fang_krum,mimic,rop,rop(radius=0.3),line_search,line_search(direction=ipm)'
chosen='norm_filter(k=2)>centered_clipping(tau=0.3)'
baselines="$chosen;centered_clipping(tau=0.1);arc>centered_clipping(tau=0.1)"
common=(--task=digits --total_rounds=30 --clients_per_round=10 --client_batch_size=16 --client_learning_rate=0.1
  --seeds=0,1,2 "--corruptions=$suite" --root_output_dir=$out)
sweep() {  # name, rho, extra flags...
  local name=$1 rho=$2; shift 2
  nice -n 5 .venv/bin/python -m experiments.robustness_sweep "${common[@]}" --experiment_name=$name \
    --data_fractions=0,$rho --update_fractions=0,$rho "$@" >> $out/$name.log 2>&1
}
pair() {  # phase flags for both acceptance rhos
  sweep dirichlet0.5_epochs$1_rho0.2 0.2 --client_epochs_per_round=$1 "${@:2}" &
  sweep dirichlet0.5_epochs$1_rho0.25 0.25 --client_epochs_per_round=$1 "${@:2}" &
  wait
}
lane() {  # one sweep after another on one core
  for step in "$@"; do eval "$step"; done
}
pair 5 --algorithms= "--defences=$chosen"
pair 1 --algorithms= "--defences=$chosen"
lane "sweep dirichlet0.5_epochs5_rho0.1 0.1 --client_epochs_per_round=5 --algorithms= '--defences=$chosen'" \
     "sweep dirichlet0.5_epochs5_rho0.2 0.2 --client_epochs_per_round=5 --algorithms=fedavg,rfa '--defences=$baselines'" &
lane "sweep dirichlet0.1_epochs5_rho0.25 0.25 --client_epochs_per_round=5 --label_concentration=0.1 --algorithms= '--defences=$chosen'" \
     "sweep dirichlet0.5_epochs5_rho0.25 0.25 --client_epochs_per_round=5 --algorithms=fedavg,rfa '--defences=$baselines'" &
wait
pair 1 --algorithms=fedavg,rfa "--defences=$baselines"
for algorithms in '' fedavg,rfa; do  # the secure defences first, then FedAvg and RFA
  sweep dirichlet0.5_epochs5_rho0.1 0.1 --client_epochs_per_round=5 --algorithms=$algorithms "--defences=$baselines" &
  sweep dirichlet0.1_epochs5_rho0.25 0.25 --client_epochs_per_round=5 --label_concentration=0.1 \
    --algorithms=$algorithms "--defences=$baselines" &
  wait
done
