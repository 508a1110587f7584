"""``reduce_on_plateau_compat``: allennlp's ``reduce_on_plateau`` scheduler without its ``verbose`` argument.

allennlp 2.10.1 (allennlp/training/learning_rate_schedulers/pytorch_lr_schedulers.py, class
ReduceOnPlateauLearningRateScheduler) always passes ``verbose=`` to ``torch.optim.lr_scheduler.ReduceLROnPlateau``;
torch deprecated that argument in 2.2 and no longer accepts it, so the registered ``reduce_on_plateau`` raises a
TypeError on the torch this project installs. ``verbose`` only printed a line when the learning rate dropped, so this
wrapper, with the same arguments and defaults otherwise and the same step() (allennlp's metric wrapper), schedules
identically. The SNLI and coref configs use it.
"""
from typing import List, Union

import torch
from allennlp.training.learning_rate_schedulers import LearningRateScheduler
from allennlp.training.learning_rate_schedulers.learning_rate_scheduler import (
    _PyTorchLearningRateSchedulerWithMetricsWrapper,
)
from allennlp.training.optimizers import Optimizer


@LearningRateScheduler.register("reduce_on_plateau_compat")
class ReduceOnPlateauCompat(_PyTorchLearningRateSchedulerWithMetricsWrapper):
    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold_mode: str = "rel", threshold: float = 1e-4, cooldown: int = 0,
                 min_lr: Union[float, List[float]] = 0, eps: float = 1e-8) -> None:
        super().__init__(torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer=optimizer, mode=mode, factor=factor, patience=patience, threshold_mode=threshold_mode,
            threshold=threshold, cooldown=cooldown, min_lr=min_lr, eps=eps))
