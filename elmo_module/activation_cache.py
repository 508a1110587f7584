"""Frozen-biLM activation cache (the e2e-coref practice of caching ELMo layers as an explicit step).

The biLM is frozen and, run stateless, its layers for a sentence depend only on that sentence's character ids. So
the cache stores them once per distinct sentence (SNLI repeats every premise three times), keyed by a hash of the
ids, and every run of a sweep reads them instead of running the biLM. The cache records the checksum of the biLM
files it was built from: a run with other weights rejects it; a sentence that is not in it (other data) is an error,
never a silent substitute.

Stored format (``FORMAT`` 2), compact because the paper's tasks at full size come to ~190 GB in float32
(docs/speed.md, 'The activation cache'):
- ``vectors.npy``: float16, one row per stored token: the token layer's first half (layer 0 is [x; x], bilm.py, so
  half of it is stored), then each LSTM layer; memory-mapped when read. float16 keeps 11 significant bits: a
  relative rounding error of at most 2**-11 = 4.9e-4, next to the biLM's own outputs (LSTM layers clipped to
  [-3, 3]: the clip value of bilm-tf's released options, bilm-tf bin/train_elmo.py) and the task's dropout of 0.5 on
  the ELMo vector (arXiv:1802.05365v2 supplement A.6, p. 14). A value beyond float16's range (65504) stops the build
  instead of becoming inf.
- ``index.json``: sentence key -> [first row, n tokens]; ``meta.json`` (written last): format, dtype, weights
  checksum, the biLM's precision (``elmo_module.precision``; absent = float32, as every cache before it), data
  checksums, sizes. A run reads only a cache of its own precision: bfloat16's layers are not float32's.
Format 1 (float32 ``layers.npy`` of every layer in full) is refused with a message saying to rebuild it, never read.

Concurrency (two runners, or a runner and a test, may build one cache at once): builders of one directory hold an
exclusive lock (``DIR.lock``) and each writes into its own temporary directory (``DIR.partial-*``), swapped in once
complete; a builder that finds a finished cache under the lock reuses it (``reuse=True``). Readers need no lock: a
directory is either absent or complete.
"""
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_module.bilm import ElmoBiLm
from elmo_module.characters import batch_to_ids
from elmo_module.errors import ElmoInputError
from elmo_module.progress import progress_bar

FORMAT = 2
DTYPES = ("float16", "float32")  # float32 only to measure what float16 costs (docs/speed.md, "The activation cache")


def row_width(n_layers: int, dim: int) -> int:
    """Stored values per token: half of the token layer ([x; x]) and every LSTM layer in full."""
    return dim // 2 + (n_layers - 1) * dim


def bytes_per_token(n_layers: int, dim: int) -> int:
    """Bytes the stored format takes per stored token for a biLM with ``n_layers`` output layers (token layer
    included: 3 for the released biLM) of ``dim`` values (1024): 5,120 bytes for the released biLM (float32 and
    every layer in full: 12,288). A sentence that occurs several times is stored once; index.json adds ~60 bytes
    per distinct sentence."""
    return np.dtype(np.float16).itemsize * row_width(n_layers, dim)


def stored_width(meta: dict) -> int:
    """Values per stored row of a cache: a biLM's (row_width), or a transformer's every layer in full."""
    return meta["layers"] * meta["dim"] if meta.get("kind") == "transformer" else row_width(meta["layers"], meta["dim"])


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


def cache_problem(directory, weights_checksum: str, precision: str = "float32") -> Optional[str]:
    """None if ``directory`` holds a complete cache of this format built from these weights in this precision,
    else why not."""
    directory = Path(directory)
    meta_path = directory / "meta.json"
    if not meta_path.is_file():
        return f"activation cache '{directory}' is missing or incomplete (no meta.json)"
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError:
        return f"activation cache '{meta_path}' is not valid JSON; delete '{directory}' and rebuild it"
    if meta.get("format", 1) != FORMAT:
        return (f"activation cache '{directory}' has format {meta.get('format', 1)} (float32 layers.npy, written by "
                f"an older version); this version reads format {FORMAT}: delete it and rebuild it (the runner does)")
    if meta.get("weights_checksum") != weights_checksum:
        return (f"stale activation cache '{directory}': built from biLM weights "
                f"{str(meta.get('weights_checksum'))[:12]}, but this run uses {weights_checksum[:12]}; rebuild it")
    if meta.get("precision", "float32") != precision:
        return (f"activation cache '{directory}' holds the biLM's layers computed in {meta.get('precision', 'float32')}"
                f", this run asks for {precision} (ELMO_PRECISION); build one in {precision} or change the knob")
    return None


