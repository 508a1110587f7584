"""One direction of the biLM: a stack of LSTMs with cell clip, projection and projection clip (PAPER.md "The biLM").

Speed (issue: >= 2x allennlp on CPU): the input half of every gate pre-activation is one GEMM over all time steps;
only ``W_h @ h`` stays inside the time loop, over the rows still running (rows are sorted longest first, so the
running rows are a prefix). The backward direction reverses each sentence within its length and runs the same loop.
The big temporaries (the input part of the gates, each step's gates) are written into memory kept from the last call
when autograd is not recording (``_scratch``).
"""
import threading
import weakref
from typing import Optional, Tuple

import torch
from torch import nn

_scratch_memory = threading.local()  # per thread (the two directions run in two): layer -> {name: flat tensor}


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
    kept = getattr(_scratch_memory, "by_layer", None)
    if kept is None:
        kept = _scratch_memory.by_layer = weakref.WeakKeyDictionary()
    mine = kept.setdefault(owner, {})
    size, like = shape[0] * shape[1], operands[0]
    memory = mine.get(name)
    if memory is None or memory.numel() < size or memory.dtype != like.dtype or memory.device != like.device:
        memory = mine[name] = like.new_empty(size)
    return memory[:size].view(shape)


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

    def _step(self, pre_t: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """One time step, feature-major: pre_t (4C, n) input part of the gates, h (P, n), c (C, n)."""
        gates = _scratch(self, "gates", pre_t.shape, pre_t, h, self.state_weight)
        i, j, f, o = torch.addmm(pre_t, self.state_weight, h, out=gates).chunk(4, dim=0)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
        if self.cell_clip:
            c = c.clamp(-self.cell_clip, self.cell_clip)
        h = torch.mm(self.projection, torch.sigmoid(o) * torch.tanh(c))
        if self.proj_clip:
            h = h.clamp(-self.proj_clip, self.proj_clip)
        return h, c

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
        # a time step (measured 101 vs 59 GFLOP/s), and each gate is a contiguous row block of the (4C, n) result.
        bias = (self.bias + self.forget_bias).unsqueeze(1)
        weights = (bias, self.input_weight)
        if distinct is None:
            x = pack(inputs).t()
            out = _scratch(self, "input_part", (bias.size(0), x.size(1)), x, *weights)
            pre = torch.addmm(bias, self.input_weight, x, out=out)  # (4C, N)
        else:  # full size, 803 positions of 362 distinct tokens: GEMM 145 -> 61 ms, plus 30 ms for the gather
            vectors, index = distinct
            index = pack(index)
            out = _scratch(self, "distinct_part", (bias.size(0), vectors.size(0)), vectors, *weights)
            distinct_part = torch.addmm(bias, self.input_weight, vectors.t(), out=out)
            out = _scratch(self, "input_part", (bias.size(0), index.numel()), vectors, *weights)
            pre = torch.index_select(distinct_part, 1, index, out=out)
        h, c = state[0].t(), state[1].t()
        finished_h, finished_c = [], []  # final states of rows that ended, highest rows first
        outputs, running = [], batch
        # split, not pre[:, offset:offset + n]: in training, slicing would make autograd add a full-size (4C, N) zero
        # gradient per step (pretraining ran 1.5x slower); split's backward concatenates the step gradients once
        for n, pre_t in zip(sizes, pre.split(sizes, dim=1)):
            if n < running:  # rows n..running-1 have ended: keep their final state, go on with a compact state
                finished_h.append(h[:, n:])
                finished_c.append(c[:, n:])
                h, c, running = h[:, :n].contiguous(), c[:, :n].contiguous(), n
            h, c = self._step(pre_t, h, c)
            outputs.append(h)
        packed_out = torch.cat(outputs, dim=1).t() if outputs else inputs.new_zeros(0, proj)  # (N, P)
        if full:
            out = packed_out.reshape(steps, batch, proj)
        else:
            out = inputs.new_zeros(steps, batch, proj)
            out[:len(sizes)][running_mask] = packed_out
        final_h = torch.cat([h, *reversed(finished_h)], dim=1).t()
        final_c = torch.cat([c, *reversed(finished_c)], dim=1).t()
        return out.transpose(0, 1).contiguous(), (final_h, final_c)


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps (B, T, ...), leaving the padding where it is. An involution."""
    steps = x.size(1)
    t = torch.arange(steps, device=x.device).unsqueeze(0)
    index = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))
