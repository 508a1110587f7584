"""One direction of the biLM: a stack of LSTMs with cell clip, projection and projection clip (PAPER.md "The biLM").

Speed (issue: >= 2x allennlp on CPU): the input half of every gate pre-activation is one GEMM over all time steps;
only ``W_h @ h`` stays inside the time loop, over the rows still running (rows are sorted longest first, so the
running rows are a prefix). The backward direction reverses each sentence within its length and runs the same loop.
The big temporaries (the input part of the gates, each step's gates) are written into memory kept from the last call
when autograd is not recording (``_scratch``).

Inference (autograd not recording, CPU, float32) runs the steps batch-major through oneDNN's linear with the weights
prepacked (``_onednn_weights``); training keeps the feature-major MKL path. ``ELMO_ONEDNN=0`` turns oneDNN off.
Under bfloat16 autocast (``elmo_module.precision``) inference prepacks bfloat16 copies instead, the input part's
weight too, and training's GEMMs are autocast's; either way the gates come back to float32 before the nonlinearities
(the cell state is float32) and the layer returns float32.
"""
import functools
import os
import threading
import weakref
from typing import NamedTuple, Optional, Tuple

import torch
from torch import nn

from elmo_module import precision

_scratch_memory = threading.local()  # per thread (the two directions run in two): layer -> {name: flat tensor}
_packed_memory = weakref.WeakKeyDictionary()  # layer -> (its weights' (address, version), their oneDNN copies)
USE_ONEDNN = os.environ.get("ELMO_ONEDNN", "1") != "0"  # 0: the plain MKL path everywhere (for comparisons)


def _scratch(owner: nn.Module, name: str, shape: Tuple[int, int],
             *operands: torch.Tensor) -> Optional[torch.Tensor]:
    """Memory for an ``out=`` tensor of ``shape`` (dtype and device of the first operand), kept by ``owner`` between
    calls; None when autograd records one of the op's ``operands`` (``out=`` ops cannot be differentiated).

    Fresh memory costs Linux a page fault per 4 KB on first touch: ~20 ms per call for the 54 MB input part of a
    full-size layer, and per step for the 2 MB of gates; reusing it made the full-size biLM ~10 % faster (README
    "Speed"). The cost is that each layer keeps its largest temporaries (for 803 positions: 54 MB per layer and
    direction) after the call.
    """
    if torch.is_grad_enabled() and any(t.requires_grad for t in operands):
        return None
    if torch.is_autocast_enabled(operands[0].device.type):  # autocast picks the op's output dtype; out= would not
        return None
    kept = getattr(_scratch_memory, "by_layer", None)
    if kept is None:
        kept = _scratch_memory.by_layer = weakref.WeakKeyDictionary()
    mine = kept.setdefault(owner, {})
    size, like = shape[0] * shape[1], operands[0]
    memory = mine.get(name)
    if memory is None or memory.numel() < size or memory.dtype != like.dtype or memory.device != like.device:
        memory = mine[name] = like.new_empty(size)
    return memory[:size].view(shape)


