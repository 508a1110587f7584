"""Test control for kills at exact points: with ``ELMO_PAUSE_AT=<name>`` (or ``<name>:<n>``, the n-th time) a
process reaching ``pause_point(name)`` prints ``paused at <name>`` to stderr and stops itself (SIGSTOP); the test
then kills it (SIGKILL) or changes the world (fills the disk) and continues it (SIGCONT). Unset, it does nothing."""
import collections
import os
import signal
import sys

PAUSE_VARIABLE = "ELMO_PAUSE_AT"
_reached = collections.Counter()


def pause_point(name: str) -> None:
    wanted = os.environ.get(PAUSE_VARIABLE)
    if not wanted or wanted.split(":")[0] != name:
        return
    _reached[name] += 1
    nth = int(wanted.split(":")[1]) if ":" in wanted else 1
    if _reached[name] == nth:
        print(f"paused at {name}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
