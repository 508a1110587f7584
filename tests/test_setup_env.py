"""setup_env.sh refuses, in one line and before touching anything, a disk without room for the environment (a full
disk once failed CI minutes into pip's install, "[Errno 28] No space left on device", a half-built venv left behind)."""
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_too_little_free_space_is_refused_first_and_nothing_is_built(tmp_path):
    venv = tmp_path / "envs" / "v"
    env = {**os.environ, "ELMO_VENV": str(venv), "ELMO_PYTHON": sys.executable,
           "ELMO_SETUP_FREE_GB": str(10 ** 9)}  # more than any disk has
    result = subprocess.run([str(REPO_ROOT / "setup_env.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""  # nothing announced as under way
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"setup_env.sh: {venv.parent}: expected at least {10 ** 9} GB free for {venv}")
    assert " GB free " in first and first.split("found ")[1].split(" GB")[0].isdigit()
    assert not venv.exists()
