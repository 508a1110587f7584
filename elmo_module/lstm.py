"""One direction of the biLM: a stack of LSTMs with cell clip, projection and projection clip (arXiv:1802.05365v2
Sec. 3.4, p. 4 (4096 cells, 512 projections, residual connection); the clips as bilm-tf's options).

Speed (the aim: >= 2x allennlp on CPU): the input half of every gate pre-activation is one GEMM over all time steps;
only ``W_h @ h`` stays inside the time loop, over the rows still running (rows are sorted longest first, so the
running rows are a prefix). The backward direction reverses each sentence within its length and runs the same loop.
The big temporaries (the input part of the gates, each step's gates) are written into memory kept from the last call
when autograd is not recording (``_scratch``).

Inference (autograd not recording, CPU, float32) runs the steps batch-major through oneDNN's linear with the weights
prepacked (``_onednn_weights``); training keeps the feature-major MKL path. ``ELMO_ONEDNN=0`` turns oneDNN off.
Training runs the time loop as one autograd node (``_Recurrence``: the recurrent and projection weights' gradients
as one GEMM each over all positions); ``ELMO_LSTM_RECURRENCE=0`` records the step loop instead. On CUDA that node
is replayed as CUDA graphs (``_recurrence``; ``ELMO_CUDA_GRAPHS=0`` launches its kernels one by one).
Under bfloat16 autocast (``elmo_module.precision``) inference prepacks bfloat16 copies instead, the input part's
weight too, and training's GEMMs run in bfloat16 too; either way the gates come back to float32 before the
nonlinearities (the cell state is float32) and the layer returns float32.
"""
import functools
import gc
import threading
import warnings
import weakref
from typing import NamedTuple, Optional, Tuple

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from elmo_module import precision
from elmo_module.flags import env_flag

_scratch_memory = threading.local()  # per thread (the two directions run in two): layer -> {name: flat tensor}
_packed_memory = weakref.WeakKeyDictionary()  # layer -> (its weights' (address, version), their oneDNN copies)
USE_ONEDNN = env_flag("ELMO_ONEDNN", True)  # 0: the plain MKL path everywhere (for comparisons)
# 0: training records the step loop's autograd graph (``_step``) instead of ``_Recurrence`` (the reference of
# tests/elmo_module/test_lstm_backward.py, and the "old" side of tools/lstm_backward_bench.py)
USE_RECURRENCE = env_flag("ELMO_LSTM_RECURRENCE", True)
# 0: on CUDA, ``_Recurrence`` runs its kernels one launch at a time instead of replaying them as CUDA graphs
USE_CUDA_GRAPHS = env_flag("ELMO_CUDA_GRAPHS", True)
_graphs = weakref.WeakKeyDictionary()  # layer -> {a call's shapes: its graphed _Recurrence} (``_recurrence``)
GRAPHS_PER_LAYER = 4


def _wide(t: torch.Tensor) -> torch.Tensor:
    """A bfloat16 GEMM's output in float32 for the gate math; float32 (a no-op, as ``.float()`` was) and float64 as
    they are."""
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


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


