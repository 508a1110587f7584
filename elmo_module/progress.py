"""The one progress bar of the long jobs (pretraining, fine-tuning, embedding, the activation cache).

On a terminal it redraws every ``mininterval`` seconds; written to a file (a runner's log, ``nohup``), each redraw
is a new carriage-returned line that stays forever, so it draws at most every ``log_interval`` seconds there."""
import sys

from tqdm import tqdm


def progress_bar(*args, mininterval: float = 0.5, log_interval: float = 30.0, **kwargs) -> tqdm:
    stream = kwargs.get("file") or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    return tqdm(*args, mininterval=mininterval if tty else log_interval, **kwargs)
