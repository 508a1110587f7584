"""The frozen biLM's layers for the probes' sentences, through the same code as the task runs: ``load_bilm``
stateless (each sentence from a zero state, so a sentence's vectors do not depend on its batch), and, when a cache
directory is given, the frozen-biLM activation cache of ``elmo_module.activation_cache`` (built once per biLM and data
set through its public ``build_cache``; read with ``ActivationCache.lookup``, exactly as an ELMo task run reads it).

The cache pays when the same sentences are read again (the POS probe's train/dev/test across reruns and profiles);
a single pass over SemCor for the WSD centroids streams from the biLM instead (its cache would hold ~800k tokens x
3 layers for one read).
"""
import hashlib
import json
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_module.activation_cache import ActivationCache, build_cache, file_checksum
from elmo_module.characters import batch_to_ids
from elmo_module.errors import ElmoInputError
from elmo_module.weights import load_bilm

BUNDLED = Path(__file__).resolve().parent.parent / "elmo_module" / "bundled"


def layer_names(n_layers: int) -> List[str]:
    """Layer 0 is the context-free token layer; layer k the k-th LSTM layer (Sec. 5.3 "first/second layer")."""
    ordinals = ["first", "second", "third", "fourth"]
    return ["token layer"] + [f"{ordinals[k - 1] if k <= 4 else k} LSTM layer" for k in range(1, n_layers)]


class FrozenBiLm:
    """Per-sentence layers (n_layers, n_tokens, dim) as float32 numpy arrays."""

    def __init__(self, options: str = "", weights: str = "", batch_size: int = 64, cache_dir: Optional[str] = None,
                 device: str = "cpu"):
        self.options = Path(options or BUNDLED / "tiny_options.json")
        self.weights = Path(weights or BUNDLED / "tiny_weights.hdf5")
        for path in (self.options, self.weights):
            if not path.is_file():
                raise ElmoInputError(f"{path}: biLM file does not exist")
        self.bilm = load_bilm(self.options, self.weights, stateful=False).to(device).eval()
        self.checksum = file_checksum(self.options, self.weights)
        self.batch_size, self.cache_dir, self.device = batch_size, cache_dir, device

    @property
    def n_layers(self) -> int:
        return self.bilm.num_output_layers

    @property
    def dim(self) -> int:
        return self.bilm.options.output_dim

    def describe(self) -> dict:
        return {"options": str(self.options), "weights": str(self.weights), "sha256": self.checksum[:16],
                "layers": self.n_layers, "dim": self.dim}

    def layers(self, sentences: Sequence[Sequence[str]], name: str = "probe", progress: bool = False,
               cached: bool = False) -> Iterator[Tuple[int, np.ndarray]]:
        """(index into ``sentences``, its layers) for every sentence, in an order that batches similar lengths;
        ``cached``: through the activation cache (when the probe has a cache directory) for data read again."""
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        cache = self._cache(sentences, name) if cached and self.cache_dir else None
        done = 0
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            ids = batch_to_ids([list(sentences[i]) for i in batch], self.bilm.options.max_chars)
            if cache is not None:
                layers, _ = cache.lookup(ids)
            else:
                with torch.no_grad():
                    layers = self.bilm(ids.to(self.device)).layers
            stacked = torch.stack(layers, dim=1).float().cpu().numpy()  # (B, L, T, D)
            for row, i in enumerate(batch):
                yield i, stacked[row, :, :len(sentences[i])]
            done += len(batch)
            if progress and (start // self.batch_size) % 50 == 0:
                print(f"  biLM layers: {done}/{len(order)} sentences", flush=True)

    def _cache(self, sentences, name: str) -> ActivationCache:
        digest = hashlib.sha256(json.dumps([list(s) for s in sentences]).encode()).hexdigest()[:16]
        directory = Path(self.cache_dir) / self.checksum[:16] / f"{name}-{digest}"
        try:
            return ActivationCache(directory, self.checksum)
        except ElmoInputError:  # not built yet (or left incomplete): build it
            build_cache(self.bilm, sentences, directory, self.checksum,
                        data={"probe": name, "sentences": len(sentences)}, batch_size=self.batch_size)
            return ActivationCache(directory, self.checksum)
