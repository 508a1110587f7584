#!/usr/bin/env bash
# The suite's checks on a GPU machine, in one go (docs/runner.md#gpus): wandb's service alone, Table 1 of the tiny
# default profile trained on the GPU by the runner (allennlp + tasks + ELMo), the paper profile's --check on stand-in
# inputs with a biLM of the released shape (its GPU-hour timing), the biLM fine-tuning of the paper profile on the GPU
# (bfloat16), the GPU-only tests, then the whole test suite with what time is left.
#
#   source env.sh; PYTHON=.venv/bin/python tools/gpu_check.sh OUT_DIR [SECONDS]   # PYTHON default python3; 480 s
#   (on a machine with its own torch and no package index: tools/gpu_bundle.sh first, see its header)
#
# Each step runs under its own limit, cut to what is left of SECONDS, and logs to OUT_DIR; a failed step does not
# stop the next. OUT_DIR/summary.txt has one line per step: its exit status and seconds. The environment is the
# project's (requirements.lock, wandb included: allennlp imports it when a run starts); its first lines name what ran.
# RUNNER_ARGS are added to the tiny Table 1's runner (e.g. --no-wandb).
# STEPS (names as below, space-separated) runs only those, e.g. STEPS="tiny_table1_cuda test_suite" when the others
# were seen on an earlier call and device time is short.
set -u
out=${1:?usage: tools/gpu_check.sh OUT_DIR [SECONDS]}
total=${2:-480}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS

wanted() { [[ -z ${STEPS:-} || " $STEPS " == *" $1 "* ]]; }
step() {  # step NAME CAP COMMAND...: runs COMMAND under min(CAP, time left), output to OUT_DIR/NAME.txt
  local name=$1 cap=$2; shift 2
  if ! wanted "$name"; then echo "$name: not in STEPS" >> "$out/summary.txt"; return; fi
  local left=$((total - (SECONDS - start)))
  ((cap > left)) && cap=$left
  if ((cap < 10)); then echo "$name: skipped (no time left)" | tee -a "$out/summary.txt"; return; fi
  local t0=$SECONDS
  timeout -s INT -k 20 "$cap" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s, limit $cap s)" | tee -a "$out/summary.txt"
  tail -n 4 "$out/$name.txt"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; "$py" --version
  "$py" -c "import torch, allennlp.version as a, allennlp_models.version as m
print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available(), a.VERSION, m.VERSION)"
  # wandb loads the image's tensorboard protobufs, which need protobuf >= 5.26 (the lock has 3.20.3): both seen
  "$py" -m pip list 2>/dev/null | grep -iE '^(protobuf|tensorboard|wandb) '
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt"

# wandb's service alone (every run stopped at its start with "MailboxError: transport failed" on 2026-11-27): its
# own debug logs come back in OUT/wandb_logs
mkdir -p "$work/wandb"
step wandb_offline 60 env WANDB_MODE=offline WANDB_DIR="$work/wandb" "$py" -c "import wandb
run = wandb.init(project='check', name='gpu-check'); run.log({'x': 1}); run.finish(); print('wandb', wandb.__version__, 'ok')"
mkdir -p "$out/wandb_logs"
n=0  # (names the device tool brings back: no "~1~" backups)
while read -r log; do n=$((n + 1)); cp "$log" "$out/wandb_logs/$n-$(basename "$log")"; done \
  < <(find "$work/wandb" -name 'debug*.log' -type f 2>/dev/null)
step tiny_table1_cuda 180 "$py" -m runner --profile default --only table1 --device cuda --runs-per-gpu 6 \
  --runs-dir "$work/runs" --results-dir "$work/tiny" --cache-dir "$work/cache" ${RUNNER_ARGS:-}
cp "$work/tiny/table1.md" "$out/tiny_table1.md" 2>/dev/null
first_crash=$(find "$work/runs" -name failed.json 2>/dev/null | head -n 1)
[[ -n $first_crash ]] && tail -n 60 "$(dirname "$first_crash")/log.txt" > "$out/tiny_table1_first_crash_log.txt"
if wanted paper_check_cuda || wanted finetune_cuda; then
  "$py" tools/paper_stand_in.py "$work/paper" > "$work/paper.env" && source "$work/paper.env"
fi
step paper_check_cuda 150 "$py" -m runner --profile paper --check --runs-dir "$work/paper_runs" \
  --results-dir "$work/paper_results" --cache-dir "$work/paper_cache"
released="$work/paper/elmo/elmo_2x4096_512_2048cnn_2xhighway"
step finetune_cuda 90 "$py" -m elmo_module finetune --options "${released}_options.json" \
  --weights "${released}_weights.hdf5" --train "$work/paper/text/train.txt" --dev "$work/paper/text/dev.txt" \
  --tokenize simple --epochs 1 --device cuda --precision bfloat16 --out "$work/bilm"
step gpu_tests 90 "$py" -m pytest -q -rfs -p no:cacheprovider tests/elmo_module/test_cuda_graphs.py tests/tasks/test_unpacked_rnn.py
# -v: each test's result as it comes; the limit sends SIGINT (step), on which pytest still prints its summary
step test_suite 600 "$py" -m pytest -v -rfEs -p no:cacheprovider -n 8 tests
echo "done in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
