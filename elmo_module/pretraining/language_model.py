"""The biLM's language-model head: the softmax shared by both directions, the full and the sampled softmax loss, a
fresh model's initialisers, and the files that carry the head (vocab.txt, softmax.hdf5) beside the biLM's weights.

The language model is ``ElmoBiLm`` (char CNN + highway + projection, forward and backward LSTM stacks) plus one
softmax over the vocabulary shared by both directions (the token representation is shared too; the LSTMs are not).
The forward LM predicts the next token from the top forward output, the backward LM the previous token from the top
backward output (arXiv:1802.05365v2 Sec. 3.1, pp. 2–3: token representation and softmax tied across directions,
separate LSTMs); training them is ``elmo_module.pretraining.trainer``.
"""
import math
import os
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_module.bilm import ElmoBiLm, State
from elmo_module.errors import ElmoInputError
from elmo_module.pause_points import pause_point
from elmo_module.pretraining.corpus import read_vocabulary
from elmo_module.weights import load_bilm, save_bilm

# --------------------------------------------------------------------------------------------------------- model

class BiLanguageModel(nn.Module):
    """``ElmoBiLm`` + the softmax shared by both directions (weight (V, P) and bias (V,))."""

    def __init__(self, bilm: ElmoBiLm, vocabulary_size: int, dropout: float):
        super().__init__()
        self.bilm = bilm
        p = bilm.options.projection_dim
        self.softmax_weight = nn.Parameter(torch.randn(vocabulary_size, p) / math.sqrt(p))  # bilm-tf's initialiser
        self.softmax_bias = nn.Parameter(torch.zeros(vocabulary_size))
        self.dropout = nn.Dropout(dropout)

    def zero_state(self, rows: int) -> State:
        o, device = self.bilm.options, self.softmax_weight.device
        return (torch.zeros(o.n_layers, 2, rows, o.projection_dim, device=device),
                torch.zeros(o.n_layers, 2, rows, o.cell_dim, device=device))

    def encode(self, type_ids: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        """Token vectors (..., P) for type ids; the char CNN runs once per distinct type."""
        unique, inverse = torch.unique(type_ids, return_inverse=True)
        vectors = self.bilm.token_encoder(chars[unique].long().to(self.softmax_weight.device))
        return vectors[inverse.to(vectors.device)]

    def _run_stack(self, layers: nn.ModuleList, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """One direction over full windows (B, T, P), left to right, from state (h (L, B, P), c (L, B, C)).
        Dropout on every layer's input and on the top output (bilm-tf: DropoutWrapper(input_keep_prob) per cell,
        dropout before the softmax); the residual adds the layer's (dropped-out) input, as ResidualWrapper does."""
        active = torch.full((x.size(1),), x.size(0), dtype=torch.long)
        hs, cs = [], []
        for k, layer in enumerate(layers):
            inputs = self.dropout(x)
            x, (h_k, c_k) = layer(inputs, active, (h[k], c[k]))
            if self.bilm.options.use_skip_connections and k > 0:
                x = x + inputs
            hs.append(h_k)
            cs.append(c_k)
        return self.dropout(x), torch.stack(hs), torch.stack(cs)

    def hidden(self, forward_ids: torch.Tensor, backward_ids: torch.Tensor, chars: torch.Tensor, state: State):
        """Top outputs of both directions for a window. ``backward_ids`` is the backward stream (the text reversed),
        so both stacks run left to right over their own stream and carry their state to the next window."""
        tokens = self.encode(torch.stack([forward_ids, backward_ids]), chars)
        h, c = state
        top_f, h_f, c_f = self._run_stack(self.bilm.forward_layers, tokens[0], h[:, 0], c[:, 0])
        top_b, h_b, c_b = self._run_stack(self.bilm.backward_layers, tokens[1], h[:, 1], c[:, 1])
        return top_f, top_b, (torch.stack([h_f, h_b], dim=1), torch.stack([c_f, c_b], dim=1))


def new_language_model(options, vocabulary_size: int, dropout: float, seed: int) -> "BiLanguageModel":
    """A fresh language model as ``pretrain`` starts one: torch seeded with ``seed``, then the biLM, the softmax and
    bilm-tf's initialisers of the token layer (``init_like_bilm_tf``), so equal seeds give equal models."""
    torch.manual_seed(seed)
    model = BiLanguageModel(ElmoBiLm(options), vocabulary_size, dropout)
    init_like_bilm_tf(model.bilm)
    return model


def init_like_bilm_tf(bilm: ElmoBiLm) -> None:
    """bilm-tf's initialisers for the token layer of a fresh model: CNN U(-0.05, 0.05) (relu) or N(0, 1/(w*d)) (tanh),
    highway and projection N(0, 1/n), carry bias -2 (the highway starts close to the identity), other biases 0."""
    enc, o = bilm.token_encoder, bilm.options
    with torch.no_grad():
        for conv, (width, _) in zip(enc.convs, o.filters):
            if o.activation == "relu":
                conv.weight.uniform_(-0.05, 0.05)
            else:
                conv.weight.normal_(0.0, math.sqrt(1.0 / (width * o.char_embed_dim)))
            conv.bias.zero_()
        n = o.n_filters
        for highway in enc.highways:
            highway.weight.normal_(0.0, math.sqrt(1.0 / n))
            highway.bias[:n] = 0.0
            highway.bias[n:] = -2.0
        if isinstance(enc.projection, nn.Linear):
            enc.projection.weight.normal_(0.0, math.sqrt(1.0 / n))
            enc.projection.bias.zero_()


# ------------------------------------------------------------------------------------------------------ softmax

def log_uniform_sample(vocabulary_size: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` ids (with replacement) from the log-uniform (Zipfian) distribution of TF's candidate sampler:
    P(k) = log((k + 2) / (k + 1)) / log(V + 1). Ids must be in frequency order."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    return (torch.exp(u * math.log(vocabulary_size + 1)) - 1).long().clamp_(0, vocabulary_size - 1)


def log_uniform_log_prob(ids: torch.Tensor, vocabulary_size: int) -> torch.Tensor:
    return torch.log(torch.log1p(1.0 / (ids.double() + 1.0)) / math.log(vocabulary_size + 1)).float()


def softmax_nll(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                negatives: Optional[torch.Tensor] = None, chunk: Optional[int] = None) -> torch.Tensor:
    """Summed negative log-likelihood of ``targets`` (N,) given ``hidden`` (N, P).

    Without ``negatives``: the full softmax (in row chunks, so a large vocabulary fits in memory). With negatives:
    the sampled softmax (Jean et al. 2015, as tf.nn.sampled_softmax_loss): the true class against the sampled ones,
    every logit minus log(expected count) = log(n * P(id)) (the logQ correction), and a sampled id that equals the
    row's target removed ("accidental hit")."""
    if negatives is None:
        chunk = chunk or max(1, 2 ** 24 // weight.size(0))  # at most 16M logits (64 MB) at a time
        return sum(F.cross_entropy(h @ weight.t() + bias, t, reduction="sum")
                   for h, t in zip(hidden.split(chunk), targets.split(chunk)))
    vocabulary_size, n = weight.size(0), negatives.numel()
    log_expected = math.log(n)
    true_logit = ((hidden * weight[targets]).sum(-1) + bias[targets]
                  - (log_expected + log_uniform_log_prob(targets, vocabulary_size)))
    # (N, n) logits in one GEMM with the corrected bias folded in: this matrix dominates the cost on a CPU
    sampled = torch.addmm(bias[negatives] - (log_expected + log_uniform_log_prob(negatives, vocabulary_size)),
                          hidden, weight[negatives].t())
    rows, columns = accidental_hits(targets, negatives)
    if rows.numel():
        sampled = sampled.index_put((rows, columns), torch.tensor(float("-inf"), device=sampled.device))
    return (torch.logaddexp(true_logit, torch.logsumexp(sampled, dim=1)) - true_logit).sum()


def accidental_hits(targets: torch.Tensor, negatives: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(row, column) of every sampled id equal to its row's target, by binary search (no (N, n) comparison)."""
    ordered, order = torch.sort(negatives)
    first = torch.searchsorted(ordered, targets)
    count = torch.searchsorted(ordered, targets, right=True) - first
    rows = torch.repeat_interleave(torch.arange(targets.numel(), device=targets.device), count)
    offsets = torch.arange(rows.numel(), device=targets.device) - torch.repeat_interleave(
        torch.cumsum(count, 0) - count, count)
    return rows, order[torch.repeat_interleave(first, count) + offsets]


# ------------------------------------------------------------------------------------------ files for users

def write_language_model(model: BiLanguageModel, vocabulary: List[str], out: Path) -> None:
    """vocab.txt, softmax.hdf5 (``softmax/W`` (V, P), ``softmax/b`` (V,)), then options.json + weights.hdf5 in the
    official layout (n_characters 262, loads in allennlp's Elmo). Each file is written beside its target and renamed,
    weights last, so a complete-looking weights.hdf5 only appears once everything is in place."""
    import h5py

    tmp = out / "vocab.txt.partial"
    tmp.write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    os.replace(tmp, out / "vocab.txt")
    tmp = out / "softmax.hdf5.partial"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("softmax/W", data=model.softmax_weight.detach().cpu().numpy())
        f.create_dataset("softmax/b", data=model.softmax_bias.detach().cpu().numpy())
    os.replace(tmp, out / "softmax.hdf5")
    pause_point("softmax-written")
    model.bilm.options.n_characters = 262
    save_bilm(model.bilm, out / "options.json", out / "weights.hdf5")


def read_softmax(path: Path, vocabulary_size: int, projection_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    import h5py

    if not Path(path).is_file():
        raise ElmoInputError(f"softmax file '{path}' does not exist")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise ElmoInputError(f"softmax file '{path}' is not a readable HDF5 file") from None
    with f:
        arrays = []
        for name, shape in (("softmax/W", (vocabulary_size, projection_dim)), ("softmax/b", (vocabulary_size,))):
            if name not in f:
                raise ElmoInputError(f"softmax file '{path}': dataset '{name}' is missing")
            if tuple(f[name].shape) != shape:
                raise ElmoInputError(f"softmax file '{path}': dataset '{name}' has shape {tuple(f[name].shape)}, "
                                     f"expected {shape} (vocabulary size, projection_dim of the options)")
            arrays.append(torch.from_numpy(np.asarray(f[name][...], dtype=np.float32)))
    return arrays[0], arrays[1]


def load_language_model(options_path, weights_path, softmax_path, vocabulary_path, dropout: float = 0.0):
    """(model, vocabulary) from files written by ``write_language_model`` (or official weights + our softmax)."""
    bilm = load_bilm(options_path, weights_path)
    vocabulary = read_vocabulary(Path(vocabulary_path))
    weight, bias = read_softmax(Path(softmax_path), len(vocabulary), bilm.options.projection_dim)
    model = BiLanguageModel(bilm, len(vocabulary), dropout)
    with torch.no_grad():
        model.softmax_weight.copy_(weight)
        model.softmax_bias.copy_(bias)
    return model, vocabulary
