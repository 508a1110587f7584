"""allennlp's training checkpoints read back under torch >= 2.6 (``allennlp train --recover``, the runner's resumed runs).

allennlp 2.10's Checkpointer.load_checkpoint reads the training state with torch.load's default
(allennlp/training/checkpointer.py:289), which torch 2.6 turned to ``weights_only=True``. That state keeps the metric
tracker's best metrics, and a metric computed with numpy is a numpy scalar: coreference's CEAF-e and the averages built
on it (allennlp-models coref/metrics/conll_coref_scores.py) are. The weights-only unpickler refuses numpy scalars, so
every coref run cut off after a checkpoint crashed when it went on. Allowing numpy's scalar constructor and dtype lets
those plain numbers load; no other global is allowed, so a checkpoint still cannot run code when it is read.
"""
import numpy
import torch

# a pickled numpy number: scalar(dtype, bytes); its dtype pickles as numpy.dtype plus its class (numpy.dtypes.*DType)
NUMBERS = (numpy.bool_, numpy.int32, numpy.int64, numpy.float16, numpy.float32, numpy.float64)
NUMPY_SCALAR_GLOBALS = [numpy._core.multiarray.scalar, numpy.dtype] + [type(numpy.dtype(n)) for n in NUMBERS]


def allow_numpy_scalars_in_checkpoints() -> None:
    torch.serialization.add_safe_globals(NUMPY_SCALAR_GLOBALS)
