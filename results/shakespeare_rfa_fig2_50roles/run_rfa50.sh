#!/usr/bin/env bash
# RFA Fig. 2 at the paper's cohort (50 roles a round), issue 36 item 3. Two runs at once (FedAvg and RFA of one
# condition and seed), nice 19; a finished run (summary.json present) is skipped, an unfinished one resumes from its
# newest checkpoint (the runner's own resume).
cd "$(dirname "$0")/../.."  # the repository root
out=results/shakespeare_rfa_fig2_50roles/runs
common=(--flagfile=experiments/configs/rfa/fig2_shakespeare_lstm_data_corruption.cfg --shakespeare_source=plays
  --total_rounds=200 --clients_per_round=50 --max_client_examples=64 --max_evaluated_devices=100
  --rounds_per_eval=20 --rounds_per_checkpoint=10 --noprogress_bar --root_output_dir=$out)
for seed in 0 1 2; do
  for cond in clean omniscient data; do
    case $cond in
      clean) c=(--corruption=none --corruption_fraction=0); name=clean;;
      omniscient) c=(--corruption=omniscient --corruption_fraction=0.25); name=omniscient_rho0.25;;
      data) c=(--corruption=data --corruption_fraction=0.25); name=data_rho0.25;;
    esac
    pids=()
    for alg in fedavg rfa; do
      exp=${alg}_${name}_seed${seed}
      [ -f $out/$exp/summary.json ] && continue
      mkdir -p $out
      echo "$(date -Is) start $exp" >> $out/../wall_times.log
      ( nice -n 19 .venv/bin/python -m experiments.train "${common[@]}" "${c[@]}" --algorithm=$alg --seed=$seed \
          --experiment_name=$exp > $out/$exp.log 2>&1; s=$?; echo "$(date -Is) end $exp status $s" >> $out/../wall_times.log ) &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait $p; done
  done
done