class _Recurrence(torch.autograd.Function):
    """The time loop of one ``ProjectedLstmLayer`` call in training, as one autograd node (pretraining speed).

    Recorded step by step (``_step``), autograd computes the gradients of ``state_weight`` and ``projection`` as one
    small GEMM per time step and adds each into the sum so far (in bfloat16 with a cast per step too): at full size
    12 % of a bfloat16 training step (docs/speed.md). Here the forward runs the steps without a graph and keeps what
    the backward needs; the backward walks the steps in reverse computing only the data gradients (dh, dc, each
    step's gate gradient), then each weight's gradient as ONE GEMM over all positions: d state_weight = dGates @
    Hprev^T, d projection = dHraw @ M^T. dGates is also the gradient of ``pre`` (the input part of the gates), so
    autograd of the input GEMM gives input_weight's, bias's and the inputs' gradients as before.

    Layout as ``ProjectedLstmLayer.forward`` (feature-major, time-major packed): pre (4C, N), step t's running rows
    are columns [offsets[t], offsets[t + 1]); h0 (P, B), c0 (C, B). The cell is TF's ``LSTMCell`` as ``_step`` runs
    it: gates i, j, f, o (forget bias already in ``pre``); c = sigmoid(f) c + sigmoid(i) tanh(j) clipped to
    +-cell_clip; h = W_p (sigmoid(o) tanh(c)) clipped to +-proj_clip. A clip passes the gradient where
    -clip <= x <= clip, as torch.clamp's backward (and tf.clip_by_value's, bilm-tf's clipping) does.

    ``dtype`` is the GEMMs' dtype: bfloat16 under autocast (``elmo_module.precision``: the weights are cast once per
    call; the gate math, the cell state and the data gradients stay float32; the weight gradients are bfloat16 GEMMs
    returned as float32), else the weights' own. Returns the outputs h (P, N) and every row's final state (h (P, B),
    c (C, B)) in float32 (float64 for float64 weights). Device-agnostic; on CUDA replayed as graphs (``_recurrence``).

    The forward runs ``_step``'s ops on same-shaped contiguous per-step tensors (torch's vectorized loops and their
    scalar tails round sigmoid and tanh differently), so float32 outputs are bit-identical to the step loop's. The
    gradients differ from the step loop's by rounding only: one GEMM sums over all positions where the loop summed
    a GEMM per step, and dh's and dc's terms are added in another order. Per-step tensors rather than (rows, N)
    buffers also for memory: glibc maps allocations above its mmap threshold (at most 32 MB) afresh at every call,
    a page fault per 4 KB, where freed per-step tensors (8 MB at full size) are reused.
    """

    @staticmethod
    def forward(ctx, pre, h0, c0, state_weight, projection, sizes, cell_clip, proj_clip, dtype):
        with torch.autocast(pre.device.type, enabled=False):  # the casts are explicit here
            wide = torch.promote_types(dtype, torch.float32)  # the gate math's dtype
            (p, batch), cells, n_all = h0.shape, c0.size(0), sum(sizes)
            pre_dtype, w, w_p, pre = pre.dtype, state_weight.to(dtype), projection.to(dtype), pre.to(dtype)  # once
            h_prev, m_all = pre.new_empty(p, n_all), pre.new_empty(cells, n_all)  # the weight gradients' operands
            out = h0.new_empty(p, n_all, dtype=wide)
            final_h, final_c = h0.new_empty(p, batch, dtype=wide), h0.new_empty(cells, batch, dtype=wide)
            acts, cell, tanh_c, cell_ok, proj_ok = [], [], [], [], []  # per step
            h, c, running, offset = h0, c0.to(wide), batch, 0
            for n in sizes:
                if n < running:  # rows n..running-1 ended at the last step: their final state
                    final_h[:, n:running], final_c[:, n:running], running = h[:, n:running], c[:, n:running], n
                    h, c = h[:, :n].contiguous(), c[:, :n]
                cols = slice(offset, offset + n)
                h_prev[:, cols] = h
                gates = _wide(torch.addmm(pre[:, cols], w, h.to(dtype)))  # (4C, n), as _step
                i, j, f, o = gates.chunk(4)
                i.sigmoid_(), j.tanh_(), f.sigmoid_(), o.sigmoid_()
                c = torch.mul(f, c).add_(i * j)  # as _step rounds it
                if cell_clip:
                    cell_ok.append(torch.le(c.abs(), cell_clip, out=torch.empty_like(c)))  # 1 where the clip passes
                    c.clamp_(-cell_clip, cell_clip)
                tc = torch.tanh(c)
                m = (o * tc).to(dtype)  # bfloat16: the projection GEMM's operand
                m_all[:, cols] = m
                h = torch.mm(w_p, m)
                if proj_clip:
                    proj_ok.append(torch.le(h.abs(), proj_clip, out=torch.empty_like(h, dtype=wide)))
                    h.clamp_(-proj_clip, proj_clip)
                out[:, cols] = h
                acts.append(gates), cell.append(c), tanh_c.append(tc)
                offset += n
            final_h[:, :running], final_c[:, :running] = h, c
        ctx.sizes, ctx.clips, ctx.dtypes = sizes, (cell_clip, proj_clip), (pre_dtype, state_weight.dtype)
        ctx.steps = acts, cell, tanh_c, cell_ok, proj_ok  # internal tensors nobody else sees
        ctx.initial_dtypes = h0.dtype, c0.dtype
        ctx.save_for_backward(h_prev, m_all, w, w_p, c0)
        return out, final_h, final_c

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_final_h, d_final_c):
        h_prev, m_all, w, w_p, c0 = ctx.saved_tensors
        acts, cell, tanh_c, cell_ok, proj_ok = ctx.steps
        (cell_clip, proj_clip), sizes = ctx.clips, ctx.sizes
        sigmoid_backward, tanh_backward = torch.ops.aten.sigmoid_backward, torch.ops.aten.tanh_backward
        with torch.autocast(w.device.type, enabled=False):
            dtype, cells, n_all = w.dtype, c0.size(0), h_prev.size(1)
            d_gates = w.new_empty(4 * cells, n_all)  # d (pre + W h) at every position: pre's gradient
            d_h_raw = torch.empty_like(h_prev)  # d (W_p m): h's gradient before the projection clip
            # memory for the steps' temporaries, taken once (fresh memory costs a page fault per 4 KB: at full size
            # a new 8 MB gate gradient per step cost more than the GEMMs saved)
            wide, most = acts[0].dtype, 4 * cells * sizes[0]
            gate_memory, temp_memory = acts[0].new_empty(most), acts[0].new_empty(most // 4)
            low_memory = w.new_empty(most) if dtype != wide else None  # the gate gradient in bfloat16
            dh = dc = None  # the gradient on the state the later step started from (its rows)
            offset = n_all
            for t in reversed(range(len(sizes))):
                n, later = sizes[t], sizes[t + 1] if t + 1 < len(sizes) else 0
                cols = slice(offset - n, offset)
                offset -= n
                temp = temp_memory[:cells * n].view(cells, n)
                # h_t and c_t: the output's gradient, the later step's (its rows), the final state's (rows ending here)
                d_h = d_out[:, cols].clone()
                d_c = torch.empty_like(cell[t])
                if later:
                    d_h[:, :later] += dh
                    d_c[:, :later] = dc
                if later < n:
                    d_h[:, later:] += d_final_h[:, later:n]
                    d_c[:, later:] = d_final_c[:, later:n]
                if proj_clip:
                    d_h.mul_(proj_ok[t])
                d_h = d_h.to(dtype)
                d_h_raw[:, cols] = d_h
                d_m = _wide(torch.mm(w_p.t(), d_h))
                i, j, f, o = acts[t].chunk(4)
                d_g = gate_memory[:4 * cells * n].view(4 * cells, n)
                d_i, d_j, d_f, d_o = d_g.chunk(4)
                # m = sigmoid(o) tanh(c)
                sigmoid_backward.grad_input(torch.mul(d_m, tanh_c[t], out=temp), o, grad_input=d_o)
                d_c += tanh_backward.grad_input(d_m.mul_(o), tanh_c[t], grad_input=temp)
                if cell_clip:
                    d_c.mul_(cell_ok[t])
                c_before = c0[:, :n] if t == 0 else cell[t - 1][:, :n]
                # c = sigmoid(f) c_before + sigmoid(i) tanh(j)
                sigmoid_backward.grad_input(torch.mul(d_c, c_before, out=temp), f, grad_input=d_f)
                sigmoid_backward.grad_input(torch.mul(d_c, j, out=temp), i, grad_input=d_i)
                tanh_backward.grad_input(torch.mul(d_c, i, out=temp), j, grad_input=d_j)
                dc = d_c.mul_(f)
                if low_memory is not None:
                    d_g = low_memory[:4 * cells * n].view(4 * cells, n).copy_(d_g)
                d_gates[:, cols] = d_g
                if t or ctx.needs_input_grad[1]:
                    dh = _wide(torch.mm(w.t(), d_g))
            needs = ctx.needs_input_grad
            # rows of length 0 keep their initial state: the final state's gradient goes to it
            d_h0 = torch.cat([dh, d_final_h[:, sizes[0]:]], dim=1).to(ctx.initial_dtypes[0]) if needs[1] else None
            d_c0 = torch.cat([dc, d_final_c[:, sizes[0]:]], dim=1).to(ctx.initial_dtypes[1]) if needs[2] else None
            # the weights' gradients: one GEMM each over all positions
            d_w = _wide(torch.mm(d_gates, h_prev.t())).to(ctx.dtypes[1]) if needs[3] else None
            d_w_p = _wide(torch.mm(d_h_raw, m_all.t())).to(ctx.dtypes[1]) if needs[4] else None
        return d_gates.to(ctx.dtypes[0]), d_h0, d_c0, d_w, d_w_p, None, None, None, None


def _recurrence(layer: "ProjectedLstmLayer", pre: torch.Tensor, h: torch.Tensor, c: torch.Tensor, sizes):
    """``_Recurrence`` of ``layer``; on CUDA replayed as a CUDA graph pair (forward and backward) per call shape.

    Why: on an H200 a training step of the full-size biLM spent most of its time launching kernels (~4,600 per
    step, the GPU busy ~15 % of the time; docs/speed.md#on-a-gpu): the time loop launches ~15 kernels per step and
    direction forward and ~25 backward, each too small to fill the GPU. A graph replays them in one launch.
    Pretraining's windows all have one shape (batch x unroll, every row full), so each layer captures once;
    another shape (an epoch's last window) captures its own, the oldest of more than ``GRAPHS_PER_LAYER`` dropped.
    Batches of ragged rows run their kernels one by one. The graph reads the weights where they are (an optimizer
    updates them in place; weights moved elsewhere are copied in); the other inputs are copied into the graph's own
    tensors (``torch.cuda.make_graphed_callables``). Its outputs and the gradients it returns are the graph's memory,
    valid until this layer's next call: every caller consumes them within the training step.
    """
    args = (pre, h, c, layer.state_weight, layer.projection)
    static = (layer.cell_clip, layer.proj_clip, pre.dtype)
    if not (USE_CUDA_GRAPHS and pre.is_cuda and min(sizes) == max(sizes)):
        # ragged rows (sentences of different lengths) change shape from batch to batch: a capture each (three
        # warm-up runs and two captures) would cost more than it saves, so only full windows are graphed
        return _Recurrence.apply(*args, sizes, *static)
    key = (tuple(sizes), static, tuple((t.shape, t.stride(), t.dtype, t.requires_grad) for t in args))
    graphs = _graphs.setdefault(layer, {})
    graphed = graphs.get(key)
    # capture refuses autocast's cache (_Recurrence casts explicitly); the graph's streams are the current device's
    with torch.autocast("cuda", enabled=False), torch.cuda.device(pre.device):
        if graphed is None:
            while len(graphs) >= GRAPHS_PER_LAYER:
                graphs.pop(next(iter(graphs)))
            # the weights as aliases (their memory, leaves of their own): the captured autograd graph then holds no
            # gradient accumulator of the real weights (one made on the capture's side stream would warn and sync
            # at every step); the capture itself warns so once (its warm-up and capture streams differ): silenced
            samples = (tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in args[:3])
                       + tuple(w.detach().requires_grad_(w.requires_grad) for w in args[3:]))
            # A graph freed during a capture breaks it (cudaErrorStreamCaptureInvalidated, seen: a dropped graph or
            # a dead model's lives in a reference cycle until the cyclic collector runs): collect now, not during
            collecting = gc.isenabled()
            gc.collect()
            gc.disable()
            try:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="The AccumulateGrad node's stream does not match")
                    graphed = graphs[key] = torch.cuda.make_graphed_callables(
                        lambda *a: _Recurrence.apply(*a, list(sizes), *static), samples)
            finally:
                if collecting:
                    gc.enable()
        return graphed(*args)


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
        gates = _wide(gates)  # a bfloat16 GEMM's output: the nonlinearities and the cell state in float32
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
        recorded = torch.is_grad_enabled() and any(t.requires_grad for t in (pre, h, c, *self.parameters()))
        if USE_RECURRENCE and recorded and packed is None and sizes:
            # training: the loop as one autograd node (_Recurrence); its GEMMs in pre's dtype (the input GEMM's:
            # bfloat16 under autocast)
            packed_out, final_h, final_c = (t.t() for t in _recurrence(self, pre, h, c, sizes))
        else:
            packed_out, (final_h, final_c) = self._loop(pre, h, c, sizes, packed)
            packed_out = packed_out if packed_out is not None else inputs.new_zeros(0, proj)  # (N, P)
        if full:
            out = packed_out.reshape(steps, batch, proj)
        else:
            out = inputs.new_zeros(steps, batch, proj)
            out[:len(sizes)][running_mask] = packed_out
        return out.transpose(0, 1).contiguous(), (final_h, final_c)

    def _loop(self, pre: torch.Tensor, h: torch.Tensor, c: torch.Tensor, sizes, packed: Optional[Packed]):
        """The time loop step by step (``_step``): inference, and training where ``_Recurrence`` is not used.
        Returns the outputs (N, P) (None without steps) and the final state of every row ((B, P), (B, C))."""
        d = 1 if packed is None else 0  # the positions' dimension

        def rows(t):  # this call's layout -> (positions, features)
            return t.t() if packed is None else t

        if packed is not None:
            h = h.to(packed.dtype)  # the recurrent GEMM's operand (a no-op in float32)
        finished_h, finished_c = [], []  # final states of rows that ended, highest rows first
        outputs, running = [], h.size(d)
        # split, not pre[:, offset:offset + n]: in training, slicing would make autograd add a full-size (4C, N) zero
        # gradient per step (pretraining ran 1.5x slower); split's backward concatenates the step gradients once
        for n, pre_t in zip(sizes, pre.split(sizes, dim=d)):
            if n < running:  # rows n..running-1 have ended: keep their final state, go on with a compact state
                finished_h.append(h.narrow(d, n, running - n))
                finished_c.append(c.narrow(d, n, running - n))
                h, c, running = h.narrow(d, 0, n).contiguous(), c.narrow(d, 0, n).contiguous(), n
            h, c = self._step(pre_t, h, c, packed)
            outputs.append(h)
        packed_out = _wide(rows(torch.cat(outputs, dim=d))) if outputs else None
        final_h = rows(torch.cat([_wide(h), *(_wide(t) for t in reversed(finished_h))], dim=d))
        final_c = rows(torch.cat([c, *reversed(finished_c)], dim=d))
        return packed_out, (final_h, final_c)


def reverse_within_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps (B, T, ...), leaving the padding where it is. An involution."""
    steps = x.size(1)
    t = torch.arange(steps, device=x.device).unsqueeze(0)
    index = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))
