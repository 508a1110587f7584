#!/usr/bin/env bash
# The main job: sets up the environment if needed, then runs a profile's sweeps (Tables 1-3, Figures 1-2) and writes
# results/<profile>/. Default: the 'default' profile (bundled sample data and biLM, CPU, no downloads).
#   ./run_all.sh                       # default profile
#   ./run_all.sh --profile paper       # the paper's settings (lists what to download if anything is missing)
#   ./run_all.sh --executor ray        # same sweep on Ray; see docs/runner.md for every option
set -euo pipefail
cd "$(dirname "$0")"
./setup_env.sh
source ./env.sh
ELMO_MAIN_COMMAND=./run_all.sh exec .venv/bin/python -m runner "$@"
