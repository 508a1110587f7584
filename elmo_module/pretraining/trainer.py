"""Training the biLM language model (arXiv:1802.05365v2 Sec. 3.4, p. 4: 10 epochs on the 1B Word Benchmark): the
data as windows, held-out perplexity, the trainer and its checkpoints (with what --resume checks: the settings, the
corpus by content, the architecture).

Training follows bilm-tf's recipe (bin/train_elmo.py, bilm/training.py): windows of 20 tokens with the state carried
between windows, sampled softmax with 8192 log-uniform negatives, Adagrad lr 0.2 (initial accumulator 1.0),
global-norm clip 10, dropout 0.1; the loss is the mean of the forward and backward LM's, as in bilm-tf.
"""
import hashlib
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from elmo_module import precision
from elmo_module.bilm import State
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import Corpus, character_table, n_windows, streams, type_to_vocabulary, windows
from elmo_module.pretraining.language_model import BiLanguageModel, log_uniform_sample, softmax_nll

CHECKPOINT_FORMAT = "elmo_module.pretrain/1"  # the module that first wrote it; the format is unchanged


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
    precision: str = "float32"  # bfloat16: mixed precision (train_step)
    # how the vocabulary was built (pretrain's --vocab-size, --min-count): a resume checks them
    vocab_size: int = 100000
    min_count: int = 1


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
    return {"forward": _exp(nll_f / count), "backward": _exp(nll_b / count),
            "average": _exp((nll_f + nll_b) / (2 * count)), "tokens": count}


def _exp(loss: float) -> float:
    """A perplexity from a mean loss: inf past the float range (a diverged model) instead of an OverflowError."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


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
        # Mixed precision (elmo_module.precision): the forward's GEMMs under bfloat16 autocast, whose backward runs
        # them in bfloat16 too; the weights, their gradients and Adagrad's state stay float32, and the LSTM returns
        # float32, so the softmax and the loss below are float32. bfloat16 has float32's range: no loss scaling.
        with precision.autocast(self.settings.precision, self.model.softmax_weight.device.type):
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
        # the data stream, where it stopped, the softmax's rows, and the precision of the steps so far (bfloat16's
        # are not float32's: a resume at the other one went on silently, half one and half the other, until 2026-11-29)
        for key in ("batch_size", "unroll", "seed", "vocab_size", "min_count", "precision"):
            if key not in checkpoint["settings"]:  # (checkpoints before the vocabulary's keys)
                continue
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


def _names(files) -> str:
    files = [str(f) for f in files]
    return f"'{files[0]}'" if len(files) == 1 else f"'{files[0]}' (+{len(files) - 1} more files)"
