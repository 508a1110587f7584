#!/usr/bin/env bash
# The test command: sets up .venv if needed, then runs the whole test suite (CPU only, no network, no downloads).
set -euo pipefail
cd "$(dirname "$0")"
./setup_env.sh
# keep every tool's caches and logs out of $HOME and offline
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/nltk/tokenizers/punkt"  # silences allennlp_models' nltk download attempt
export WANDB_MODE=offline WANDB_DIR=$scratch WANDB_CONFIG_DIR=$scratch WANDB_CACHE_DIR=$scratch \
  ALLENNLP_CACHE_ROOT=$scratch/allennlp HF_HOME=$scratch/hf HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  NLTK_DATA=$scratch/nltk TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
