"""Pretrain the ELMo biLM on raw text, and fine-tune it on a task's text (PAPER.md "The biLM", "Pretraining").

``python -m elmo_module pretrain`` and ``python -m elmo_module finetune``; see README.md "Pretraining".

The language model is ``ElmoBiLm`` (char CNN + highway + projection, forward and backward LSTM stacks) plus one
softmax over the vocabulary shared by both directions (the token representation is shared too; the LSTMs are not).
The forward LM predicts the next token from the top forward output, the backward LM the previous token from the top
backward output; the loss is the mean of the two, as in bilm-tf. Training follows the paper's recipe: windows of 20
tokens with the state carried between windows, sampled softmax with 8192 log-uniform negatives, Adagrad lr 0.2
(initial accumulator 1.0), global-norm clip 10, dropout 0.1.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_module.bilm import ElmoBiLm, State
from elmo_module.device import resolve
from elmo_module.errors import ElmoInputError
from elmo_module.lm_data import (TOKENIZERS, Corpus, build_vocabulary, character_table, expand_paths,
                                 n_windows, read_corpus, read_vocabulary, streams, type_to_vocabulary, windows)
from elmo_module.options import BiLmOptions
from elmo_module.pause_points import pause_point
from elmo_module.weights import load_bilm, save_bilm

CHECKPOINT_FORMAT = "elmo_module.pretrain/1"


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


# ------------------------------------------------------------------------------------------------------ training

@dataclass
class TrainingSettings:
    batch_size: int = 128
    unroll: int = 20
    lr: float = 0.2
    clip: float = 10.0
    dropout: float = 0.1
    negatives: int = 8192
    seed: int = 0


class LmText:
    """A corpus ready for the model: character ids per type and the softmax target (vocabulary id) per type."""

    def __init__(self, corpus: Corpus, vocabulary: List[str], max_chars: int):
        self.corpus = corpus
        self.chars = torch.from_numpy(character_table(corpus.types, max_chars))
        self.targets = torch.from_numpy(type_to_vocabulary(corpus.types, vocabulary))

    def window_pairs(self, ids: np.ndarray, rows: int, unroll: int, first: int = 0):
        """(window index, forward inputs, forward targets, backward inputs, backward targets), type ids as tensors;
        targets already mapped to the vocabulary."""
        fwd, bwd = streams(ids, rows), streams(np.ascontiguousarray(ids[::-1]), rows)
        for (k, f_in, f_next), (_, b_in, b_next) in zip(windows(fwd, unroll, first), windows(bwd, unroll, first)):
            f_in, f_next, b_in, b_next = (torch.from_numpy(np.ascontiguousarray(a)).long()
                                          for a in (f_in, f_next, b_in, b_next))
            yield k, f_in, self.targets[f_next], b_in, self.targets[b_next]


@torch.no_grad()
def heldout_perplexity(model: BiLanguageModel, text: LmText, rows: int, unroll: int) -> Dict[str, float]:
    """Forward, backward and average perplexity with the full softmax, streams of the text in file order, state
    carried between windows. "average" is exp of the mean of the two per-token losses (bilm-tf's run_test)."""
    ids = text.corpus.ids
    rows = max(1, min(rows, len(ids) // (unroll + 1)))
    model.eval()
    state, nll_f, nll_b, count = model.zero_state(rows), 0.0, 0.0, 0
    device = model.softmax_weight.device
    for _, f_in, f_next, b_in, b_next in text.window_pairs(ids, rows, unroll):
        top_f, top_b, state = model.hidden(f_in, b_in, text.chars, state)
        p = top_f.size(-1)
        nll_f += float(softmax_nll(top_f.reshape(-1, p), f_next.reshape(-1).to(device),
                                   model.softmax_weight, model.softmax_bias))
        nll_b += float(softmax_nll(top_b.reshape(-1, p), b_next.reshape(-1).to(device),
                                   model.softmax_weight, model.softmax_bias))
        count += f_next.numel()
    return {"forward": math.exp(nll_f / count), "backward": math.exp(nll_b / count),
            "average": math.exp((nll_f + nll_b) / (2 * count)), "tokens": count}


class LmTrainer:
    """Walks the training streams window by window; everything needed to continue exactly is in ``checkpoint()``."""

    def __init__(self, model: BiLanguageModel, vocabulary: List[str], train: LmText, settings: TrainingSettings):
        self.model, self.vocabulary, self.train_text, self.settings = model, vocabulary, train, settings
        self.optimizer = torch.optim.Adagrad(model.parameters(), lr=settings.lr, initial_accumulator_value=1.0)
        self.sampler = torch.Generator().manual_seed(settings.seed)
        self.epoch = self.window = self.step = self.tokens = 0
        self.state: Optional[State] = None
        self.history: List[dict] = []
        self._identity: Optional[List[dict]] = None
        rows = settings.batch_size
        length = train.corpus.n_tokens // rows
        if length < 2:
            raise ElmoInputError(f"training text {_names(train.corpus.files)} has {train.corpus.n_tokens} tokens; "
                                 f"--batch-size {rows} needs at least {2 * rows}")
        self.windows_per_epoch = n_windows(length, settings.unroll)
        self.tokens_per_epoch = rows * (length - 1)

    def _loss(self, top: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        model, k = self.model, self.settings.negatives
        vocabulary_size = model.softmax_weight.size(0)
        negatives = None
        if vocabulary_size > k:  # sampled softmax only pays when the vocabulary is larger than the sample
            negatives = log_uniform_sample(vocabulary_size, k, self.sampler).to(top.device)
        return softmax_nll(top.reshape(-1, top.size(-1)), targets.reshape(-1).to(top.device),
                           model.softmax_weight, model.softmax_bias, negatives) / targets.numel()

    def train_step(self, f_in, f_next, b_in, b_next) -> float:
        self.model.train()
        state = self.state if self.state is not None else self.model.zero_state(f_in.size(0))
        top_f, top_b, state = self.model.hidden(f_in, b_in, self.train_text.chars, state)
        loss = 0.5 * (self._loss(top_f, f_next) + self._loss(top_b, b_next))  # bilm-tf: 0.5 * (fwd + bwd)
        self.optimizer.zero_grad()
        # bilm-tf differentiates loss * unroll_steps (the per-window sum over time, mean over the batch): with
        # Adagrad's initial accumulator of 1.0 the scale of the gradient sets the size of the first steps
        (loss * f_in.size(1)).backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip)
        self.optimizer.step()
        self.state = (state[0].detach(), state[1].detach())  # carried to the next window, gradient stops here
        return float(loss.detach())

    def run(self, done: Callable[["LmTrainer"], bool], progress=None,
            after_step: Optional[Callable[["LmTrainer", float], None]] = None) -> None:
        """Train until ``done(self)``; epochs reshuffle the lines (seeded by epoch) and restart from zero state."""
        s = self.settings
        while not done(self):
            ids = self.train_text.corpus.shuffled_ids(s.seed, self.epoch)
            for k, f_in, f_next, b_in, b_next in self.train_text.window_pairs(ids, s.batch_size, s.unroll,
                                                                              self.window):
                loss = self.train_step(f_in, f_next, b_in, b_next)
                self.window, self.step = k + 1, self.step + 1
                self.tokens += f_next.numel()
                if progress is not None:
                    progress(self, loss, f_next.numel())
                if after_step is not None:
                    after_step(self, loss)
                if done(self):
                    break
            if self.window >= self.windows_per_epoch:
                self.epoch, self.window, self.state = self.epoch + 1, 0, None

    # ------------------------------------------------------------------------------------------- checkpoints

    def checkpoint(self) -> dict:
        return {
            "format": CHECKPOINT_FORMAT,
            "options": self.model.bilm.options.to_dict(),
            "vocabulary": self.vocabulary,
            "settings": asdict(self.settings),
            "data": {"files": [str(p) for p in self.train_text.corpus.files],
                     "tokens": self.train_text.corpus.n_tokens, "identity": self.corpus_identity()},
            "position": {"epoch": self.epoch, "window": self.window, "step": self.step, "tokens": self.tokens},
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "lstm_state": self.state,
            "rng": {"torch": torch.get_rng_state(), "sampler": self.sampler.get_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
            "history": self.history,
        }

    def corpus_identity(self) -> List[dict]:
        """What --resume must find again: each training file's size and SHA-256 (computed once per run)."""
        if self._identity is None:
            self._identity = corpus_identity(self.train_text.corpus.files)
        return self._identity

    def save_checkpoint(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".partial")
        torch.save(self.checkpoint(), tmp)
        os.replace(tmp, path)  # never a half-written checkpoint under the real name

    def restore(self, checkpoint: dict, source: str) -> None:
        """Continue from ``checkpoint`` (already checked by ``read_checkpoint``)."""
        for key in ("batch_size", "unroll", "seed"):  # these fix the data stream and where it stopped
            then, now = checkpoint["settings"][key], getattr(self.settings, key)
            if then != now:
                raise ElmoInputError(f"checkpoint '{source}' was trained with --{key.replace('_', '-')} {then}, "
                                     f"this run asks for {now}; they must agree to resume")
        if checkpoint["data"]["tokens"] != self.train_text.corpus.n_tokens:
            raise ElmoInputError(f"checkpoint '{source}' was trained on {checkpoint['data']['tokens']} tokens of "
                                 f"{_names(checkpoint['data']['files'])}; --train now gives "
                                 f"{self.train_text.corpus.n_tokens} tokens")
        if "identity" in checkpoint["data"]:  # checkpoints written before it was recorded have the count only
            check_same_corpus(checkpoint["data"]["identity"], self.corpus_identity(), source)
        check_state_shapes(self.model, checkpoint["model"], source)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        for group in self.optimizer.param_groups:
            group["lr"] = self.settings.lr
        position = checkpoint["position"]
        self.epoch, self.window, self.step, self.tokens = (position[k] for k in ("epoch", "window", "step", "tokens"))
        device = self.model.softmax_weight.device
        self.state = None if checkpoint["lstm_state"] is None else tuple(s.to(device) for s in checkpoint["lstm_state"])
        torch.set_rng_state(checkpoint["rng"]["torch"])
        self.sampler.set_state(checkpoint["rng"]["sampler"])
        if checkpoint["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(checkpoint["rng"]["cuda"])
        self.history = list(checkpoint.get("history", []))


def corpus_identity(files) -> List[dict]:
    identity = []
    for path in files:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        identity.append({"file": str(path), "bytes": os.path.getsize(path), "sha256": digest.hexdigest()})
    return identity


def check_same_corpus(then: List[dict], now: List[dict], source: str) -> None:
    """The same token count is not the same corpus: another text of that length would silently continue the
    stream positions of the first one. Files are compared by content (they may have moved)."""
    if [f["sha256"] for f in then] == [f["sha256"] for f in now]:
        return
    if len(then) != len(now):
        names = [_names([f["file"] for f in files]) for files in (then, now)]
        raise ElmoInputError(f"checkpoint '{source}' was trained on {len(then)} file(s) ({names[0]}); --train now "
                             f"gives {len(now)} ({names[1]}); resume with the same --train")
    k = next(i for i, (a, b) in enumerate(zip(then, now)) if a["sha256"] != b["sha256"])
    raise ElmoInputError(f"checkpoint '{source}' was trained on '{then[k]['file']}' (sha256 {then[k]['sha256'][:12]}, "
                         f"{then[k]['bytes']} bytes); --train file {k + 1} is '{now[k]['file']}' with other content "
                         f"(sha256 {now[k]['sha256'][:12]}, {now[k]['bytes']} bytes); resume with the same --train")


def read_checkpoint(path: Path, options: BiLmOptions) -> dict:
    """Load a checkpoint and check that it is ours and was made with these options."""
    try:
        checkpoint = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many types for a file that is not a checkpoint
        raise ElmoInputError(f"'{path}' is not a readable pretraining checkpoint ({type(e).__name__})") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise ElmoInputError(f"'{path}' is not a pretraining checkpoint of elmo_module "
                             f"(expected format '{CHECKPOINT_FORMAT}')")
    key = first_difference(checkpoint["options"], options.to_dict())
    if key is not None:
        then, now = key[1], key[2]
        raise ElmoInputError(f"checkpoint '{path}' and the options disagree: '{key[0]}' is {then!r} in the "
                             f"checkpoint and {now!r} in --options")
    return checkpoint


def first_difference(a, b, prefix="") -> Optional[Tuple[str, object, object]]:
    """(dotted key, a's value, b's value) of the first difference between two options dicts (n_characters aside:
    261 and 262 describe the same weights)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key == "n_characters":
                continue
            found = first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        a, b = [list(x) if isinstance(x, tuple) else x for x in a], [list(x) if isinstance(x, tuple) else x for x in b]
    return None if a == b else (prefix.rstrip("."), a, b)


def check_state_shapes(model: nn.Module, state: dict, source: str) -> None:
    expected = model.state_dict()
    for name, tensor in expected.items():
        if name not in state:
            raise ElmoInputError(f"checkpoint '{source}': parameter '{name}' is missing (another architecture?)")
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise ElmoInputError(f"checkpoint '{source}': parameter '{name}' has shape {tuple(state[name].shape)}, "
                                 f"the model needs {tuple(tensor.shape)} (a checkpoint from another architecture)")
    extra = sorted(set(state) - set(expected))
    if extra:
        raise ElmoInputError(f"checkpoint '{source}': unexpected parameter '{extra[0]}' (another architecture?)")


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


def _names(files) -> str:
    files = [str(f) for f in files]
    return f"'{files[0]}'" if len(files) == 1 else f"'{files[0]}' (+{len(files) - 1} more files)"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _Progress:
    """tqdm bar counting tokens (so its rate is tokens/s) with the running training perplexity (an exponential
    moving average of the loss; with the sampled softmax this is the sampled loss, as bilm-tf prints)."""

    def __init__(self, total: int, initial: int, description: str):
        from elmo_module.progress import progress_bar

        self.bar = progress_bar(total=total, initial=initial, unit="tok", unit_scale=True, desc=description,
                                dynamic_ncols=True, mininterval=2.0)
        self.average_loss = None

    def __call__(self, trainer: LmTrainer, loss: float, tokens: int) -> None:
        self.average_loss = loss if self.average_loss is None else 0.98 * self.average_loss + 0.02 * loss
        self.bar.update(tokens)
        self.bar.set_postfix(ppl=f"{math.exp(min(self.average_loss, 50)):.1f}", epoch=trainer.epoch,
                             refresh=False)

    def close(self):
        self.bar.close()


# -------------------------------------------------------------------------------------------------- commands

def _add_training_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainingSettings()
    parser.add_argument("--train", nargs="+", required=True, metavar="FILE_OR_GLOB",
                        help="UTF-8 text, one sentence or paragraph per line")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--tokenize", choices=sorted(TOKENIZERS), default="simple",
                        help="simple: split punctuation like PTB/CoNLL (default); whitespace: pre-tokenized text")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip lines that are not valid UTF-8 (and report how many) instead of stopping")
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="parallel streams (default 128)")
    parser.add_argument("--unroll", type=int, default=d.unroll, help="tokens per window (default 20)")
    parser.add_argument("--lr", type=float, default=d.lr, help="Adagrad learning rate (default 0.2)")
    parser.add_argument("--clip", type=float, default=d.clip, help="global gradient-norm clip (default 10)")
    parser.add_argument("--dropout", type=float, default=d.dropout, help="default 0.1")
    parser.add_argument("--negatives", type=int, default=d.negatives,
                        help="sampled-softmax negatives; full softmax when the vocabulary is not larger (default 8192)")
    parser.add_argument("--vocab-size", type=int, default=100000, help="largest vocabulary incl. <S> </S> <UNK>")
    parser.add_argument("--min-count", type=int, default=1, help="least count of a word in the vocabulary")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: the first GPU if torch can run on it, else cpu)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice); on a machine "
                        "shared with other jobs 1 thread can be much faster than oversubscribed cores")


def _settings(args) -> TrainingSettings:
    if args.threads is not None:
        torch.set_num_threads(max(1, args.threads))
    args.device, line = resolve(args.device)  # refuses a GPU torch cannot run kernels on, before any work
    print(f"{getattr(args, 'command', 'pretrain')}: {line}", flush=True)
    for name in ("batch_size", "unroll", "negatives", "vocab_size"):
        if getattr(args, name) < 1:
            raise ElmoInputError(f"--{name.replace('_', '-')} must be at least 1, found {getattr(args, name)}")
    return TrainingSettings(args.batch_size, args.unroll, args.lr, args.clip, args.dropout, args.negatives, args.seed)


def _read(args, patterns, what, max_tokens=None) -> Corpus:
    corpus = read_corpus(expand_paths(patterns, what), TOKENIZERS[args.tokenize], args.skip_bad_lines,
                         max_tokens=max_tokens)
    if corpus.skipped:
        print(f"{what}: skipped {corpus.skipped} lines that are not valid UTF-8")
    return corpus


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--options", required=True, help="options.json giving the model size (official layout)")
    parser.add_argument("--heldout", nargs="+", required=True, metavar="FILE_OR_GLOB", help="held-out text")
    parser.add_argument("--heldout-tokens", type=int, default=None, help="evaluate on at most this many tokens")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--tokens", type=int, help="stop after training on this many tokens (in total, over resumes)")
    budget.add_argument("--epochs", type=int, help="stop after this many epochs (default 10, the paper's)")
    parser.add_argument("--minutes", type=float, help="also stop after this many minutes of training (a resumable "
                        "checkpoint and the outputs are written as at any other stop)")
    parser.add_argument("--eval-every", type=int, default=0, help="held-out perplexity every N steps (0: start, end)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    _add_training_arguments(parser)


def run_pretrain(args) -> int:
    settings = _settings(args)
    options = BiLmOptions.load(args.options)
    options.n_characters = 262  # the written file is for inference (our char table has the masking row)
    out = Path(args.out)
    checkpoint_path = out / "checkpoint.pt"
    if checkpoint_path.exists() and not args.resume:
        raise ElmoInputError(f"'{checkpoint_path}' exists: pass --resume to continue it, or choose another --out")
    if args.resume and not checkpoint_path.is_file():
        raise ElmoInputError(f"--resume: '{checkpoint_path}' does not exist")
    checkpoint = read_checkpoint(checkpoint_path, options) if args.resume else None
    train = _read(args, args.train, "--train")
    heldout = _read(args, args.heldout, "--heldout", args.heldout_tokens)
    vocabulary = checkpoint["vocabulary"] if checkpoint else build_vocabulary(train, args.vocab_size, args.min_count)

    torch.manual_seed(settings.seed)
    model = BiLanguageModel(ElmoBiLm(options), len(vocabulary), settings.dropout)
    init_like_bilm_tf(model.bilm)
    model.to(args.device)
    trainer = LmTrainer(model, vocabulary, LmText(train, vocabulary, options.max_chars), settings)
    if checkpoint:
        trainer.restore(checkpoint, str(checkpoint_path))
    heldout_text = LmText(heldout, vocabulary, options.max_chars)
    out.mkdir(parents=True, exist_ok=True)

    eval_seconds = [0.0]

    def evaluate():
        started = time.perf_counter()
        result = heldout_perplexity(model, heldout_text, settings.batch_size, settings.unroll)
        trainer.history.append({"step": trainer.step, "tokens_trained": trainer.tokens, **result})
        eval_seconds[0] += time.perf_counter() - started
        return result

    if not trainer.history:
        evaluate()
    epochs = args.epochs if args.epochs is not None else (None if args.tokens is not None else 10)
    total = args.tokens if args.tokens is not None else epochs * trainer.tokens_per_epoch
    deadline = time.perf_counter() + 60 * args.minutes if args.minutes is not None else math.inf

    def done(t: LmTrainer) -> bool:
        budget_spent = t.tokens >= args.tokens if args.tokens is not None else t.epoch >= epochs
        return budget_spent or time.perf_counter() >= deadline
    print(f"vocabulary {len(vocabulary)} words, {train.n_tokens} training tokens in {len(train.types)} types, "
          f"{trainer.windows_per_epoch} windows of {settings.batch_size}x{settings.unroll} per epoch; "
          f"{'sampled softmax' if len(vocabulary) > settings.negatives else 'full softmax'}")

    def after_step(t: LmTrainer, loss: float):
        if not math.isfinite(loss):
            raise ElmoInputError(f"training loss became {loss} at step {t.step}; lower --lr or --clip")
        if args.eval_every and t.step % args.eval_every == 0:
            evaluate()
        if t.step % args.checkpoint_every == 0:
            t.save_checkpoint(checkpoint_path)

    progress = _Progress(total, min(trainer.tokens, total), "pretrain")
    started, tokens_before, eval_seconds[0] = time.perf_counter(), trainer.tokens, 0.0
    try:
        trainer.run(done, progress, after_step)
    finally:
        progress.close()
    seconds = time.perf_counter() - started - eval_seconds[0]  # training time only
    result = trainer.history[-1] if trainer.history[-1]["step"] == trainer.step else evaluate()
    trainer.save_checkpoint(checkpoint_path)
    # a resumed run's perplexity.json describes the weights about to be replaced: gone until the new files are all
    # written, so a kill between them never leaves new weights beside the old record (or the reverse)
    (out / "perplexity.json").unlink(missing_ok=True)
    write_language_model(model, vocabulary, out)
    _write_json(out / "perplexity.json", {
        "heldout": result, "history": trainer.history, "vocabulary_size": len(vocabulary),
        "train_tokens_per_epoch": trainer.tokens_per_epoch, "epochs_completed": trainer.epoch,
        "skipped_lines": {"train": train.skipped, "heldout": heldout.skipped},
        "last_run": {"seconds": round(seconds, 1), "tokens": trainer.tokens - tokens_before,
                     "tokens_per_second": round((trainer.tokens - tokens_before) / max(seconds, 1e-9), 1),
                     "device": str(args.device), "threads": torch.get_num_threads()},
    })
    print(f"held-out perplexity: forward {result['forward']:.2f}, backward {result['backward']:.2f}, "
          f"average {result['average']:.2f} ({result['tokens']} tokens); wrote {out}/options.json, weights.hdf5, "
          f"softmax.hdf5, vocab.txt, perplexity.json")
    return 0


def add_finetune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", help="a directory written by pretrain/finetune (options.json, "
                        "weights.hdf5, and softmax.hdf5 + vocab.txt if there)")
    parser.add_argument("--options", help="options.json (instead of or overriding --from)")
    parser.add_argument("--weights", help="weights hdf5, e.g. the official ones (instead of or overriding --from)")
    parser.add_argument("--softmax", help="softmax.hdf5 to continue the LM; without it a new softmax is initialised "
                        "over the vocabulary of --train")
    parser.add_argument("--vocab", help="vocab.txt that goes with --softmax")
    parser.add_argument("--dev", nargs="+", required=True, metavar="FILE_OR_GLOB", help="dev text for model choice")
    parser.add_argument("--epochs", type=int, default=1, help="default 1 (the paper's)")
    _add_training_arguments(parser)


def run_finetune(args) -> int:
    settings = _settings(args)
    files = {"options": args.options, "weights": args.weights, "softmax": args.softmax, "vocab": args.vocab}
    if args.source:
        source = Path(args.source)
        if not source.is_dir():
            raise ElmoInputError(f"--from '{source}' is not a directory")
        for key, name in (("options", "options.json"), ("weights", "weights.hdf5"), ("softmax", "softmax.hdf5"),
                          ("vocab", "vocab.txt")):
            if files[key] is None and (source / name).is_file():
                files[key] = str(source / name)
    for key in ("options", "weights"):
        if files[key] is None:
            raise ElmoInputError(f"finetune needs --{key} or a --from directory holding it")
    if (files["softmax"] is None) != (files["vocab"] is None):
        raise ElmoInputError("--softmax and --vocab go together (the softmax rows are the vocabulary's words)")
    out = Path(args.out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise ElmoInputError(f"--out '{out}' exists and is not empty; choose another --out (finetune creates it)")
    if args.epochs < 1:
        raise ElmoInputError(f"--epochs must be at least 1, found {args.epochs}")

    train = _read(args, args.train, "--train")
    dev = _read(args, args.dev, "--dev")
    torch.manual_seed(settings.seed)
    if files["softmax"]:
        model, vocabulary = load_language_model(files["options"], files["weights"], files["softmax"], files["vocab"],
                                                settings.dropout)
    else:  # official weights come without a softmax: a new one over the task text's vocabulary
        vocabulary = build_vocabulary(train, args.vocab_size, args.min_count)
        model = BiLanguageModel(load_bilm(files["options"], files["weights"]), len(vocabulary), settings.dropout)
    model.to(args.device)
    options = model.bilm.options
    trainer = LmTrainer(model, vocabulary, LmText(train, vocabulary, options.max_chars), settings)
    dev_text = LmText(dev, vocabulary, options.max_chars)
    # Every file goes into a sibling directory that is renamed to --out once perplexity.json is written: a kill
    # at any point leaves no --out (or the empty one given), never a weights.hdf5 without perplexity.json or
    # softmax and weights of different epochs. A partial directory left by a killed run is started afresh.
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    try:
        before = heldout_perplexity(model, dev_text, settings.batch_size, settings.unroll)
        print(f"dev perplexity before fine-tuning: average {before['average']:.2f}")
        epochs, best = [], None
        for epoch in range(1, args.epochs + 1):
            progress = _Progress(trainer.tokens_per_epoch, 0, f"finetune epoch {epoch}")
            try:
                trainer.run(lambda t: t.epoch >= epoch, progress)
            finally:
                progress.close()
            result = {"epoch": epoch, **heldout_perplexity(model, dev_text, settings.batch_size, settings.unroll)}
            epochs.append(result)
            print(f"epoch {epoch}: dev perplexity forward {result['forward']:.2f}, backward "
                  f"{result['backward']:.2f}, average {result['average']:.2f}")
            if best is None or result["average"] < best["average"]:  # the paper picks the epoch by dev perplexity
                best = result
                write_language_model(model, vocabulary, staging)
            pause_point("finetune-epoch-written")
        _write_json(staging / "perplexity.json", {
            "dev_before": before, "epochs": epochs, "best_epoch": best["epoch"], "dev": best,
            "softmax": "loaded" if files["softmax"] else "new", "source": files,
            "vocabulary_size": len(vocabulary), "skipped_lines": {"train": train.skipped, "dev": dev.skipped},
        })
    except BaseException:  # an error or Ctrl-C: nothing of this run is kept
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, out)  # one rename: all the files appear together (an empty --out is replaced)
    print(f"kept epoch {best['epoch']} (dev average perplexity {best['average']:.2f}, before "
          f"{before['average']:.2f}); wrote {out}/options.json, weights.hdf5, softmax.hdf5, vocab.txt")
    return 0
