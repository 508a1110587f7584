"""The activation cache (elmo_module/activation_cache.py) for a transformer encoder (elmo_module/transformer.py).

Frozen and in eval mode, a transformer's hidden states for a text depend only on its word pieces, and pooled to words
only on those and each word's offsets: the key of a text is a hash of both, as the mismatched indexer gives them.
Stored per word: every hidden state in full (``num_hidden_layers + 1`` of ``hidden_size``, float16 as ELMo's; a
transformer's layer 0 is no [x; x] to halve). The cache's identity is the encoder's files and the pooling: another
model, other weights or the other pooling reject it, as other biLM weights do ELMo's cache.
"""
import hashlib
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Tuple

import numpy as np
import torch

from elmo_module.activation_cache import ActivationCache, file_checksum, write_cache
from elmo_module.errors import ElmoInputError
from elmo_module.precision import autocast
from elmo_module.transformer import FrozenTransformer, model_source

KIND = "transformer"


def text_key(token_ids, offsets) -> str:
    """Key of one text: its word-piece ids and each word's (first, last) piece, all the encoder and pooling see."""
    digest = hashlib.sha1(np.ascontiguousarray(token_ids, dtype=np.int64).tobytes())
    digest.update(b"|" + np.ascontiguousarray(offsets, dtype=np.int64).tobytes())
    return digest.hexdigest()


def encoder_identity(encoder: str, pooling: str) -> str:
    """What a transformer cache was built from: the encoder's files (every file below its directory) and the
    pooling (the stored words are pooled)."""
    return hashlib.sha256(f"{file_checksum(model_source(encoder))}\0pooling={pooling}".encode()).hexdigest()


def build_transformer_cache(transformer: FrozenTransformer, index: Callable[[List[str]], dict],
                            texts: Iterable[Sequence[str]], directory, data: dict = None, batch_size: int = 32,
                            progress: bool = True, reuse: bool = False, dtype: str = "float16",
                            precision: str = "float32") -> Path:
    """Run the frozen transformer once per distinct text and write its pooled hidden states to ``directory``.
    ``index(words)``: the task's indexer output for a text (token_ids, offsets, ...: the runner passes allennlp's
    mismatched indexer, elmo_module/allennlp_adapter.py TransformerPiecesIndexer)."""
    unique: Dict[str, List[str]] = {}
    indexed: Dict[str, dict] = {}
    for words in texts:
        pieces = index(list(words))
        key = text_key(pieces["token_ids"], pieces["offsets"])
        if key not in unique:
            unique[key], indexed[key] = list(words), pieces
    device = next(transformer.parameters()).device

    def rows_of(keys: List[str]) -> np.ndarray:
        inputs = padded([indexed[k] for k in keys], device)
        with autocast(precision, device.type):  # (bfloat16's layers are another cache: its identity's precision)
            layers, _ = transformer(*inputs)
        return torch.cat([layer.float().cpu() for layer in layers], dim=-1).numpy()  # (B, words, layers x dim)

    meta = {"kind": KIND, "encoder": transformer.encoder, "pooling": transformer.pooling,
            "weights_checksum": encoder_identity(transformer.encoder, transformer.pooling), "precision": precision,
            "data": data or {}, "layers": transformer.num_output_layers, "dim": transformer.output_dim}
    return write_cache(directory, unique, rows_of, meta["layers"] * meta["dim"], meta, reuse, dtype, batch_size,
                       progress, "caching transformer layers", f"encoder {transformer.encoder}")


def padded(items: List[dict], device) -> Tuple[torch.Tensor, ...]:
    """The indexer outputs of several texts as one batch, as allennlp pads them: (token_ids, wordpiece_mask, offsets,
    mask, type_ids)."""
    n_pieces, n_words = max(len(i["token_ids"]) for i in items), max(len(i["offsets"]) for i in items)
    token_ids = torch.zeros(len(items), n_pieces, dtype=torch.long)
    type_ids = torch.zeros_like(token_ids)
    wordpiece_mask = torch.zeros(len(items), n_pieces, dtype=torch.bool)
    offsets = torch.zeros(len(items), n_words, 2, dtype=torch.long)
    mask = torch.zeros(len(items), n_words, dtype=torch.bool)
    for b, item in enumerate(items):
        p, w = len(item["token_ids"]), len(item["offsets"])
        token_ids[b, :p] = torch.tensor(item["token_ids"])
        type_ids[b, :p] = torch.tensor(item.get("type_ids") or [0] * p)
        wordpiece_mask[b, :p] = True
        offsets[b, :w] = torch.tensor(item["offsets"]).reshape(w, 2)
        mask[b, :w] = True
    return tuple(t.to(device) for t in (token_ids, wordpiece_mask, offsets, mask, type_ids))


class TransformerCache(ActivationCache):
    """Read side: ``lookup`` takes what the embedder gets from the mismatched indexer and gives the pooled layers
    (float32) and the word mask, as ``FrozenTransformer.forward`` does."""

    def __init__(self, directory, identity: str, precision: str = "float32"):
        super().__init__(directory, identity, precision)
        if self.meta.get("kind") != KIND:
            raise ElmoInputError(f"activation cache '{self.directory}' holds a biLM's layers, not a transformer's")

    def lookup(self, token_ids: torch.Tensor, wordpiece_mask: torch.Tensor, offsets: torch.Tensor,
               mask: torch.Tensor) -> Tuple[List[torch.Tensor], torch.Tensor]:
        batch, words = mask.shape
        ids, pieces, spans = token_ids.cpu().numpy(), wordpiece_mask.sum(1).tolist(), offsets.cpu().numpy()
        lengths = mask.sum(dim=1).tolist()
        keys = [text_key(ids[b, :pieces[b]], spans[b, :n]) for b, n in enumerate(lengths)]
        rows = self.gather(keys, lengths, words, lambda b: f"a text of {lengths[b]} words ({pieces[b]} word "
                                                           f"pieces)").to(mask.device)
        return list(rows.reshape(batch, words, self.n_layers, self.dim).unbind(dim=2)), mask