@contextmanager
def _exclusive(directory: Path):
    """One builder of ``directory`` at a time, across processes (the lock file stays: removing it would let a
    third process lock a new file while a second still holds the old one)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"activation cache '{directory}' is being built by another process; waiting for it", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_cache(bilm: ElmoBiLm, sentences: Iterable[Sequence[str]], directory, weights_checksum: str,
                data: dict = None, batch_size: int = 32, progress: bool = True, reuse: bool = False,
                dtype: str = "float16") -> Path:
    """Run the (stateless) biLM once per distinct sentence and write the cache to ``directory`` (replacing what is
    there; with ``reuse``, a complete cache from these weights found there is kept instead)."""
    if bilm.stateful:
        raise ValueError("the activation cache needs a stateless biLM (per-sentence outputs)")
    unique: Dict[str, List[str]] = {}
    for sentence in sentences:
        ids = batch_to_ids([list(sentence)], bilm.options.max_chars)[0].numpy()
        unique.setdefault(sentence_key(ids), list(sentence))
    n_layers, dim = bilm.num_output_layers, bilm.options.output_dim
    half = dim // 2

    def rows_of(keys: List[str]) -> np.ndarray:
        ids = batch_to_ids([unique[k] for k in keys], bilm.options.max_chars)
        # on the biLM's device (a GPU if the runner has one), stored from the CPU
        layers = [layer.cpu() for layer in bilm(ids.to(next(bilm.parameters()).device)).layers]
        if not torch.equal(layers[0][..., :half], layers[0][..., half:]):
            raise ValueError("the biLM's layer 0 is not [x; x]; the cache stores one half of it")
        return torch.cat([layers[0][..., :half], *layers[1:]], dim=-1).numpy()  # (B, T, width)

    bilm.eval()
    meta = {"weights_checksum": weights_checksum, "precision": bilm.precision, "data": data or {},
            "layers": n_layers, "dim": dim}
    return write_cache(directory, unique, rows_of, row_width(n_layers, dim), meta, reuse, dtype, batch_size,
                       progress, "caching biLM layers", "biLM")


def write_cache(directory, unique: Dict[str, List[str]], rows_of: Callable[[List[str]], np.ndarray],
                width: int, meta: dict, reuse: bool, dtype: str, batch_size: int, progress: bool, desc: str,
                what: str) -> Path:
    """Write a cache of ``unique`` (key -> the text's words, one stored row per word) to ``directory`` atomically,
    one builder at a time (the module's "Concurrency"); ``rows_of(keys)`` gives their texts' rows, (B, T, width). With
    ``reuse``, a complete cache of ``meta``'s weights and precision found under the lock is kept instead."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, found {dtype!r}")
    directory = Path(directory)
    with _exclusive(directory):
        if reuse and cache_problem(directory, meta["weights_checksum"], meta["precision"]) is None:
            return directory  # another builder finished it while this one waited
        for leftover in [*directory.parent.glob(directory.name + ".partial-*"),
                         *directory.parent.glob(directory.name + ".old-*")]:
            shutil.rmtree(leftover, ignore_errors=True)  # of a killed builder: no builder runs but this one
        partial = Path(tempfile.mkdtemp(prefix=directory.name + ".partial-", dir=directory.parent))
        try:
            os.chmod(partial, 0o755)  # mkdtemp's 0700 would stay on the cache after the rename
            _write(unique, rows_of, width, partial, meta, batch_size, progress, np.dtype(dtype), desc, what)
            if directory.exists():
                old = directory.with_name(f"{directory.name}.old-{os.getpid()}")
                os.replace(directory, old)
                os.replace(partial, directory)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(partial, directory)
        finally:
            shutil.rmtree(partial, ignore_errors=True)  # only if something failed before the rename
    return directory


def _write(unique: Dict[str, List[str]], rows_of, width: int, out: Path, meta: dict, batch_size: int,
           progress: bool, dtype: np.dtype, desc: str, what: str) -> None:
    keys = sorted(unique, key=lambda k: len(unique[k]))  # similar lengths together: less padding
    total = sum(len(unique[k]) for k in keys)
    vectors = np.lib.format.open_memmap(out / "vectors.npy", mode="w+", dtype=dtype, shape=(total, width))
    index, row = {}, 0
    with torch.no_grad(), progress_bar(total=len(keys), desc=desc, unit="sent", disable=not progress) as bar:
        for start in range(0, len(keys), batch_size):
            batch = keys[start:start + batch_size]
            rows = rows_of(batch)
            for b, key in enumerate(batch):
                n = len(unique[key])
                stored = rows[b, :n].astype(dtype)
                if not np.isfinite(stored).all():
                    raise ElmoInputError(f"{what} output for the sentence {' '.join(unique[key])[:80]!r} reaches "
                                         f"{np.abs(rows[b, :n]).max():.4g}, beyond {dtype.name}'s range: the "
                                         f"activation cache cannot store it (run with --no-cache)")
                vectors[row:row + n] = stored
                index[key] = [row, n]
                row += n
            bar.update(len(batch))
    vectors.flush()
    del vectors
    (out / "index.json").write_text(json.dumps(index))
    meta = {"format": FORMAT, "dtype": dtype.name, **meta, "sentences": len(keys), "tokens": total}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))  # last: its presence marks a complete cache


