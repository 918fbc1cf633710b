#!/usr/bin/env bash
# One-command set-up: creates .venv at the repository root, installs the pinned dependency set and the
# package, then runs the main job on its offline default (RFA on scikit-learn's handwritten digits).
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
  echo "setup: running the main job (RFA on the offline digits task)..."
  # --overwrite: this directory is set-up's own; a run left there by an earlier set-up (perhaps of another
  # version, with other flags) is replaced rather than refused.
  .venv/bin/python -m experiments.train --task=digits --algorithm=rfa \
    --root_output_dir=/tmp/tff_robust_runs --experiment_name=setup_rfa_digits --overwrite
fi
