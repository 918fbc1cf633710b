#!/usr/bin/env bash
# One-command set-up: creates .venv at the repository root, installs the pinned dependency set and the
# package, then runs the main job offline: FedAvg and the recommended defence side by side on scikit-learn's
# handwritten digits, clean and under an adaptive attack (a table on stdout, a plot in /tmp/tff_robust_runs).
#   bash scripts/setup.sh            # install + main job
#   SKIP_MAIN_JOB=1 bash scripts/setup.sh   # install only (used by CI before the tests)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: '$PYTHON' not found; TensorFlow Federated 0.87 needs Python 3.9-3.11 (set PYTHON=...)." >&2
  exit 2
fi
"$PYTHON" -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 9) <= v <= (3, 11) else 1)' || {
  echo "setup: $("$PYTHON" --version) is not supported; TensorFlow Federated 0.87 needs Python 3.9-3.11." >&2
  exit 2
}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
# The lock pins every package (jax/jaxlib overridden, see overrides.txt), so no resolver runs here.
# --compile-bytecode: uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set (this kind of machine
# sets it) Python never caches one, so every process would compile TensorFlow and TFF from source at import:
# 9.3 s of CPU per `import tensorflow_federated` without the .pyc files, 3.5 s with them.
.venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python --no-deps -r requirements.lock
.venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps -e .
.venv/bin/python -c 'import tensorflow_federated, tff_robust; print("setup: tensorflow_federated", tensorflow_federated.__version__, "and tff_robust", tff_robust.__version__, "installed in .venv")' 2>/dev/null

if [ "${SKIP_MAIN_JOB:-0}" != "1" ]; then
  # What the package is for, in about a minute on 2 cores: FedAvg and the recommended defence (the registry's
  # `recommended_secure` chain) side by side on digits, clean and with 20% of the weight held by attackers running
  # the white-box line search along IPM against the deployed rule (FedAvg's worst attack in the worst-case tables).
  out=/tmp/tff_robust_runs/setup_side_by_side
  rm -rf "$out"  # set-up's own directory: a run left by an earlier set-up (other version, other flags) is replaced
  echo "setup: running the main job (FedAvg and recommended_secure on digits, clean and attacked)..."
  .venv/bin/python -m experiments.robustness_sweep --algorithms=fedavg --defences=recommended_secure \
    --corruptions='line_search(direction=ipm)' --update_fractions=0,0.2 --seeds=0 --total_rounds=20 \
    --client_epochs_per_round=5 --root_output_dir="$(dirname "$out")" --experiment_name="$(basename "$out")"
  sed -n '/^| defence/,$p' "$out/worst_case.md"
  echo "setup: plot $out/accuracy_vs_corruption.png; every run's metrics under $out/runs"
fi
