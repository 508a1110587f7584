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

# AllenNLP 2.10.1 needs torch < 1.13, which has no wheels for Python > 3.10.
is_py310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; }
python=""
# a pyenv shim named python3.10 may exist without working, so every candidate is run before it is chosen
root=$( (command -v pyenv >/dev/null 2>&1 && pyenv root) || echo "$HOME/.pyenv")
for candidate in $(command -v python3.10 || true) $(ls -d "$root"/versions/3.10.*/bin/python 2>/dev/null | sort -V -r); do
  if is_py310 "$candidate"; then python=$candidate && break; fi
done
if [[ -z $python ]]; then
  echo "setup_env.sh: Python 3.10 not found (AllenNLP 2.10.1 needs torch 1.12, which has no wheels for newer" >&2
  echo "Pythons). Install it, e.g. 'pyenv install 3.10.13' or your distribution's python3.10 + python3.10-venv," >&2
  echo "so that 'python3.10' is on PATH or under \$(pyenv root)/versions/3.10.*, then run this again." >&2
  exit 1
fi

echo "setup_env.sh: creating $venv with $python from requirements.lock (first time: ~1 GB download, a few minutes)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
"$venv/bin/python" -m pip check
echo "$want" > "$venv/.lock-sha256"
echo "setup_env.sh: ready ($venv)"
