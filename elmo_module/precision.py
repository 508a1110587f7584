"""float32 or bfloat16 for the biLM's matrix products, one contract on CPU and GPU.

``bfloat16``: the GEMMs (char CNN, highway, projection, LSTM input part, recurrent step, LSTM projection) run in
bfloat16 with float32 accumulation inside the kernel, through ``torch.autocast`` (on CPU with oneDNN's prepacked
bfloat16 linear for the inference steps, ``elmo_module.lstm``); everything else stays float32: the LSTM's gate
nonlinearities and cell state, the clipping, the biLM's outputs, the scalar mix, the softmax and the loss, the
weights and the optimizer state. ``float32`` (the default) runs no autocast at all: bit for bit the code before it.

bfloat16 keeps 8 significant bits (a relative rounding error of at most 2**-9 per product's output) and float32's
range, so no loss scaling is needed in training (unlike float16).
"""
from contextlib import nullcontext
from typing import Callable, ContextManager

import torch

from elmo_module.errors import ElmoInputError

PRECISIONS = ("float32", "bfloat16")


def check_precision(precision: str, device: str = "cpu", what: str = "--precision") -> None:
    """A one-line error for an unknown precision or a GPU without bfloat16."""
    if precision not in PRECISIONS:
        raise ElmoInputError(f"{what} must be one of {', '.join(PRECISIONS)}, found {precision!r}")
    if precision == "bfloat16" and str(device).startswith("cuda") and not torch.cuda.is_bf16_supported():
        raise ElmoInputError(f"{what} bfloat16: {device} has no bfloat16 support (compute capability < 8.0); "
                             f"use --precision float32")


def autocast(precision: str, device_type: str) -> ContextManager:
    """The context the biLM's forward (or a training step's forward) runs in. float32 inside an enclosing autocast
    (a task model trained with TASK_PRECISION=bfloat16, tasks/task_precision.py) switches it off, so that each knob
    decides its own part; with none enclosing, float32 enters nothing."""
    if precision == "bfloat16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return nullcontext()


def bfloat16_active(device_type: str) -> bool:
    return torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == torch.bfloat16


def inherit(device_type: str) -> Callable[[], ContextManager]:
    """The calling thread's autocast state as a context to enter in a worker thread (autocast is thread-local, as
    grad mode is: ``ElmoBiLm.contextual`` runs the backward stack in a second thread)."""
    precision = "bfloat16" if bfloat16_active(device_type) else "float32"
    return lambda: autocast(precision, device_type)
