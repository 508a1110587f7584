#!/usr/bin/env bash
# The suite's checks on a GPU machine, in one go (docs/runner.md#gpus): Table 1 of the tiny default
# profile trained on the GPU by the runner (allennlp + tasks + ELMo), the paper profile's --check on stand-in inputs
# with a biLM of the released shape (its GPU-hour timing), the biLM fine-tuning of the paper profile on the GPU
# (bfloat16), the GPU-only tests, then the whole test suite with what time is left.
#
#   source env.sh; PYTHON=.venv/bin/python tools/gpu_check.sh OUT_DIR [SECONDS]   # PYTHON default python3; 480 s
#
# Each step runs under its own limit, cut to what is left of SECONDS, and logs to OUT_DIR; a failed step does not
# stop the next. OUT_DIR/summary.txt has one line per step: its exit status and seconds. The environment is the
# project's (requirements.lock, wandb included: allennlp imports it when a run starts); its first lines name what ran.
set -u
out=${1:?usage: tools/gpu_check.sh OUT_DIR [SECONDS]}
total=${2:-480}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
work=$(mktemp -d)
start=$SECONDS

step() {  # step NAME CAP COMMAND...: runs COMMAND under min(CAP, time left), output to OUT_DIR/NAME.txt
  local name=$1 cap=$2; shift 2
  local left=$((total - (SECONDS - start)))
  ((cap > left)) && cap=$left
  if ((cap < 10)); then echo "$name: skipped (no time left)" | tee -a "$out/summary.txt"; return; fi
  local t0=$SECONDS
  timeout -k 10 "$cap" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s, limit $cap s)" | tee -a "$out/summary.txt"
  tail -n 4 "$out/$name.txt"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; "$py" --version
  "$py" -c "import torch, allennlp.version, allennlp_models.version as m; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), '| allennlp', allennlp.version.VERSION, '| allennlp-models', m.VERSION)"
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt"

step tiny_table1_cuda 180 "$py" -m runner --profile default --only table1 --device cuda --runs-per-gpu 6 --jobs 6 \
  --runs-dir "$work/runs" --results-dir "$work/tiny" --cache-dir "$work/cache"
cp "$work/tiny/table1.md" "$out/tiny_table1.md" 2>/dev/null
step paper_check_cuda 150 bash -c "$py tools/paper_stand_in.py '$work/paper' > '$work/paper.env' && source '$work/paper.env' && \
  $py -m runner --profile paper --check --runs-dir '$work/paper_runs' --results-dir '$work/paper_results' \
  --cache-dir '$work/paper_cache'"
"$py" -c "
import json
for split, repeat in (('train', 100), ('dev', 10)):
    lines = [' '.join(json.loads(l)[k].split()) for l in open(f'tasks/snli/sample_data/{split}.jsonl') for k in ('sentence1', 'sentence2')]
    open(f'$work/{split}.txt', 'w').write('\\n'.join(lines * repeat) + '\\n')"
step finetune_cuda 90 bash -c "source '$work/paper.env' && $py -m elmo_module finetune \
  --options \"\$ELMO_DIR/elmo_2x4096_512_2048cnn_2xhighway_options.json\" \
  --weights \"\$ELMO_DIR/elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5\" --train '$work/train.txt' \
  --dev '$work/dev.txt' --tokenize simple --epochs 1 --device cuda --precision bfloat16 --out '$work/bilm'"
step gpu_tests 90 "$py" -m pytest -q -rfs -p no:cacheprovider tests/test_cuda_graphs.py tests/test_unpacked_rnn.py
step test_suite 600 "$py" -m pytest -v -rfEs -p no:cacheprovider -n 8 tests  # -v: each result as it comes, if the limit cuts the summary
echo "done in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
