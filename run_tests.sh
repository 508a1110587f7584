#!/usr/bin/env bash
# The test command: sets up .venv if needed, then runs the whole test suite (CPU only, no network, no downloads).
set -euo pipefail
cd "$(dirname "$0")"
./setup_env.sh
scratch=$(mktemp -d)  # every tool's caches and logs out of $HOME and the repository
trap 'rm -rf "$scratch"' EXIT
export ELMO_CACHE_ROOT=$scratch WANDB_DIR=$scratch WANDB_CONFIG_DIR=$scratch WANDB_CACHE_DIR=$scratch \
  HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
source ./env.sh
exec .venv/bin/python -m pytest -q "$@"
