"""One runner at a time in a runs directory and in a results directory (flock on a file in each)."""
import fcntl
import os
import time
from pathlib import Path

from runner.plan import Plan
from runner.spec import SpecError

_lock_files = []  # held open for the runner's lifetime; the kernel releases the locks when the process ends


def lock_dir(directory: Path, what: str, flag: str) -> str:
    """One runner per runs directory (two would train the same runs twice into the same directories: interleaved
    logs, a failed.json beside a result.json) and per results directory (one archive, one set of tables). The
    second one stops at once with this message rather than wait (a sweep may hold the directory for hours). flock
    is released by the kernel however the holder ends (kill -9 included), so a stale lock cannot block a later
    runner. Returns '' when the lock is ours."""
    directory.mkdir(parents=True, exist_ok=True)
    f = open(directory / ".runner.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "pid unknown"
        f.close()
        return (f"{what} {directory} is in use by another runner ({holder}); wait for it to end or stop "
                f"it, or give this one another {flag}")
    f.truncate(0)
    f.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    f.flush()
    _lock_files.append(f)
    return ""


def take_locks(plan: Plan, hint: str = "") -> None:
    """One runner per runs directory and per results directory (lock_dir), --build-only included: beside a runner it
    restored archived results over the stale ones that runner had just moved aside to train again (--redo-stale)."""
    problem = (lock_dir(plan.runs_dir, "runs directory", "--runs-dir")
               or lock_dir(plan.results_dir, "results directory", "--results-dir"))
    if problem:
        raise SpecError(problem + hint)


def release_locks() -> None:
    """(the process ending releases them too; the runner's run() may be called again in one process)"""
    while _lock_files:
        _lock_files.pop().close()
