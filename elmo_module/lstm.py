"""One direction of the biLM: a stack of LSTMs with cell clip, projection and projection clip (PAPER.md "The biLM").

Speed (issue: >= 2x allennlp on CPU): the input half of every gate pre-activation is one GEMM over all time steps;
only ``h @ W_h`` stays inside the time loop, over the rows still running (rows are sorted longest first, so the
running rows are a prefix). The backward direction reverses each sentence within its length and runs the same loop.
"""
from typing import Optional, Tuple

import torch
from torch import nn


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

    def forward(self, inputs: torch.Tensor, active: torch.Tensor, state: Tuple[torch.Tensor, torch.Tensor]):
        """inputs (B, T, in), rows sorted by length (longest first) and already reversed for the backward
        direction; ``active[t]`` = number of rows with length > t; state = (h (B, P), c (B, C)).
        Returns outputs (B, T, P) (zero past each row's length) and the state after each row's last token."""
        batch, steps, _ = inputs.shape
        cells, proj = self.cell_dim, self.projection_dim
        # gate-major layouts, (steps, 4, B, C) and (4, P, C), so every gate is a contiguous (n, C) block: torch's
        # elementwise kernels (tanh above all) are several times slower on the strided column slices of (n, 4C)
        pre = torch.mm(inputs.reshape(batch * steps, -1), self.input_weight.t())
        pre = pre.view(batch, steps, 4, cells).permute(1, 2, 0, 3).contiguous()
        state_weight = self.state_weight.view(4, cells, proj).transpose(1, 2)
        bias = (self.bias + self.forget_bias).view(4, 1, cells)
        projection_t = self.projection.t()
        h, c = state
        outputs = []
        # unbind, not pre[t]: in training, indexing pre[t] would make autograd add a full-size zero gradient per step
        for pre_t, n in zip(pre.unbind(0), active.tolist()):
            gates = torch.baddbmm(bias, h[:n].expand(4, n, proj), state_weight) + pre_t[:, :n]
            i, j, f, o = gates.unbind(0)
            c_new = torch.sigmoid(f) * c[:n] + torch.sigmoid(i) * torch.tanh(j)
            if self.cell_clip:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = torch.mm(torch.sigmoid(o) * torch.tanh(c_new), projection_t)
            if self.proj_clip:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h_new if n == batch else torch.cat([h_new, h_new.new_zeros(batch - n, proj)]))
            # finished rows keep their final state; cat (not in-place) keeps autograd usable for pretraining
            h = h_new if n == batch else torch.cat([h_new, h[n:]])
            c = c_new if n == batch else torch.cat([c_new, c[n:]])
        out = torch.stack(outputs, dim=1) if outputs else inputs.new_zeros(batch, 0, self.projection_dim)
        if out.size(1) < steps:
            out = torch.cat([out, out.new_zeros(batch, steps - out.size(1), out.size(2))], dim=1)
        return out, (h, c)


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps (B, T, ...), leaving the padding where it is. An involution."""
    steps = x.size(1)
    t = torch.arange(steps, device=x.device).unsqueeze(0)
    index = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))