class ActivationCache:
    """Read side: ``lookup(char_ids)`` -> the biLM layers (float32) and mask, as ``ElmoBiLm.forward`` gives them."""

    def __init__(self, directory, weights_checksum: str, precision: str = "float32"):
        self.directory = Path(directory)
        problem = cache_problem(self.directory, weights_checksum, precision)
        if problem:
            raise ElmoInputError(problem)
        self.meta = json.loads((self.directory / "meta.json").read_text())
        self.index = json.loads((self.directory / "index.json").read_text())
        try:
            self.vectors = np.load(self.directory / "vectors.npy", mmap_mode="r")
        except (OSError, ValueError) as e:  # cut short: "mmap length is greater than file size"
            raise ElmoInputError(f"activation cache '{self.directory}': vectors.npy is not a complete array "
                                 f"({(self.directory / 'vectors.npy').stat().st_size:,} bytes; {e}): remove the "
                                 f"directory to rebuild it") from None
        self.n_layers, self.dim = self.meta["layers"], self.meta["dim"]
        expected = (self.meta["tokens"], stored_width(self.meta))
        if self.vectors.shape != expected or self.vectors.dtype.name != self.meta["dtype"]:
            raise ElmoInputError(f"activation cache '{self.directory}': vectors.npy holds {self.vectors.dtype.name} "
                                 f"{self.vectors.shape}, meta.json says {self.meta['dtype']} {expected}; rebuild it")

    def gather(self, keys: List[str], lengths: List[int], steps: int, named: Callable[[int], str]) -> torch.Tensor:
        """(texts, steps, stored width), float32: each text's stored rows, zeros after its length. A text not in the
        cache (``named(b)`` says which) is an error, never a substitute."""
        rows = np.zeros((len(keys), steps, self.vectors.shape[1]), dtype=np.float32)
        for b, (key, n) in enumerate(zip(keys, lengths)):
            entry = self.index.get(key)
            if entry is None:
                raise ElmoInputError(f"activation cache '{self.directory}' has no entry for {named(b)}: the data "
                                     f"changed since the cache was built; rebuild it")
            rows[b, :n] = self.vectors[entry[0]:entry[0] + entry[1]]
        return torch.from_numpy(rows)

    def lookup(self, char_ids: torch.Tensor) -> Tuple[List[torch.Tensor], torch.Tensor]:
        mask = (char_ids > 0).any(dim=-1)
        batch, steps = mask.shape
        ids, lengths = char_ids.cpu().numpy(), mask.sum(dim=1).tolist()
        rows = self.gather([sentence_key(ids[b, :n]) for b, n in enumerate(lengths)], lengths, steps,
                           lambda b: f"the sentence {_decode(ids[b, :lengths[b]])!r}").to(char_ids.device)
        half = self.dim // 2
        token = rows[..., :half]
        lstm = rows[..., half:].reshape(batch, steps, self.n_layers - 1, self.dim).unbind(dim=2)
        return [torch.cat([token, token], dim=-1), *lstm], mask


def _decode(ids: np.ndarray, limit: int = 80) -> str:
    words = []
    for token in ids:
        chars = [c - 1 for c in token if 0 < c - 1 < 256]  # the token's bytes, without the special ids
        words.append(bytes(chars).decode("utf-8", "replace"))
    text = " ".join(words)
    return text if len(text) <= limit else text[:limit] + "..."
