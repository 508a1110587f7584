# Sourced by run_all.sh and run_tests.sh: the environment every run of this project gets.
# Offline by default; every tool's cache inside the repository's cache/ (or a caller's scratch dir).
cache=${ELMO_CACHE_ROOT:-$PWD/cache}
mkdir -p "$cache/nltk/tokenizers/punkt"  # silences allennlp_models' nltk download attempt
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" NLTK_DATA="${NLTK_DATA:-$cache/nltk}" \
  WANDB_MODE="${WANDB_MODE:-offline}" HF_HOME="${HF_HOME:-$cache/hf}" \
  ALLENNLP_CACHE_ROOT="${ALLENNLP_CACHE_ROOT:-$cache/allennlp}" TOKENIZERS_PARALLELISM=false \
  WANDB_ERROR_REPORTING="${WANDB_ERROR_REPORTING:-false}"  # wandb >= 0.16 tries to reach its error service otherwise
# No MKL_DEBUG_CPU_TYPE: torch 1.12's MKL 2020.0 needed =5 for its AVX2 path on AMD CPUs; the MKL 2024.2 in torch
# 2.9.1 ignores it (a GEMM is bit-identical with and without it, and as fast; docs/speed.md).
# Third-party deprecation notices printed by every command (fairscale's use of torch.cuda.amp under torch 2, spaCy's
# thinc calling torch.set_default_tensor_type, the Google client's notice about Python 3.10) would come before a one-line error on stderr: silenced here, nothing else.
export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:\`torch.cuda.amp.custom_fwd:FutureWarning,ignore:\`torch.cuda.amp.custom_bwd:FutureWarning,ignore:You are using a non-supported Python version:FutureWarning,ignore:torch.set_default_tensor_type() is deprecated:UserWarning"
