"""setup_env.sh refuses, in one line and before touching anything, a disk without room for the environment (a full
disk once failed CI minutes into pip's install, "[Errno 28] No space left on device", a half-built venv left behind)."""
import os
import subprocess
import sys

import pytest

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


def test_a_venv_in_use_is_not_replaced(tmp_path):
    """A lock changed by a `git pull` made the next ./run_tests.sh delete .venv under a runner days into a sweep."""
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".lock-sha256").write_text("an older lock\n")
    sleeper = venv / "bin" / "sleeper"  # a process with a file of the venv mapped, as a runner has its torch
    sleeper.write_bytes(open("/bin/sleep", "rb").read())
    sleeper.chmod(0o755)
    user = subprocess.Popen([str(sleeper), "60"])
    try:
        env = {**os.environ, "ELMO_VENV": str(venv), "ELMO_PYTHON": sys.executable,
               "ELMO_SETUP_FREE_GB": str(10 ** 9)}  # were it not refused, the free-space check would stop it
        result = subprocess.run([str(REPO_ROOT / "setup_env.sh")], capture_output=True, text=True, env=env,
                                timeout=120)
    finally:
        user.kill()
        user.wait()
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"setup_env.sh: {venv} must be rebuilt for this requirements.lock, but process(es) "
                           f"{user.pid} use it (pid {user.pid}: {sleeper} 60 )"), line
    assert sleeper.is_file()  # nothing removed


@pytest.mark.parametrize("value", ["1e9", "-1", "abc"])
def test_a_free_space_figure_that_is_not_a_number_is_one_line_and_1e9_is_a_number(tmp_path, value):
    """ELMO_SETUP_FREE_GB=1e9 or -1 skipped the check (bash arithmetic), abc stopped with 'unbound variable'."""
    venv = tmp_path / "v"
    env = {**os.environ, "ELMO_VENV": str(venv), "ELMO_PYTHON": sys.executable, "ELMO_SETUP_FREE_GB": value}
    result = subprocess.run([str(REPO_ROOT / "setup_env.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1 and result.stdout == "" and not venv.exists()
    [line] = result.stderr.splitlines()
    if value == "1e9":
        assert line.startswith(f"setup_env.sh: {tmp_path}: expected at least 1e9 GB free for {venv}"), line
    else:
        assert line == (f"setup_env.sh: ELMO_SETUP_FREE_GB: expected a non-negative number of GB (default 9), "
                        f"found '{value}'"), line


@pytest.mark.slow  # runs setup_env.sh
@pytest.mark.parametrize("python", ["/bin/false", "/bin/true"])
def test_an_elmo_python_that_is_not_python_is_named_by_the_first_line_it_prints(tmp_path, python):
    """ELMO_PYTHON=/bin/false printed coreutils' version, copyright and licence lines, then 'nothing that runs';
    /bin/true (which exits 0 to anything) was taken for a Python 3.12."""
    venv = tmp_path / "v"
    env = {**os.environ, "ELMO_VENV": str(venv), "ELMO_PYTHON": python}
    result = subprocess.run([str(REPO_ROOT / "setup_env.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1 and result.stdout == "" and not venv.exists()
    [line] = result.stderr.splitlines()
    first = subprocess.run([python, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert line == (f"setup_env.sh: ELMO_PYTHON={python}: expected a Python 3.12 or 3.13 interpreter, found "
                    f"{first}"), line


@pytest.mark.slow  # runs setup_env.sh
def test_an_elmo_python_that_prints_nothing_or_is_not_there_is_one_line_and_the_old_venv_stays(tmp_path):
    """A program that exits 0 to anything was taken for a Python 3.12: the old venv was removed, then the build
    stopped at '$venv/bin/python: No such file or directory'."""
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / "kept").write_text("the old environment\n")
    quiet = tmp_path / "quiet"
    quiet.write_text("#!/bin/sh\nexit 0\n")
    quiet.chmod(0o755)
    for python, found in ((str(quiet), "a program that printed no version"),
                          (str(tmp_path / "no-python"), "no program of that name")):
        env = {**os.environ, "ELMO_VENV": str(venv), "ELMO_PYTHON": python}
        result = subprocess.run([str(REPO_ROOT / "setup_env.sh")], capture_output=True, text=True, env=env,
                                timeout=120)
        [line] = result.stderr.splitlines()
        assert result.returncode == 1 and result.stdout == "", result
        assert line == (f"setup_env.sh: ELMO_PYTHON={python}: expected a Python 3.12 or 3.13 interpreter, found "
                        f"{found}"), line
        assert (venv / "kept").read_text() == "the old environment\n"
