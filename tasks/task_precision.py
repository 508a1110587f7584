"""``TASK_PRECISION``: float32 (the default, the paper's) or bfloat16 mixed precision for the task model's training
and its dev passes, on CPU and CUDA, through a trainer callback (``task_precision``), not an edit to allennlp.

bfloat16 follows the contract of the biLM's (``elmo_module/precision.py``): the forward of each training and dev
batch runs under ``torch.autocast(device, dtype=torch.bfloat16)``, so the matrix products (linear layers, LSTMs on
the oneDNN path, convolutions, bmm) take bfloat16 inputs and accumulate in float32 inside the kernel; the parameters,
their gradients and the optimizer state stay float32 (autocast casts a copy of each weight per forward: the master
weights never change dtype). Everything else stays float32: every module of the task model hands its output on as
float32 (a forward hook), so the normalisations that follow a layer (allennlp's masked (log-)softmax over the
attention and the span / answer logits, the CRF's logsumexp, ``sequence_cross_entropy_with_logits``) and the loss
run in float32. Why: on CPU, autocast runs log_softmax, softmax and logsumexp in the dtype they are given (measured
with torch 2.9.1: a bfloat16 linear's output stays bfloat16 through all three; only losses such as nll_loss and
cross_entropy are on its float32 list), unlike CUDA's list, which keeps them in float32. Products computed in a
model's own forward rather than in a module (BCN's self-attention ``bmm``, allennlp-models
biattentive_classification_network.py:268) are bfloat16 when they reach the softmax, so these three are also put on
CPU autocast's float32 list here, as CUDA has them (a kernel for the AutocastCPU dispatch key that casts bfloat16
inputs up; it acts only inside a CPU autocast region).

The biLM keeps its own knob: under ``ELMO_PRECISION=float32`` it runs with autocast switched off inside a bfloat16
task run (``elmo_module.precision.autocast``), and no hook is put on its modules.

The final test evaluation that ``allennlp train`` runs after training, and the per-example predictions
(``tasks/predictions.py``), call the model outside the trainer: they run in float32 on the float32 weights.
bfloat16 keeps float32's exponent range, so no loss scaling is needed (unlike float16 AMP, allennlp's ``use_amp``).
"""
from typing import Any

import torch
from allennlp.training.callbacks.callback import TrainerCallback
from torch.nn.utils.rnn import PackedSequence

from elmo_module.bilm import ElmoBiLm
from elmo_module.precision import autocast, check_precision


def _to_float32(value: Any) -> Any:
    """A module's output with every bfloat16 tensor in it as float32 (tensors, PackedSequence, tuples, lists)."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype == torch.bfloat16 else value
    if isinstance(value, PackedSequence):
        return value._replace(data=_to_float32(value.data))
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_to_float32(v) for v in value)
    if isinstance(value, list):
        return [_to_float32(v) for v in value]
    return value


def _float32_kernel(op):
    below = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(below):  # then the op's own kernels, in float32
            return op(*[_to_float32(a) for a in args], **kwargs)
    return kernel


_AUTOCAST_CPU = torch.library.Library("aten", "IMPL", "AutocastCPU")
for _name, _op in (("softmax.int", torch.ops.aten.softmax.int), ("log_softmax.int", torch.ops.aten.log_softmax.int),
                   ("logsumexp", torch.ops.aten.logsumexp.default)):
    _AUTOCAST_CPU.impl(_name, _float32_kernel(_op))


def _float32_output_hook(module, inputs, output):
    return _to_float32(output)


def float32_at_module_boundaries(model: torch.nn.Module) -> list:
    """Put the float32-output hook on every module of ``model`` outside the biLM; returns the hook handles."""
    in_bilm = {id(m) for bilm in model.modules() if isinstance(bilm, ElmoBiLm) for m in bilm.modules()}
    return [m.register_forward_hook(_float32_output_hook) for m in model.modules()
            if m is not model and id(m) not in in_bilm]


@TrainerCallback.register("task_precision")
class TaskPrecisionCallback(TrainerCallback):
    """Runs the trainer's forward passes (``batch_outputs``: training and dev batches) under the precision's
    autocast. jsonnet_configs/elmo.libsonnet adds it only for TASK_PRECISION=bfloat16, so a float32 run's config is
    the one it was before the knob existed."""

    def __init__(self, serialization_dir: str, precision: str = "float32") -> None:
        super().__init__(serialization_dir)
        check_precision(precision, None, what="TASK_PRECISION")  # the device: on_start
        self.precision = precision

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        if self.precision == "float32":
            return
        device_type = next(trainer.model.parameters()).device.type
        check_precision(self.precision, device_type, what="TASK_PRECISION")
        float32_at_module_boundaries(trainer.model)
        plain = trainer.batch_outputs  # the bound method of allennlp's GradientDescentTrainer

        def batch_outputs(batch, for_training: bool):
            with autocast(self.precision, device_type):
                return plain(batch, for_training)
        trainer.batch_outputs = batch_outputs  # this trainer object only: _train_epoch and _validation_loss call it
