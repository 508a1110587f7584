#!/usr/bin/env bash
# Creates the project's Python 3.10 virtual environment (.venv) from requirements.lock.
# Idempotent: returns at once when .venv already holds exactly this lock. Override the location with ELMO_VENV.
set -euo pipefail
cd "$(dirname "$0")"
venv=${ELMO_VENV:-.venv}
want=$(sha256sum requirements.lock | cut -d' ' -f1)
if [[ -x $venv/bin/python && "$(cat "$venv/.lock-sha256" 2>/dev/null)" == "$want" ]]; then
  exit 0
fi

# Python 3.10: AllenNLP 2.10.1 needs spaCy < 3.4, and spaCy 3.3 has no wheels for Python > 3.10 (torch 2.9.1
# itself has wheels for 3.10-3.14).
is_py310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; }
python=""
# a pyenv shim named python3.10 may exist without working, so every candidate is run before it is chosen
root=$( (command -v pyenv >/dev/null 2>&1 && pyenv root) || echo "$HOME/.pyenv")
for candidate in $(command -v python3.10 || true) $(ls -d "$root"/versions/3.10.*/bin/python 2>/dev/null | sort -V -r); do
  if is_py310 "$candidate"; then python=$candidate && break; fi
done
if [[ -z $python ]]; then
  echo "setup_env.sh: Python 3.10 not found (AllenNLP 2.10.1 needs spaCy 3.3, which has no wheels for newer" >&2
  echo "Pythons). Install it, e.g. 'pyenv install 3.10.13' or your distribution's python3.10 + python3.10-venv," >&2
  echo "so that 'python3.10' is on PATH or under \$(pyenv root)/versions/3.10.*, then run this again." >&2
  exit 1
fi

pins=$(grep -E '^(torch|allennlp|allennlp-models)==' requirements.lock | tr '\n' ' ')
echo "setup_env.sh: creating $venv with $python from requirements.lock: ${pins}(torch's PyPI build with CUDA 12.8"
echo "  kernels for sm_70 to sm_120 GPUs, e.g. V100, T4, A100, L4, H100, RTX 50xx, and the CPU; allennlp's torch<1.13 pin is"
echo "  overridden on purpose, see requirements.overrides). First time: ~3.3 GB of downloads, ~7.7 GB on disk;"
echo "  about 5 min with an empty pip cache on a fast link, 2 with a warm one."
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
"$venv/bin/python" tools/pip_check.py  # pip check, less the overrides that requirements.overrides names
echo "$want" > "$venv/.lock-sha256"
echo "setup_env.sh: ready ($venv)"
