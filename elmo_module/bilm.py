"""The ELMo biLM: token layer plus forward and backward LSTM stacks, stateful or stateless (arXiv:1802.05365v2
Sec. 3.4, p. 4; stateful as bilm-tf and allennlp, which the paper does not describe)."""
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import nn

from elmo_module import precision
from elmo_module.characters import boundary_ids
from elmo_module.lstm import ProjectedLstmLayer, reverse_within_length
from elmo_module.options import BiLmOptions
from elmo_module.token_encoder import CharCnnTokenEncoder

State = Tuple[torch.Tensor, torch.Tensor]  # h (layers, 2 directions, B, P), c (layers, 2, B, C)
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-backward-lstm")


@contextmanager
def _threads_per_op(n: int):
    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class BiLmOutput(NamedTuple):
    layers: List[torch.Tensor]  # n_layers + 1 tensors (B, T, 2P): [x; x], then [forward; backward] per LSTM layer
    mask: torch.Tensor  # (B, T) bool


class ElmoBiLm(nn.Module):
    """Character ids (B, T, max_chars) -> the three ELMo layers, ``<S>``/``</S>`` added inside and removed from the
    output.

    ``stateful=True`` carries each batch row's LSTM state into the same row of the next batch, as bilm-tf does (the
    published reference outputs need this); ``stateful=False`` starts every sentence from zeros (deterministic,
    what any per-sentence cache needs). ``reset_states()`` forgets the carried state.

    ``precision="bfloat16"`` runs the forward's GEMMs in bfloat16 (``elmo_module.precision``); the layers it returns
    are float32 either way.
    """

    def __init__(self, options: BiLmOptions, stateful: bool = False, precision: str = "float32"):
        super().__init__()
        self.options = options
        self.stateful = stateful
        self.precision = precision
        self.token_encoder = CharCnnTokenEncoder(options)
        p, c = options.projection_dim, options.cell_dim

        def stack():
            return nn.ModuleList(ProjectedLstmLayer(p, c, p, options.cell_clip, options.proj_clip)
                                 for _ in range(options.n_layers))

        self.forward_layers, self.backward_layers = stack(), stack()
        self.register_buffer("boundaries", boundary_ids(options.max_chars), persistent=False)
        self._state: Optional[State] = None

    @property
    def num_output_layers(self) -> int:
        return self.options.n_layers + 1

    def reset_states(self) -> None:
        self._state = None

    def forward(self, char_ids: torch.Tensor) -> BiLmOutput:
        mask = (char_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        batch, steps, _ = char_ids.shape
        # <S> at 0, the tokens at 1..L, </S> at L+1 (every sentence, even an empty one, has length >= 2)
        ids = torch.cat([char_ids, char_ids.new_zeros(batch, 2, char_ids.size(2))], dim=1)
        ids = torch.cat([ids[:, -1:], ids[:, :-1]], dim=1)
        ids[:, 0] = self.boundaries[0]
        ids[torch.arange(batch, device=ids.device), lengths + 1] = self.boundaries[1]
        initial = self._initial_state(batch) if self.stateful else None
        with precision.autocast(self.precision, char_ids.device.type):
            vectors, index = self.token_encoder.encode_distinct(ids)
            vectors = vectors.float()  # layer 0 of the output (a no-op in float32)
            tokens = vectors[index]
            lstm_layers, state = self.contextual(tokens, lengths + 2, initial, distinct=(vectors, index))
        if self.stateful:
            self._keep_state(state)
        keep = mask.unsqueeze(-1).to(tokens.dtype)
        layers = [torch.cat([tokens, tokens], dim=-1)] + [torch.cat(pair, dim=-1) for pair in lstm_layers]
        return BiLmOutput([layer[:, 1:-1] * keep for layer in layers], mask)

    def contextual(self, tokens: torch.Tensor, lengths: torch.Tensor, state: Optional[State] = None,
                   distinct: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        """Run both LSTM stacks over token vectors (B, T, P) whose rows have ``lengths``.

        ``distinct`` = (vectors (U, P), index (B, T)) with ``tokens = vectors[index]`` lets the first layers compute
        their input GEMM once per distinct token (``ProjectedLstmLayer.forward``).

        Returns a (forward, backward) pair of (B, T, P) outputs per layer, and the final state in the layout of
        ``State`` (the forward stack's state after each row's last token, the backward stack's after its first).
        Pretraining calls this directly with its own windows and carried state.
        """
        batch, steps, _ = tokens.shape
        order = torch.argsort(lengths, descending=True)
        restore = torch.argsort(order)
        lens = lengths[order]
        run = int(lens[0]) if batch else 0
        x = tokens[order, :run]
        index = distinct[1][order, :run] if distinct is not None else None
        active = (lens.unsqueeze(0) > torch.arange(run, device=lens.device).unsqueeze(1)).sum(dim=1)
        n_layers, p, c = self.options.n_layers, self.options.projection_dim, self.options.cell_dim
        if state is None:
            h0 = tokens.new_zeros(n_layers, 2, batch, p)
            c0 = tokens.new_zeros(n_layers, 2, batch, c)
        else:
            h0, c0 = state[0][:, :, order], state[1][:, :, order]
        stacks = [(self.forward_layers, x, 0, index),
                  (self.backward_layers, reverse_within_length(x, lens), 1,
                   None if index is None else reverse_within_length(index, lens))]

        grad_enabled = torch.is_grad_enabled()  # thread-local in torch: the worker thread must inherit it
        same_autocast = precision.inherit(tokens.device.type)  # thread-local too

        def run_stack(layers, inputs, direction, index):
            outs, hs, cs = [], [], []
            with torch.set_grad_enabled(grad_enabled), same_autocast():
                for k, layer in enumerate(layers):
                    first = (distinct[0], index) if k == 0 and index is not None else None
                    out, (h_k, c_k) = layer(inputs, active, (h0[k, direction], c0[k, direction]), first)
                    if self.options.use_skip_connections and k > 0:  # residual from layer k-1's output
                        out = out + inputs
                    outs.append(out)
                    hs.append(h_k)
                    cs.append(c_k)
                    inputs = out
            return outs, hs, cs

        if torch.get_num_threads() >= 2 and tokens.device.type == "cpu":
            # The two stacks are independent: half the cores each. Small-batch GEMMs scale badly over threads, so
            # two stacks side by side beat one stack after the other on all cores (docs/speed.md). Not on CUDA: the
            # GPU runs one stream either way, and a CUDA graph's capture (lstm._recurrence) must be alone.
            with _threads_per_op(torch.get_num_threads() // 2):
                backward = _POOL.submit(run_stack, *stacks[1])
                forward = run_stack(*stacks[0])
                backward = backward.result()
        else:
            forward, backward = run_stack(*stacks[0]), run_stack(*stacks[1])
        outputs = list(zip(forward[0], backward[0]))
        hs = [torch.stack([f, b]) for f, b in zip(forward[1], backward[1])]
        cs = [torch.stack([f, b]) for f, b in zip(forward[2], backward[2])]

        def unsort(t):
            t = t[restore]
            return torch.cat([t, t.new_zeros(batch, steps - run, t.size(2))], dim=1) if steps > run else t

        pairs = [(unsort(f), unsort(reverse_within_length(b, lens))) for f, b in outputs]
        return pairs, (torch.stack(hs)[:, :, restore], torch.stack(cs)[:, :, restore])

    def _initial_state(self, batch: int) -> Optional[State]:
        # Rows beyond the stored ones start from zeros; a smaller batch uses the first rows (as allennlp/bilm-tf).
        if self._state is None:
            return None
        h, c = self._state
        if batch > h.size(2):
            h = torch.cat([h, h.new_zeros(*h.shape[:2], batch - h.size(2), h.size(3))], dim=2)
            c = torch.cat([c, c.new_zeros(*c.shape[:2], batch - c.size(2), c.size(3))], dim=2)
            self._state = (h, c)
        return h[:, :, :batch], c[:, :, :batch]

    def _keep_state(self, state: State) -> None:
        h, c = (s.detach() for s in state)
        if self._state is not None and self._state[0].size(2) > h.size(2):
            old_h, old_c = (s.clone() for s in self._state)
            old_h[:, :, :h.size(2)], old_c[:, :, :c.size(2)] = h, c
            h, c = old_h, old_c
        self._state = (h, c)
