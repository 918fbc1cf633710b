#!/usr/bin/env bash
# Issue 35: choose each defence's hyperparameters once, on the validation split (20% of every client's examples held
# out; the test set is never read), against its worst case over the whole attack suite at rho = 0.25, seed 0.
# Two sweeps at once (one per core), nice 5; the same command resumes both.
cd "$(dirname "$0")/../.."  # the repository root
export PYTHONPATH=$PWD
out=results/robustness_worst_case_digits/validation
suite='data,label_flipping,omniscient,gaussian,sign_flipping,alie_grid,ipm_grid,norm_aware(c=1.4),norm_aware(direction=ipm,c=1.4),min_max,min_max(direction=std),min_max(direction=sign),min_sum,min_sum(direction=std),min_sum(direction=sign),fang_trimmed_mean,fang_krum,mimic,rop,rop(radius=0.3),line_search,line_search(direction=ipm)'
common=(--task=digits --validation_fraction=0.2 --total_rounds=30 --clients_per_round=10 --client_epochs_per_round=5
  --client_batch_size=16 --client_learning_rate=0.1 --data_fractions=0,0.25 --update_fractions=0,0.25 --seeds=0
  "--corruptions=$suite" --root_output_dir=$out)
nice -n 5 .venv/bin/python -m experiments.robustness_sweep "${common[@]}" --experiment_name=a --algorithms= \
  '--defences=centered_clipping(tau=0.1);centered_clipping(tau=0.3);centered_clipping(tau=1);norm_filter(k=1.5)>centered_clipping(tau=0.3);norm_filter(k=2)>centered_clipping(tau=0.3)' \
  > $out.a.log 2>&1 &
nice -n 5 .venv/bin/python -m experiments.robustness_sweep "${common[@]}" --experiment_name=b --algorithms= \
  '--defences=arc>centered_clipping(tau=0.1);arc>centered_clipping(tau=0.3);arc>centered_clipping(tau=1);arc>gm;bucketing(s=2)>centered_clipping(tau=0.3)' \
  > $out.b.log 2>&1 &
wait
