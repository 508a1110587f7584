"""e2e-coref's learning-rate decay (Lee et al. 2017): lr = lr0 * decay_rate ** floor(step / decay_steps), one step
per training batch (one document). e2e-coref builds it with tf.train.exponential_decay(..., staircase=True) from
experiments.conf's learning_rate 0.001, decay_rate 0.999, decay_frequency 100 (coref_model.py:46-47 and
experiments.conf:63-66 at commit 53c4116). AllenNLP's "exponential" scheduler steps once per epoch, which would tie the
decay to the size of the training set.
"""
import torch
from allennlp.training.learning_rate_schedulers import LearningRateScheduler


@LearningRateScheduler.register("staircase_exponential")
class StaircaseExponentialDecay(LearningRateScheduler):
    def __init__(self, optimizer: torch.optim.Optimizer, decay_rate: float, decay_steps: int,
                 last_epoch: int = -1) -> None:
        if not 0 < decay_rate <= 1 or decay_steps < 1:
            raise ValueError(f"staircase_exponential: expected 0 < decay_rate <= 1 and decay_steps >= 1, "
                             f"found decay_rate={decay_rate}, decay_steps={decay_steps}")
        self.decay_rate = decay_rate
        self.decay_steps = decay_steps
        self.global_step = 0  # optimiser steps taken before the next one (TF's global_step)
        self.batches_seen = 0
        super().__init__(optimizer, last_epoch=last_epoch)

    def step(self, metric: float = None) -> None:
        pass  # nothing happens at the end of an epoch

    def step_batch(self, batch_num_total: int = None) -> None:
        # AllenNLP's trainer calls this just before the optimiser step of its batch_num_total-th batch (1-based),
        # which TF would run with global_step = batch_num_total - 1.
        self.batches_seen += 1
        self.global_step = (self.batches_seen if batch_num_total is None else batch_num_total) - 1
        for group, lr in zip(self.optimizer.param_groups, self.get_values()):
            group["lr"] = lr

    def get_values(self):
        factor = self.decay_rate ** (self.global_step // self.decay_steps)
        return [base * factor for base in self.base_values]
