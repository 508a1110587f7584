#!/usr/bin/env bash
# The lock's packages for a GPU machine that has its own torch and no package index (the lent H100/H200 machines; an
# air-gapped cluster node): every requirements.lock pin except torch, torchvision, triton, NVIDIA's CUDA wheels and the
# packages in SKIP (already on the target), for CPython 3.12 on manylinux x86-64, installed into one folder whose shared
# libraries are stripped of their symbols, packed as one .tar.xz (~40 MB; spaCy's libraries are 120 MB unstripped).
#
#   tools/gpu_bundle.sh [OUT.tar.xz]            # default .gpusite/site.tar.xz (.gpusite/ is ignored by git)
#   # on the target, from the repository:  mkdir -p /tmp/s && tar -xJf site.tar.xz -C /tmp/s &&
#   #   export PYTHONPATH=/tmp/s/site && source env.sh && tools/gpu_check.sh OUT_DIR
#
# SKIP (names as the lock spells them) defaults to what the lent machines' image holds (../.library/device/KINDS.md) and
# what no GPU run needs (ray: --executor ray only; gensim: the word-vectors stage). Packages the lock has only as
# source (fairscale, termcolor, word2number) are built as wheels with that Python. Made for the check of 2026-11-26
# (docs/speed.md#on-a-gpu); needs pip's index (or its mirror) here, a CPython 3.12 (ELMO_PYTHON312) and strip.
set -euo pipefail
out=${1:-.gpusite/site.tar.xz}
py=""  # a pyenv shim named python3.12 may exist without working (setup_env.sh): each candidate is run first
root=$( (command -v pyenv >/dev/null 2>&1 && pyenv root) || echo "$HOME/.pyenv")
for candidate in ${ELMO_PYTHON312:-} python3.12 "$root"/versions/3.12.*/bin/python; do
  if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then py=$candidate; break; fi
done
if [[ -z $py ]]; then
  echo "error: no working CPython 3.12 (python3.12, \$(pyenv root)/versions/3.12.*): set ELMO_PYTHON312" >&2
  exit 2
fi
SKIP=${SKIP:-"torch torchvision triton numpy scipy pandas scikit-learn matplotlib contourpy cycler fonttools kiwisolver
  pillow pyparsing python-dateutil pytz tzdata pyarrow sympy mpmath networkx h5py pytest pluggy iniconfig packaging six
  certifi idna charset-normalizer Jinja2 MarkupSafe attrs psutil PyYAML regex tqdm typing_extensions setuptools joblib
  threadpoolctl aiohttp aiohappyeyeballs aiosignal frozenlist multidict propcache yarl async-timeout msgpack cloudpickle
  Pygments safetensors sentencepiece click urllib3 requests exceptiongroup tomli ray gensim"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skip_re="^($(echo $SKIP | tr ' ' '|')|nvidia-.*)=="
grep -Ev '^ |^#' requirements.lock | grep -Ev "$skip_re" > "$work/pins.txt"
echo "$(wc -l < "$work/pins.txt") packages from requirements.lock for CPython 3.12 ($py)"
platforms=()
for n in 5 12 17 24 27 28 31 34; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
while read -r pin; do
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$work/wheels" "$pin" 2>/dev/null ||
    "$py" -m pip wheel -q --no-deps -w "$work/wheels" "$pin" ||  # only a source release: build it (pure Python)
    { echo "error: no wheel for $pin (requirements.lock)" >&2; exit 1; }
done < "$work/pins.txt"
"$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$work/wheels"/*.whl
find "$work/site" -name '*.so' -exec strip --strip-unneeded {} +
find "$work/site" \( -name '*.pyx' -o -name '*.pxd' -o -name '*.cpp' \) -delete
rm -rf "$work/site/spacy/tests"
# botocore's models of AWS's ~440 services are 15 of the 54 MB packed; allennlp's cached_path reads S3 only (and the
# device tool carries 64 MiB with the repository): keep S3's, STS's and the files at the top of data/
find "$work/site/botocore/data" -mindepth 1 -maxdepth 1 -type d ! -name s3 ! -name sts -exec rm -rf {} +
mkdir -p "$(dirname "$out")"
tar -cJf "$out.partial" -C "$work" site
mv "$out.partial" "$out"
echo "wrote $out ($(du -h "$out" | cut -f1)); on the target: tar -xJf $(basename "$out") -C /tmp/s" \
  "&& export PYTHONPATH=/tmp/s/site"