@functools.lru_cache(maxsize=None)
def _onednn_works() -> bool:
    """Whether this torch has oneDNN's prepacked linear (``torch.ops.mkldnn``, CPU builds with mkldnn) and it computes
    x @ W^T (+ other) as torch.mm does in float64 (checked once, on small random operands)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        g = torch.Generator().manual_seed(0)
        w, x, other = (torch.randn(*shape, generator=g) for shape in ((24, 16), (5, 16), (5, 24)))
        packed = torch.ops.mkldnn._reorder_linear_weight(w)
        got = (torch.ops.mkldnn._linear_pointwise.binary(x, other, packed, None, "add"),
               torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""))
        product = x.double() @ w.double().t()
        return all(torch.allclose(y.double(), e, rtol=0, atol=1e-5) for y, e in zip(got, (product + other, product)))
    except (AttributeError, RuntimeError):  # no such op / not compiled for this CPU
        return False


@functools.lru_cache(maxsize=None)
def _onednn_bfloat16_works() -> bool:
    """Whether oneDNN runs bfloat16 linear natively here (AVX-512 BF16 or AMX: torch's own test) and computes it as
    bfloat16 products summed in float32 should (small random operands against float64, to bfloat16's 2**-8)."""
    try:
        if not (_onednn_works() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
            return False
        g = torch.Generator().manual_seed(0)
        w, x, other = (torch.randn(*shape, generator=g).bfloat16() for shape in ((24, 16), (5, 16), (5, 24)))
        packed = torch.ops.mkldnn._reorder_linear_weight(w)
        product = x.double() @ w.double().t()
        got = torch.ops.mkldnn._linear_pointwise.binary(x, other, packed, None, "add").double()
        expected = product + other.double()
        return bool(((got - expected).abs() <= 2 ** -8 * expected.abs() + 1e-2).all())
    except (AttributeError, RuntimeError):
        return False


class Packed(NamedTuple):
    """oneDNN's prepacked copies of a layer's weights (``ProjectedLstmLayer._onednn_weights``)."""
    state: torch.Tensor
    projection: torch.Tensor
    input: Optional[torch.Tensor]  # bfloat16 only: the float32 input part stays on MKL's addmm, as before
    dtype: torch.dtype


class ProjectedLstmLayer(nn.Module):
    """TF ``LSTMCell(num_proj, cell_clip, proj_clip)``; weights in TF layout, gate order i, j, f, o.

    ``bias`` is the file's bias; TF's constant forget bias of 1.0 is added once per call (not stored, so a
    load -> save round trip is bit-exact).
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int,
                 cell_clip: Optional[float], proj_clip: Optional[float]):
        super().__init__()
        self.input_weight = nn.Parameter(torch.empty(4 * cell_dim, input_dim))
        self.state_weight = nn.Parameter(torch.empty(4 * cell_dim, projection_dim))
        self.bias = nn.Parameter(torch.zeros(4 * cell_dim))
        self.projection = nn.Parameter(torch.empty(projection_dim, cell_dim))
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.cell_dim, self.projection_dim = cell_dim, projection_dim
        for w in (self.input_weight, self.state_weight, self.projection):
            nn.init.uniform_(w, -0.05, 0.05)
        forget = torch.zeros(4 * cell_dim)
        forget[2 * cell_dim:3 * cell_dim] = 1.0
        self.register_buffer("forget_bias", forget, persistent=False)

    def _step(self, pre_t: torch.Tensor, h: torch.Tensor, c: torch.Tensor, packed: Optional[Packed] = None):
        """One time step, feature-major: pre_t (4C, n) input part of the gates, h (P, n), c (C, n); or, given
        ``packed`` (``_onednn_weights``), batch-major: pre_t (n, 4C), h (n, P), c (n, C)."""
        if packed is None:
            gates = _scratch(self, "gates", pre_t.shape, pre_t, h, self.state_weight)
            gates = torch.addmm(pre_t, self.state_weight, h, out=gates)
        else:
            gates = torch.ops.mkldnn._linear_pointwise.binary(h, pre_t, packed.state, None, "add")
        gates = gates.float()  # a bfloat16 GEMM's output: the nonlinearities and the cell state in float32
        i, j, f, o = gates.chunk(4, dim=0 if packed is None else 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
        if self.cell_clip:
            c = c.clamp(-self.cell_clip, self.cell_clip)
        m = torch.sigmoid(o) * torch.tanh(c)
        if packed is None:
            h = torch.mm(self.projection, m)
        else:
            h = torch.ops.mkldnn._linear_pointwise(m.to(packed.dtype), packed.projection, None, "none", [], "")
        if self.proj_clip:
            h = h.clamp(-self.proj_clip, self.proj_clip)
        return h, c

    def _onednn_weights(self, *operands: torch.Tensor) -> Optional[Packed]:
        """oneDNN's prepacked copies of (state_weight, projection) when this call can use them (autograd not
        recording, CPU, float32 operands, oneDNN present and correct), else None; under bfloat16 autocast, bfloat16
        copies of those and of input_weight (None where oneDNN has no native bfloat16: autocast's GEMMs then).

        Why: torch 2.9.1's MKL 2024.2 runs the recurrent GEMM (16384 x 512 by 8-32 rows) at 12-49 GFLOP/s on this AMD
        EPYC (Zen 4) core, oneDNN's linear on the prepacked weight at 47-89 (1 thread, interleaved); a full-size
        step takes 9.5 instead of 15.7 ms at 32 rows, 3.6 instead of 13.8 at 8, and the full-size ``Elmo`` forward
        runs 1.90-1.94x as fast (``python -m elmo_module.benchmark --threads 1 --batches 6 --against plain``; README
        "Speed"). oneDNN's linear takes batch-major input, hence the two layouts. The copies (40 MB per full-size
        layer) are kept per layer and made again when a weight changes in place (its version) or is replaced (its
        address), as ``CharCnnTokenEncoder``'s cache is emptied.
        """
        weights = (self.state_weight, self.projection)
        tensors = (*operands, *self.parameters())
        if (not USE_ONEDNN or not torch.backends.mkldnn.enabled
                or any(t.device.type != "cpu" or t.dtype != torch.float32 for t in tensors)
                or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)) or not _onednn_works()):
            return None
        dtype = torch.float32
        if precision.bfloat16_active("cpu"):
            if not _onednn_bfloat16_works():
                return None
            dtype, weights = torch.bfloat16, (*weights, self.input_weight)
        key = (dtype, *((w.data_ptr(), w._version) for w in weights))
        kept = _packed_memory.get(self)
        if kept is None or kept[0] != key:
            copies = [torch.ops.mkldnn._reorder_linear_weight(w.detach().to(dtype)) for w in weights]
            kept = _packed_memory[self] = (key, Packed(*copies[:2], copies[2] if len(copies) > 2 else None, dtype))
        return kept[1]

    def forward(self, inputs: torch.Tensor, active: torch.Tensor, state: Tuple[torch.Tensor, torch.Tensor],
                distinct: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        """inputs (B, T, in), rows sorted by length (longest first) and already reversed for the backward
        direction; ``active[t]`` = number of rows with length > t; state = (h (B, P), c (B, C)).
        ``distinct`` = (vectors (U, in), index (B, T)) when ``inputs = vectors[index]`` (the token layer repeats a
        word's vector at each occurrence): the input GEMM then runs on the U distinct vectors only.
        Returns outputs (B, T, P) (zero past each row's length) and the state after each row's last token."""
        batch, steps, _ = inputs.shape
        cells, proj = self.cell_dim, self.projection_dim
        sizes = active.tolist()
        # Time-major packing (a PackedSequence's order): step t's running rows are rows [0, n_t) of block t, so the
        # input GEMM skips padded positions and each step's block is a contiguous column range.
        full = len(sizes) == steps and all(n == batch for n in sizes)
        running_mask = None if full else torch.arange(batch, device=inputs.device) < active.unsqueeze(1)

        def pack(x):  # (B, T, ...) -> (N, ...), the running positions in time-major order
            x = x.transpose(0, 1)
            return x.reshape(steps * batch, *x.shape[2:]) if full else x[:len(sizes)][running_mask]

        # Feature-major (transposed) layout: the state is (P, n) and (C, n), so the recurrent GEMM is
        # W (4C x P) @ h (P x n), which MKL runs ~1.7x faster on one core than h (n x P) @ W^T for the 16-32 rows of
        # a time step (measured 101 vs 59 GFLOP/s, torch 1.12), and each gate is a contiguous row block of the
        # (4C, n) result. Batch-major (positions along dim 0) where oneDNN runs the steps (``_onednn_weights``).
        packed = self._onednn_weights(inputs, *state, *(distinct[:1] if distinct else ()))
        d = 1 if packed is None else 0  # the positions' dimension

        def rows(t):  # (positions, features) <-> this call's layout
            return t.t() if packed is None else t

        def gates_shape(positions):
            return (4 * cells, positions) if packed is None else (positions, 4 * cells)

        bias = self.bias + self.forget_bias

        def input_part(name, x):  # x (positions, in) -> the input part of the gates, (4C, N) or (N, 4C)
            if packed is not None and packed.input is not None:  # bfloat16 (its float32 bias goes to the GEMM as is)
                return torch.ops.mkldnn._linear_pointwise(x.to(packed.dtype), packed.input, bias, "none", [], "")
            out = _scratch(self, name, gates_shape(x.size(0)), x, bias, self.input_weight)
            if packed is None:
                return torch.addmm(bias.unsqueeze(1), self.input_weight, x.t(), out=out)
            return torch.addmm(bias, x, self.input_weight.t(), out=out)

        if distinct is None:
            pre = input_part("input_part", pack(inputs))
        else:  # full size, 803 positions of 362 distinct tokens: GEMM 145 -> 61 ms, plus 30 ms for the gather
            vectors, index = distinct
            index = pack(index)
            distinct_part = input_part("distinct_part", vectors)
            out = _scratch(self, "input_part", gates_shape(index.numel()), distinct_part)
            pre = torch.index_select(distinct_part, d, index, out=out)
        h, c = rows(state[0]), rows(state[1])
        if packed is not None:
            h = h.to(packed.dtype)  # the recurrent GEMM's operand (a no-op in float32)
        finished_h, finished_c = [], []  # final states of rows that ended, highest rows first
        outputs, running = [], batch
        # split, not pre[:, offset:offset + n]: in training, slicing would make autograd add a full-size (4C, N) zero
        # gradient per step (pretraining ran 1.5x slower); split's backward concatenates the step gradients once
        for n, pre_t in zip(sizes, pre.split(sizes, dim=d)):
            if n < running:  # rows n..running-1 have ended: keep their final state, go on with a compact state
                finished_h.append(h.narrow(d, n, running - n))
                finished_c.append(c.narrow(d, n, running - n))
                h, c, running = h.narrow(d, 0, n).contiguous(), c.narrow(d, 0, n).contiguous(), n
            h, c = self._step(pre_t, h, c, packed)
            outputs.append(h)
        packed_out = rows(torch.cat(outputs, dim=d)).float() if outputs else inputs.new_zeros(0, proj)  # (N, P)
        if full:
            out = packed_out.reshape(steps, batch, proj)
        else:
            out = inputs.new_zeros(steps, batch, proj)
            out[:len(sizes)][running_mask] = packed_out
        final_h = rows(torch.cat([h.float(), *(t.float() for t in reversed(finished_h))], dim=d))
        final_c = rows(torch.cat([c, *reversed(finished_c)], dim=d))
        return out.transpose(0, 1).contiguous(), (final_h, final_c)


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps (B, T, ...), leaving the padding where it is. An involution."""
    steps = x.size(1)
    t = torch.arange(steps, device=x.device).unsqueeze(0)
    index = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))
