#!/usr/bin/env bash
# Issue 46 item 4: the backdoor table on digits (README.md here has the settings, grids and criterion).
#   1. validation (--validation_fraction=0.2; the test set is never read): every setting of the grids below, FedAvg
#      beside them, at rho = $VALIDATION_RHO, seed 0, $ROUNDS rounds; experiments.backdoor_report chooses each
#      family's setting (the highest clean validation accuracy among the settings whose worst validation ASR is
#      within 0.05 of the family's lowest) into validation/chosen.txt;
#   2. the chain of the chosen RLR and weak-DP settings, rlr(theta*)>weak_dp(m*,sigma*), on the same validation runs;
#   3. the test table: FedAvg, RFA, recommended_secure and every chosen chain, rho in $RHOS, seeds $SEEDS, the
#      attackers in rounds 1..$ROUNDS and honest for $AFTER more (the ASR $AFTER rounds after they stop).
# Each stage is one robustness_sweep directory: the same command resumes it (finished runs are kept, a grown grid adds
# only its new runs), so the script can be rerun as it is until the table is done. One sweep at a time: one TFF
# worker already uses both cores (NOTES.md: two unpinned workers on 2 cores are slower than one). nice 19.
# Every setting can be overridden from the environment (DRY_RUN=1 prints the estimate only), e.g. the smoke test of the script's path (README):
#   OUT=/tmp/backdoor_smoke ROUNDS=1 AFTER=1 EPOCHS=1 SEEDS=0 RHOS=0.1 ATTACKS='backdoor(size=4)' \
#     GRID_WEAK_DP='weak_dp(m=1,sigma=0.001)' GRID_RLR='rlr(theta=4)>mean' GRID_FLAME='flame' \
#     bash results/backdoor_table/run_table.sh
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
export PYTHONPATH=$PWD
out=${OUT:-results/backdoor_table}
rounds=${ROUNDS:-40}         # rounds with attackers (validation: the whole run)
after=${AFTER:-20}           # honest rounds after them (test only)
epochs=${EPOCHS:-5}
seeds=${SEEDS:-0,1,2}
rhos=${RHOS:-0.05,0.1}
validation_rho=${VALIDATION_RHO:-0.1}
# The targeted attacks: data, not code (any spec of tff_robust.core.attacks.targeted_catalog, comma-separated).
attacks=${ATTACKS:-'backdoor(size=4),model_replacement(size=4),constrain_and_scale(size=4),neurotoxin(size=4)'}
grid_weak_dp=${GRID_WEAK_DP:-'weak_dp(m=0.25,sigma=0.001);weak_dp(m=0.25,sigma=0.01);weak_dp(m=0.5,sigma=0.001);weak_dp(m=0.5,sigma=0.01);weak_dp(m=1,sigma=0.001);weak_dp(m=1,sigma=0.01)'}
grid_rlr=${GRID_RLR:-'rlr(theta=2)>mean;rlr(theta=4)>mean;rlr(theta=6)>mean'}
grid_flame=${GRID_FLAME:-'flame(lambda=0.001);flame(lambda=0.01)'}
# Cost model of the estimate printed below (README: FedAvg's two validation runs took about 40 s for 80 rounds,
# builds included; RFA, FLAME and the chains cost more a round): seconds a round, and a run's own (builds, evaluations).
seconds_per_round=${SECONDS_PER_ROUND:-1}
seconds_per_run=${SECONDS_PER_RUN:-10}
mkdir -p "$out"

count() {  # the number of ';'-separated specs of $1
  tr ';' '\n' <<< "$1" | grep -c .
}
num_attacks=$(.venv/bin/python -c "import sys; from tff_robust.core.attacks import catalog; print(len(catalog.split_specs(sys.argv[1])))" "$attacks")
num_seeds=$(tr ',' '\n' <<< "$seeds" | grep -c .)
num_rhos=$(tr ',' '\n' <<< "$rhos" | grep -c .)
num_candidates=$(( $(count "$grid_weak_dp") + $(count "$grid_rlr") + $(count "$grid_flame") ))
validation_runs=$(( (num_candidates + 2) * (1 + num_attacks) ))  # + FedAvg and the chain
test_runs=$(( 7 * num_seeds * (1 + num_attacks * num_rhos) ))     # FedAvg, RFA, recommended_secure, 3 chosen, the chain
hours() {  # runs, rounds a run
  awk "BEGIN {printf \"%.1f\", $1 * ($2 * $seconds_per_round + $seconds_per_run) / 3600}"
}
echo "validation: $validation_runs runs of $rounds rounds (~$(hours $validation_runs "$rounds") h); test: $test_runs" \
  "runs of $((rounds + after)) rounds (~$(hours $test_runs $((rounds + after))) h), at ~$seconds_per_round s a round" \
  "and $seconds_per_run s a run; finished runs are skipped"
if [ -n "${DRY_RUN:-}" ]; then exit 0; fi  # DRY_RUN=1: the estimate only

common=(--task=digits --clients_per_round=10 --client_epochs_per_round="$epochs" --client_batch_size=16
  --client_learning_rate=0.1 --server_learning_rate=1 "--corruptions=$attacks" --root_output_dir="$out")
validation=(--validation_fraction=0.2 --total_rounds="$rounds" --update_fractions=0,"$validation_rho" --seeds=0
  --experiment_name=validation --algorithms=fedavg)
sweep() {  # log name, flags...
  local log=$1; shift
  echo "$(date '+%F %T') $log: robustness_sweep $*" >> "$out/$log.log"
  nice -n 19 .venv/bin/python -m experiments.robustness_sweep "${common[@]}" "$@" >> "$out/$log.log" 2>&1
}
report() {  # flags of experiments.backdoor_report
  nice -n 19 .venv/bin/python -m experiments.backdoor_report "$@"
}

# 1. validation of the grids, and the choice
grid="$grid_weak_dp;$grid_rlr;$grid_flame"
sweep validation "${validation[@]}" "--defences=$grid"
report --results="$out/validation/results.csv" --choose_fraction="$validation_rho" > /dev/null
weak_dp=$(grep '^weak_dp' "$out/validation/chosen.txt")
rlr=$(grep '^rlr' "$out/validation/chosen.txt" | grep '>mean$')
chain="${rlr%>mean}>$weak_dp"
# 2. their chain on validation, and the choice again (chosen.txt then lists the chain too)
sweep validation "${validation[@]}" "--defences=$grid;$chain"
report --results="$out/validation/results.csv" --choose_fraction="$validation_rho"
# 3. the test table with the chosen settings
chosen=$(paste -sd ';' "$out/validation/chosen.txt")
echo "test defences: recommended_secure;$chosen"
sweep test --total_rounds=$((rounds + after)) --rounds_after_attack="$after" --update_fractions=0,"$rhos" \
  --seeds="$seeds" --experiment_name=test --algorithms=fedavg,rfa "--defences=recommended_secure;$chosen"
report --results="$out/test/results.csv"
echo "done: $out/test/backdoor.md, $out/test/backdoor_asr.png"
