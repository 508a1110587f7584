"""float32 or bfloat16 for the biLM's matrix products, one contract on CPU and GPU.

``bfloat16``: the GEMMs (char CNN, highway, projection, LSTM input part, recurrent step, LSTM projection) run in
bfloat16 with float32 accumulation inside the kernel, through ``torch.autocast`` (on CPU with oneDNN's prepacked
bfloat16 linear for the inference steps, ``elmo_module.lstm``); everything else stays float32: the LSTM's gate
nonlinearities and cell state, the clipping, the biLM's outputs, the scalar mix, the softmax and the loss, the
weights and the optimizer state. ``float32`` (the default) runs no autocast at all: bit for bit the code before it.

bfloat16 keeps 8 significant bits (a relative rounding error of at most 2**-9 per product's output) and float32's
range, so no loss scaling is needed in training (unlike float16).

bfloat16 pays on a CPU only where torch's oneDNN has bfloat16 kernels: x86 with AVX-512 (BW, VL, DQ; the BF16 and AMX
extensions run it natively) or ARM with bf16, torch's own test (``torch.ops.mkldnn._is_mkldnn_bf16_supported``,
ATen's ``mkldnn_bf16_device_check``). Below that (an AVX2-only CPU: AMD Zen 2/3, Intel before Skylake-SP, most
laptops) a bfloat16 GEMM takes a slow loop: measured on an AVX2 AMD EPYC with torch 2.9.1, 1 thread
(docs/speed.md "CPUs without bfloat16 kernels"), a bare 32×512 @ 512×2048 product ~50-100× slower than float32, a
linear layer under autocast ~7× slower, the mini biLM's pretraining at 0.11× float32's tokens/s, and
``torch.nn.LSTM`` under bfloat16 autocast fails ("could not create a primitive descriptor for the LSTM forward
propagation primitive"). So bfloat16 on such a CPU is refused in one line before any work: ``check_precision`` where
the device is named (the CLIs, TASK_PRECISION's callback), ``autocast`` at the first bfloat16 forward of a model
built without it, the runner before any stage or run (runner/stages/schedule.py). ``ELMO_ALLOW_SLOW_BFLOAT16=1`` runs
it anyway.
"""
import functools
from contextlib import nullcontext
from typing import Callable, ContextManager, Optional

import torch

from elmo_module.device import cpu_name
from elmo_module.errors import ElmoInputError
from elmo_module.flags import env_flag

PRECISIONS = ("float32", "bfloat16")
ALLOW_SLOW = "ELMO_ALLOW_SLOW_BFLOAT16"


def cpu_has_bfloat16() -> bool:
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpu_bfloat16_problem() -> Optional[str]:
    """Why bfloat16 would not pay on this CPU (no oneDNN bfloat16 kernels), or None (it has them, or
    ELMO_ALLOW_SLOW_BFLOAT16 is set)."""
    if cpu_has_bfloat16() or env_flag(ALLOW_SLOW, False):
        return None
    return (f"this CPU ({cpu_name()}, {torch.backends.cpu.get_cpu_capability()}) has no bfloat16 kernels in torch's "
            f"oneDNN, which needs AVX-512 or ARM bf16: a bfloat16 matrix product takes a slow loop here (the mini "
            f"biLM's pretraining at 0.11x float32's speed on such a CPU) and an LSTM under bfloat16 autocast fails")


def check_precision(precision: str, device: Optional[str] = "cpu", what: str = "--precision") -> None:
    """A one-line error for an unknown precision, a GPU without bfloat16, or a CPU without bfloat16 kernels.
    ``device`` None: not known yet (a model built on the CPU and moved later): the precision's name only."""
    if precision not in PRECISIONS:
        raise ElmoInputError(f"{what} must be one of {', '.join(PRECISIONS)}, found {precision!r}")
    if precision != "bfloat16" or device is None:
        return
    if str(device).startswith("cuda") and not torch.cuda.is_bf16_supported():
        raise ElmoInputError(f"{what} bfloat16: {device} has no bfloat16 support (compute capability < 8.0); "
                             f"use --precision float32")
    if str(device) == "cpu":
        _check_cpu(f"{what} bfloat16")


@functools.lru_cache(maxsize=None)
def _check_cpu(what: str) -> None:
    """Raises on a CPU without bfloat16 kernels; remembered once it passed (autocast() asks at every forward)."""
    problem = cpu_bfloat16_problem()
    if problem:
        raise ElmoInputError(f"{what}: {problem}. Use float32, or run where torch's oneDNN has bfloat16 "
                             f"(AVX-512 or AMX CPUs, a GPU), or set {ALLOW_SLOW}=1 to run it anyway")


def autocast(precision: str, device_type: str) -> ContextManager:
    """The context the biLM's forward (or a training step's forward) runs in. float32 inside an enclosing autocast
    (a task model trained with TASK_PRECISION=bfloat16, tasks/task_precision.py) switches it off, so that each knob
    decides its own part; with none enclosing, float32 enters nothing."""
    if precision == "bfloat16":
        if device_type == "cpu":
            _check_cpu("bfloat16 autocast")
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
