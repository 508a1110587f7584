#!/usr/bin/env bash
# Creates the project's virtual environment (.venv) from requirements.lock, with Python 3.12 or 3.13.
# Idempotent: returns at once when .venv already holds exactly this lock. Override the location with ELMO_VENV and the
# interpreter with ELMO_PYTHON (a path to a python 3.12 or 3.13). Refuses at once with less than 9 GB free on the venv's
# disk (ELMO_SETUP_FREE_GB=N changes the figure).
set -euo pipefail
cd "$(dirname "$0")"
venv=${ELMO_VENV:-.venv}
want=$(sha256sum requirements.lock | cut -d' ' -f1)
if [[ -x $venv/bin/python && "$(cat "$venv/.lock-sha256" 2>/dev/null)" == "$want" ]]; then
  exit 0
fi

# A venv in use is not replaced: a `git pull` that changes the lock, then ./run_tests.sh, would otherwise delete the
# environment under a runner that is days into a sweep (its later trainings could not start). A process uses the venv
# when it has a file of it mapped (its libraries: torch, numpy; /proc/PID/maps, the processes this user may read).
if [[ -d $venv ]]; then
  venv_abs=$(cd "$venv" && pwd -P)
  users=$(grep -l -F "$venv_abs/" /proc/[0-9]*/maps 2>/dev/null | cut -d/ -f3 | sort -un | tr '\n' ' ' || true)
  if [[ -n $users ]]; then
    first=${users%% *}
    echo "setup_env.sh: $venv must be rebuilt for this requirements.lock, but process(es) ${users% } use it (pid $first: $(tr '\0' ' ' < "/proc/$first/cmdline" 2>/dev/null | cut -c1-120)): let them end or stop them, then run this again, or build the new one elsewhere with ELMO_VENV=/path/to/venv." >&2
    exit 1
  fi
fi

# Python 3.12 or 3.13: the lock's oldest wheels that exist for both (spaCy 3.8.7, thinc 8.3.6, numpy 2.2.6,
# tokenizers 0.15.2, ray 2.45.0; requirements.in says why each). 3.10 and 3.11 are not served by this lock
# (numpy 2.2.6 and ray 2.45 would install, but the suite is measured on 3.12 and 3.13 only).
# By what it prints, not its exit status alone: /bin/true exits 0 to anything, and was taken for a Python 3.12 (then
# the old venv removed, and the build stopped at "$venv/bin/python: No such file or directory").
supported() { [[ $("$1" -c 'import sys; print("python %d.%d" % sys.version_info[:2])' 2>/dev/null) =~ ^python\ 3\.1[23]$ ]]; }
python=""
candidates=()
if [[ -n ${ELMO_PYTHON:-} ]]; then  # the user's choice, and only it
  candidates+=("$ELMO_PYTHON")
else
  for name in python3.12 python3.13 python3; do
    found=$(command -v "$name" || true)
    [[ -n $found ]] && candidates+=("$found")
  done
  root=$( (command -v pyenv >/dev/null 2>&1 && pyenv root) || echo "$HOME/.pyenv")
  for found in $(ls -d "$root"/versions/3.12.*/bin/python "$root"/versions/3.13.*/bin/python 2>/dev/null | sort -V -r); do
    candidates+=("$found")
  done
  if command -v uv >/dev/null 2>&1; then
    for version in 3.12 3.13; do
      found=$(uv python find "$version" 2>/dev/null || true)
      [[ -n $found ]] && candidates+=("$found")
    done
  fi
fi
# a pyenv shim named python3.12 may exist without working, so every candidate is run before it is chosen
for candidate in "${candidates[@]}"; do
  if supported "$candidate"; then python=$candidate && break; fi
done
if [[ -z $python ]]; then
  if [[ -n ${ELMO_PYTHON:-} ]]; then
    # what it says it is, in one line (/bin/false --version prints coreutils' version, then its licence)
    if ! command -v "$ELMO_PYTHON" >/dev/null 2>&1; then
      found="no program of that name"
    else
      found=$("$ELMO_PYTHON" --version 2>&1 </dev/null || true)
      found=${found%%$'\n'*}
      found=${found:0:200}
      [[ -n $found ]] || found="a program that printed no version"
    fi
    echo "setup_env.sh: ELMO_PYTHON=$ELMO_PYTHON: expected a Python 3.12 or 3.13 interpreter, found $found" >&2
  else
    echo "setup_env.sh: Python 3.12 or 3.13 not found (looked at python3.12, python3.13 and python3 on PATH, \$(pyenv root)/versions/3.1[23].*, uv python find). Install one, e.g. 'sudo apt install python3.12 python3.12-venv' (Ubuntu 24.04 has it), 'pyenv install 3.12' or 'uv python install 3.12', or set ELMO_PYTHON=/path/to/python3.12, then run this again." >&2
  fi
  exit 1
fi
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "setup_env.sh: $python has no venv/ensurepip module: install your distribution's python3.X-venv package (e.g. 'sudo apt install python3.12-venv'), then run this again." >&2
  exit 1
fi

# Free space first: a full disk otherwise fails deep inside pip ("[Errno 28] No space left on device"), after minutes,
# with a half-built .venv left behind. The venv takes 8.1 GB (docs/environment.md); wheels fetched from the network
# also sit in pip's TMPDIR until the install ends (~3.3 GB more, not counted: a local index or cache needs none).
# The old .venv's own space counts as free, since it is replaced.
need_gb=${ELMO_SETUP_FREE_GB:-9}
# a number, compared as one (bash's (( )) took 1e9 and -1 as no limit and stopped at abc with "unbound variable")
if [[ ! $need_gb =~ ^[0-9]+([.][0-9]*)?([eE][+]?[0-9]+)?$ ]]; then
  echo "setup_env.sh: ELMO_SETUP_FREE_GB: expected a non-negative number of GB (default 9), found '$need_gb'" >&2
  exit 1
fi
parent=$(dirname "$venv"); mkdir -p "$parent"
free_kb=$(df -Pk "$parent" | awk 'NR == 2 {print $4}')
old_kb=$( [[ -d $venv ]] && du -sk "$venv" | cut -f1 || echo 0)
have_gb=$(( (free_kb + old_kb) / 1048576 ))
if awk -v have="$((free_kb + old_kb))" -v need="$need_gb" 'BEGIN {exit !(have / 1048576 < need + 0)}'; then
  echo "setup_env.sh: $(cd "$parent" && pwd): expected at least $need_gb GB free for $venv (8.1 GB once installed, and ~3.3 GB of downloads in TMPDIR), found $have_gb GB. Free some space or put the environment on a larger disk (ELMO_VENV=/path/to/venv, TMPDIR=/path/to/tmp), then run this again." >&2
  exit 1
fi
pins=$(grep -E '^(torch|allennlp|allennlp-models)==' requirements.lock | tr '\n' ' ')
echo "setup_env.sh: creating $venv with $python ($("$python" --version 2>&1)) from requirements.lock: ${pins}(torch's"
echo "  PyPI build with CUDA 12.8 kernels for sm_70 to sm_120 GPUs, e.g. V100, T4, A100, L4, H100, RTX 50xx, and the CPU;"
echo "  allennlp's torch, spaCy, transformers and wandb pins are overridden on purpose, see requirements.overrides)."
echo "  First time: ~3.3 GB of downloads, ~8 GB on disk; a few minutes on a fast link."
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
"$venv/bin/python" tools/pip_check.py  # pip check, less the overrides that requirements.overrides names
echo "$want" > "$venv/.lock-sha256"
echo "setup_env.sh: ready ($venv)"
