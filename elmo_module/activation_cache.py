"""Frozen-biLM activation cache (runner issue; the e2e-coref practice of caching ELMo layers as an explicit step).

The biLM is frozen and, run stateless, its three layers for a sentence depend only on that sentence's character
ids. So the cache stores them once per distinct sentence, keyed by a hash of the ids, and every run of a sweep
reads them instead of running the biLM. The cache records the checksum of the biLM files it was built from: a run
with other weights rejects it; a sentence that is not in it (other data) is an error, never a silent substitute.

Layout of a cache directory: ``meta.json`` (weights checksum, data checksums, sizes), ``index.json`` (key ->
[first row, n tokens]), ``layers.npy`` (float32, (total tokens, n layers, dim), memory-mapped when read).
"""
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import torch
from tqdm import tqdm

from elmo_module.bilm import ElmoBiLm
from elmo_module.characters import batch_to_ids
from elmo_module.errors import ElmoInputError


def file_checksum(*paths) -> str:
    """sha256 over the bytes of the files (directories: every file below them, in sorted order)."""
    digest = hashlib.sha256()
    for path in paths:
        path = Path(path)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            digest.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def sentence_key(char_ids: np.ndarray) -> str:
    """Key of one sentence: its (n_tokens, max_chars) character ids (all that the biLM sees)."""
    return hashlib.sha1(np.ascontiguousarray(char_ids, dtype=np.int16).tobytes()).hexdigest()


def build_cache(bilm: ElmoBiLm, sentences: Iterable[Sequence[str]], directory, weights_checksum: str,
                data: dict = None, batch_size: int = 32, progress: bool = True) -> Path:
    """Run the (stateless) biLM once per distinct sentence and write the cache to ``directory``."""
    if bilm.stateful:
        raise ValueError("the activation cache needs a stateless biLM (per-sentence outputs)")
    directory = Path(directory)
    unique: Dict[str, List[str]] = {}
    for sentence in sentences:
        ids = batch_to_ids([list(sentence)], bilm.options.max_chars)[0].numpy()
        unique.setdefault(sentence_key(ids), list(sentence))
    keys = sorted(unique, key=lambda k: len(unique[k]))  # similar lengths together: less padding
    total = sum(len(unique[k]) for k in keys)
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    layers = np.lib.format.open_memmap(partial / "layers.npy", mode="w+", dtype=np.float32,
                                       shape=(total, bilm.num_output_layers, bilm.options.output_dim))
    index, row = {}, 0
    bilm.eval()
    with torch.no_grad(), tqdm(total=len(keys), desc="caching biLM layers", unit="sent", disable=not progress) as bar:
        for start in range(0, len(keys), batch_size):
            batch = keys[start:start + batch_size]
            ids = batch_to_ids([unique[k] for k in batch], bilm.options.max_chars)
            out = bilm(ids.to(next(bilm.parameters()).device))  # on the biLM's device (a GPU if the runner has one)
            stacked = torch.stack(out.layers, dim=2).cpu().numpy()  # (B, T, layers, dim)
            for b, key in enumerate(batch):
                n = len(unique[key])
                layers[row:row + n] = stacked[b, :n]
                index[key] = [row, n]
                row += n
            bar.update(len(batch))
    layers.flush()
    del layers
    (partial / "index.json").write_text(json.dumps(index))
    meta = {"weights_checksum": weights_checksum, "data": data or {}, "sentences": len(keys), "tokens": total,
            "layers": bilm.num_output_layers, "dim": bilm.options.output_dim}
    (partial / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(partial, directory)
    return directory


class ActivationCache:
    """Read side: ``lookup(char_ids)`` -> the biLM layers and mask, as ``ElmoBiLm.forward`` would give them."""

    def __init__(self, directory, weights_checksum: str):
        self.directory = Path(directory)
        meta_path = self.directory / "meta.json"
        if not meta_path.is_file():
            raise ElmoInputError(f"activation cache '{self.directory}' is missing or incomplete (no meta.json)")
        self.meta = json.loads(meta_path.read_text())
        if self.meta["weights_checksum"] != weights_checksum:
            raise ElmoInputError(
                f"stale activation cache '{self.directory}': built from biLM weights "
                f"{self.meta['weights_checksum'][:12]}, but this run uses {weights_checksum[:12]}; rebuild it")
        self.index = json.loads((self.directory / "index.json").read_text())
        self.layers = np.load(self.directory / "layers.npy", mmap_mode="r")

    def lookup(self, char_ids: torch.Tensor) -> Tuple[List[torch.Tensor], torch.Tensor]:
        mask = (char_ids > 0).any(dim=-1)
        batch, steps = mask.shape
        out = np.zeros((batch, steps, self.layers.shape[1], self.layers.shape[2]), dtype=np.float32)
        ids = char_ids.cpu().numpy()
        for b, n in enumerate(mask.sum(dim=1).tolist()):
            entry = self.index.get(sentence_key(ids[b, :n]))
            if entry is None:
                raise ElmoInputError(f"activation cache '{self.directory}' has no entry for the sentence "
                                     f"{_decode(ids[b, :n])!r}: the data changed since the cache was built; "
                                     f"rebuild it")
            out[b, :n] = self.layers[entry[0]:entry[0] + entry[1]]
        stacked = torch.from_numpy(out).to(char_ids.device)
        return list(stacked.unbind(dim=2)), mask


def _decode(ids: np.ndarray, limit: int = 80) -> str:
    words = []
    for token in ids:
        chars = [c - 1 for c in token if 0 < c - 1 < 256]  # the token's bytes, without the special ids
        words.append(bytes(chars).decode("utf-8", "replace"))
    text = " ".join(words)
    return text if len(text) <= limit else text[:limit] + "..."
