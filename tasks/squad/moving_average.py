"""SQuAD's exponential moving average of the weights (document-qa's, decay 0.999), resumable.

allennlp 2.10's ``MovingAverage.load_state_dict`` (allennlp/training/moving_average.py:47-50) replaces the live
parameters with the copies unpickled from the checkpoint: after ``allennlp train --recover``
(runner/execution/training.py _resume_from) the average follows nothing, and validation and ``best.th`` silently use
the raw weights. This one keeps the live parameters and takes only the averages and backups from the checkpoint, on
each parameter's device.
"""
from typing import Any, Dict

from allennlp.training.moving_average import ExponentialMovingAverage, MovingAverage


@MovingAverage.register("exponential_resumable")
class ResumableExponentialMovingAverage(ExponentialMovingAverage):
    def state_dict(self) -> Dict[str, Any]:
        return {"shadows": self._shadows, "backups": self._backups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        live = dict(self._parameters)
        missing = sorted(set(live) - set(state_dict["shadows"]))
        if missing:
            raise ValueError("moving average in the checkpoint: expected every parameter, "
                             f"found none for {missing[:3]}")
        self._shadows = {name: state_dict["shadows"][name].to(p.device) for name, p in live.items()}
        self._backups = {name: state_dict["backups"][name].to(p.device) for name, p in live.items()}
