"""How long a profile's unfinished runs will take, estimated from its finished ones (their result.json: wall time and
epochs run), for the plan line and the ETA of a multi-session profile whose runs differ 10x in cost (a SNLI run ~10
min, a SQuAD run ~2 h on the small profile).

An unfinished run costs the median seconds per epoch of the finished runs most like it times their median number of
epochs, at most its own cap (NUM_EPOCHS), less the epochs a run under way has done (at least one left). "Most like
it", the first level that has finished runs: the same task, baseline or ELMo, training fraction and batches per
epoch; else the same task and baseline or ELMo; else the same task. A task without a finished run is not estimated,
and the estimate says so.
"""
import statistics
from typing import Dict, Iterable, List, Optional, Tuple

from runner.spec import epoch_cap


def _levels(task: str, knobs: dict) -> List[tuple]:
    kind = "baseline" if knobs.get("ELMO", "none") == "none" else "elmo"
    return [(task, kind, knobs.get("TRAIN_FRACTION"), knobs.get("BATCHES_PER_EPOCH")), (task, kind), (task,)]


class Estimator:
    """measured: (task, knobs, wall seconds, epochs run) of finished runs; more can be added as runs finish."""

    def __init__(self, measured: Iterable[Tuple[str, dict, float, int]] = ()):
        self._by_level = {}
        for item in measured:
            self.add(*item)

    def add(self, task: str, knobs: dict, wall_s: float, epochs: int) -> None:
        if not wall_s or not epochs:
            return
        for key in _levels(task, knobs):
            self._by_level.setdefault(key, []).append((wall_s / epochs, epochs))

    def add_result(self, result: Optional[dict]) -> None:
        if result:
            self.add(result.get("task"), result.get("knobs") or {}, result.get("wall_time_s"),
                     len(result.get("epochs") or []))

    def seconds(self, task: str, knobs: dict, done: int = 0) -> Optional[float]:
        """``done``: epochs a run under way has at the checkpoint it goes on from (runner/execution/training.py
        under_way)."""
        for key in _levels(task, knobs):
            like = self._by_level.get(key)
            if like:
                per_epoch = statistics.median(s for s, _ in like)
                epochs = statistics.median(e for _, e in like)
                cap = epoch_cap(knobs)
                if cap:
                    epochs = min(epochs, cap)
                return per_epoch * max(epochs - done, 1)
        return None

    def cost(self, todo: Iterable[Tuple[str, dict, int]]) -> Tuple[float, Dict[str, int]]:
        """(the estimated training seconds of `todo` (task, knobs, epochs done), {task: runs not estimated})."""
        known, unknown = 0.0, {}
        for task, knobs, done in todo:
            s = self.seconds(task, knobs, done)
            if s is None:
                unknown[task] = unknown.get(task, 0) + 1
            else:
                known += s
        return known, unknown

    def describe(self, todo: Iterable[Tuple[str, dict, int]], parallel: int) -> str:
        """One line: the estimated training time of `todo` (task, knobs, epochs done) and its wall time at `parallel`
        runs at a time, and the tasks it could not estimate (none estimated: only those, no "~0.0 h")."""
        known, unknown = self.cost(todo)
        parts = [f"about {duration(known)} of runs, about {duration(known / max(parallel, 1))} of wall time at "
                 f"{parallel} at a time (from the finished runs' own times)"] if known or not unknown else []
        if unknown:
            parts.append("not estimated, no finished run of their task yet: " + ", ".join(
                f"{task} x{n}" for task, n in sorted(unknown.items())))
        return "; ".join(parts)

    def left(self, todo: Iterable[Tuple[str, dict, int]], parallel: int) -> str:
        """The wall time left for a progress line: "about 4 min left", "over 4 min left" when some runs of `todo`
        could not be estimated (their tasks are named once, by describe), "" when none could."""
        known, unknown = self.cost(todo)
        if not known:
            return ""
        return f"{'over' if unknown else 'about'} {duration(known / max(parallel, 1))} left"


def duration(seconds: float) -> str:
    """A wall time as a person reads it: "31 s", "12 min", "2.3 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
