"""A build of a results directory is atomic as a whole (runner/analysis/build.py): a build that fails, or that is
killed (SIGKILL, a real process) at any moment, leaves files that all come from one build."""
import json
import os
import shutil
import subprocess
import sys
from hashlib import sha256
from pathlib import Path

import pytest

import runner.__main__ as runner_main
from runner.analysis.build import MANIFEST, STAGING, finish_interrupted
from runner.execution.training import child_pythonpath
from tests.runner.fakes import ONE_COLUMN, REPO, runner_args, write_profile

# The runner's --build-only, SIGKILLed by itself at one moment of the build: KILL_AT=staging kills it at its first
# write into the staging folder (before the manifest); KILL_AT=N after it has moved N files into the results
# directory (0: right after the manifest, before any move; the number of files: all moved, the folder not yet gone).
KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
results, kill_at = Path(sys.argv[1]).resolve(), os.environ["KILL_AT"]
replace, moved = os.replace, [0]
def killing_replace(src, dst, *a, **k):
    into_results = Path(dst).resolve().parent == results
    if kill_at == "staging" and not into_results:
        os.kill(os.getpid(), signal.SIGKILL)
    if into_results and kill_at == "0":
        os.kill(os.getpid(), signal.SIGKILL)
    replace(src, dst, *a, **k)
    if into_results:
        moved[0] += 1
        if str(moved[0]) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
os.replace = killing_replace
import runner.__main__
sys.exit(runner.__main__.main(sys.argv[2:]))
"""


def files(directory: Path) -> dict:
    """The build's files in a results directory (not the lock, not runs/)."""
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and not p.name.startswith(".")}


def two_builds(tmp_path, fake_training) -> tuple:
    """Build A with two finished runs, then one run's result removed so that build B differs in every table."""
    two_seeds = {"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 2}}}
    profile = write_profile(tmp_path, sweep_overrides=two_seeds)
    assert runner_main.main(runner_args(tmp_path, profile, "--no-wandb")) == 0
    (next((tmp_path / "runs").rglob("result.json"))).unlink()
    return profile, files(tmp_path / "results")


@pytest.mark.slow
def test_a_build_killed_at_any_moment_leaves_the_files_of_one_build(tmp_path, fake_training):
    profile, build_a = two_builds(tmp_path, fake_training)
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "WANDB_MODE": "offline"}
    kept = tmp_path / "build_a"
    shutil.copytree(results, kept)
    n_files = len(build_a)
    seen = set()
    for kill_at in ["staging", "0", "1", str(n_files // 2), str(n_files)]:
        shutil.rmtree(results)
        shutil.copytree(kept, results)
        done = subprocess.run([sys.executable, "-c", KILLED_BUILD, str(results),
                               *runner_args(tmp_path, profile, "--build-only", "--no-wandb")],
                              cwd=REPO, env={**env, "KILL_AT": kill_at}, capture_output=True, text=True)
        assert done.returncode == -9, (kill_at, done.stderr)
        [staging] = list(results.glob(STAGING + "*"))  # what the killed build left
        manifest = staging / MANIFEST
        build_b = json.loads(manifest.read_text())["files"] if manifest.is_file() else None
        finish_interrupted(results)  # as the next invocation on the directory does first
        assert not list(results.glob(STAGING + "*"))
        now = files(results)
        if build_b is None:  # killed before its manifest: the previous build, whole
            assert kill_at == "staging" and now == build_a
            seen.add("a")
        else:  # killed while moving in: the killed build, whole
            assert {name: sha256(now[name]).hexdigest() for name in build_b} == build_b, kill_at
            assert all(now[name] != build_a[name] for name in ("table1.md", "summary.json", "index.html"))
            seen.add("b")
    assert seen == {"a", "b"}


def test_a_build_that_cannot_move_in_is_one_line_and_leaves_the_previous_one(tmp_path, fake_training, capsys):
    """table1.md replaced by a directory: a 19-line traceback used to leave new claims.md and summary.json beside
    the old table1.md and index.html."""
    profile, build_a = two_builds(tmp_path, fake_training)
    results = tmp_path / "results"
    (results / "table1.md").unlink()
    (results / "table1.md").mkdir()
    del build_a["table1.md"]
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, profile, "--build-only", "--no-wandb")) == 2
    assert capsys.readouterr().err == (f"error: {results / 'table1.md'}: expected a file the build replaces, found "
                                       f"a directory: remove it and build again (the previous build's files are "
                                       f"left as they were)\n")
    assert files(results) == build_a
    assert not list(results.glob(STAGING + "*"))


def test_a_staging_folder_a_killed_build_left_unfinished_is_removed(tmp_path, fake_training):
    """A `.building-*` folder was left forever after a kill."""
    profile, build_a = two_builds(tmp_path, fake_training)
    left = tmp_path / "results" / f"{STAGING}x1y2"
    left.mkdir()
    (left / "table1.md").write_text("half a build\n")
    assert runner_main.main(runner_args(tmp_path, profile, "--build-only", "--no-wandb")) == 0
    assert not list((tmp_path / "results").glob(STAGING + "*"))
    assert "half a build" not in (tmp_path / "results" / "table1.md").read_text()
