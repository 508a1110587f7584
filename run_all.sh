#!/usr/bin/env bash
# The main job: sets up the environment if needed, then runs a profile's sweeps (Tables 1-3, Figures 1-2) and writes
# results/<profile>/. Default: the 'default' profile (bundled sample data and biLM, CPU, no downloads).
#   ./run_all.sh                       # default profile
#   ./run_all.sh --profile paper       # the paper's settings (lists what to download if anything is missing)
#   ./run_all.sh --executor ray        # same sweep on Ray; see README.md for every option
set -euo pipefail
cd "$(dirname "$0")"
./setup_env.sh
mkdir -p cache/nltk/tokenizers/punkt  # silences allennlp_models' nltk download attempt (no network needed)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" NLTK_DATA="${NLTK_DATA:-$PWD/cache/nltk}" \
  WANDB_MODE="${WANDB_MODE:-offline}" HF_HOME="${HF_HOME:-$PWD/cache/hf}" \
  ALLENNLP_CACHE_ROOT="${ALLENNLP_CACHE_ROOT:-$PWD/cache/allennlp}" TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m runner "$@"
