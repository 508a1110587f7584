"""Test control for kills at exact points: with ``ELMO_PAUSE_AT=<name>`` a process reaching ``pause_point(name)``
for the first time prints ``paused at <name>`` to stderr and stops itself (SIGSTOP); the test then kills it
(SIGKILL) or changes the world (fills the disk) and continues it (SIGCONT). Unset, a pause point does nothing."""
import os
import signal
import sys

PAUSE_VARIABLE = "ELMO_PAUSE_AT"
_passed = set()


def pause_point(name: str) -> None:
    if os.environ.get(PAUSE_VARIABLE) != name or name in _passed:
        return
    _passed.add(name)
    print(f"paused at {name}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
