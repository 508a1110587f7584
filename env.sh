# Sourced by run_all.sh and run_tests.sh: the environment every run of this project gets.
# Offline by default; every tool's cache inside the repository's cache/ (or a caller's scratch dir).
cache=${ELMO_CACHE_ROOT:-$PWD/cache}
mkdir -p "$cache/nltk/tokenizers/punkt"  # silences allennlp_models' nltk download attempt
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" NLTK_DATA="${NLTK_DATA:-$cache/nltk}" \
  WANDB_MODE="${WANDB_MODE:-offline}" HF_HOME="${HF_HOME:-$cache/hf}" \
  ALLENNLP_CACHE_ROOT="${ALLENNLP_CACHE_ROOT:-$cache/allennlp}" TOKENIZERS_PARALLELISM=false
# torch 1.12 bundles MKL 2020.0, which takes a slow generic code path on AMD CPUs unless told they have AVX2:
# measured here (AMD EPYC, 2 threads) this doubles GEMM throughput (32x512x16384: 37 -> 99 GFLOP/s) and every
# CPU training and ELMo run with it. Only set on AMD CPUs that do have AVX2; a value the caller set wins.
if grep -q AuthenticAMD /proc/cpuinfo 2>/dev/null && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  export MKL_DEBUG_CPU_TYPE="${MKL_DEBUG_CPU_TYPE:-5}"
fi
