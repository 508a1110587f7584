#!/usr/bin/env bash
# The test command: sets up .venv if needed, runs the linter, then the whole test suite (CPU only, no network, no
# downloads), on every core. Arguments go to pytest: the fast lane is ./run_tests.sh -m "not slow" (pyproject.toml's
# markers).
set -euo pipefail
cd "$(dirname "$0")"
./setup_env.sh
scratch=$(mktemp -d)  # every tool's caches and logs out of $HOME and the repository
trap 'rm -rf "$scratch"' EXIT
export ELMO_CACHE_ROOT=$scratch WANDB_DIR=$scratch WANDB_CONFIG_DIR=$scratch WANDB_CACHE_DIR=$scratch \
  HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
source ./env.sh
venv=${ELMO_VENV:-.venv}  # where setup_env.sh built it
"$venv/bin/ruff" check --quiet .  # the linter first: its rules are pyproject.toml's [tool.ruff]
# On every core (pytest-xdist; CI has 2), a test file to a worker: a module's fixtures (a runner's sweep, a pretrained
# biLM, the one-node SLURM) are made once. ELMO_TEST_WORKERS=N sets the number of workers, 0 runs it in this process.
workers=${ELMO_TEST_WORKERS:-$(nproc)}
[[ $workers =~ ^[0-9]+$ ]] || { echo "run_tests.sh: ELMO_TEST_WORKERS: expected a number, found '$workers'" >&2; exit 2; }
(( workers > 1 )) || workers=0
exec "$venv/bin/python" -m pytest -q -n "$workers" --dist loadfile "$@"
