"""``python -m elmo_module embed``: ELMo layers for every line of a text file, in the layout of bilm-tf's
``dump_bilm_embeddings`` and allennlp 0.9's ``elmo --all``: one dataset per input line, named by its 0-based index,
(3, n_tokens, 2 * projection_dim) for ``--layers all``, plus ``sentence_to_index`` (JSON sentence -> index).

Batches are consecutive lines in file order (row j of batch i is line i*B + j), so a stateful run is reproducible.
"""
import codecs
import errno
import json
import os
import shutil
from pathlib import Path
from typing import List

import torch

from elmo_module.characters import batch_to_ids
from elmo_module.device import resolve
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.pause_points import pause_point
from elmo_module.precision import PRECISIONS, check_precision
from elmo_module.progress import progress_bar
from elmo_module.weights import load_bilm


def add_embed_arguments(parser) -> None:
    parser.add_argument("--options", required=True, help="biLM options.json")
    parser.add_argument("--weights", required=True, help="biLM weights (hdf5, official layout)")
    parser.add_argument("--input", required=True, help="UTF-8 text, one whitespace-tokenized sentence per line")
    parser.add_argument("--output", required=True, help="hdf5 file to write")
    parser.add_argument("--layers", choices=("all", "top", "average"), default="all",
                        help="all: (3, n, D) per line; top: the top LSTM layer (n, D); average: mean of the 3")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--stateless", action="store_true",
                        help="start every sentence from a zero LSTM state (default: carry state per batch row, "
                             "as bilm-tf does)")
    parser.add_argument("--device",
                        help="cpu, cuda or cuda:N (default: the first GPU if torch can run on it, else cpu)")
    parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                        help="the biLM's matrix products (README 'Reduced precision'); "
                             "the output is float32 either way")


def read_sentences(path) -> List[List[str]]:
    path = Path(path)
    if path.is_dir():
        raise ElmoInputError(f"--input '{path}' is a directory; expected a text file, one sentence per line")
    if not path.is_file():
        raise ElmoInputError(f"input file '{path}' does not exist")
    sentences, number = [], 0
    with open(path, "rb") as f:
        for chunk in f:  # split at \n; then at \r too, as bilm-tf and allennlp's `elmo` read (text-mode universal
            # newlines): a CR-only file (old Mac) is one line per sentence, not one sentence
            chunk = chunk.removesuffix(b"\n")
            for raw in chunk.removesuffix(b"\r").split(b"\r"):
                number += 1
                if number == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)  # a byte-order mark is not part of the first word
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ElmoInputError(f"{path} line {number}: not valid UTF-8 "
                                         f"(byte 0x{raw[e.start]:02x} at column {e.start + 1})") from None
                sentences.append(line.split())
    return sentences


def check_writable(output: Path, partial: Path, flag: str = "--output", kind: str = "an hdf5 file name") -> None:
    """Fail before the work, not after it: the output's directory must exist and take a new file (``python -m probes
    --out`` checks the same way)."""
    if output.is_dir():
        raise ElmoInputError(f"{flag} '{output}' is a directory; expected {kind}")
    if not output.parent.is_dir():
        raise ElmoInputError(f"{flag} '{output}': directory '{output.parent}' does not exist")
    try:
        partial.open("wb").close()
    except OSError as e:
        raise ElmoInputError(f"{flag} '{output}': cannot write in '{output.parent}' ({e.strerror})") from None
    partial.unlink()


def output_bytes(sentences: List[List[str]], n_vectors: int, dim: int) -> int:
    """An upper bound of the output's size: float32 vectors, HDF5's bookkeeping per dataset (about 400 bytes
    measured; 1 KiB allowed), the JSON index, 64 KiB for the file's own structures."""
    tokens = sum(len(s) for s in sentences)
    index = sum(len(" ".join(s)) + 16 for s in sentences)
    return 4 * n_vectors * dim * tokens + 1024 * len(sentences) + index + 65536


def check_space(output: Path, needed: int, written: int = 0) -> None:
    """A full disk is found here, before HDF5 runs into it (its write errors come as thousands of lines)."""
    free = shutil.disk_usage(output.parent).free
    if free < needed - written:
        raise ElmoInputError(f"--output '{output}': needs about {(needed - written) / 2**20:.1f} MiB more, "
                             f"'{output.parent}' has {free / 2**20:.1f} MiB free (no output written)")


def run_embed(args) -> int:
    if args.batch_size < 1:
        raise ElmoInputError(f"--batch-size must be at least 1, found {args.batch_size}")
    args.device, line = resolve(args.device)  # an unusable GPU is refused at once
    check_precision(args.precision, args.device)
    output = Path(args.output)
    partial = output.with_name(output.name + ".partial")
    check_writable(output, partial)
    sentences = read_sentences(args.input)
    options = BiLmOptions.load(args.options)
    needed = output_bytes(sentences, options.n_layers + 1 if args.layers == "all" else 1, options.output_dim)
    check_space(output, needed)
    # once the input and output are checked: a bad path is the only line
    print(f"embed: {line}{', bfloat16' if args.precision == 'bfloat16' else ''}", flush=True)
    bilm = load_bilm(args.options, args.weights, stateful=not args.stateless, precision=args.precision)
    bilm = bilm.to(args.device).eval()
    import h5py

    try:
        with h5py.File(partial, "w") as out, torch.no_grad():
            starts = range(0, len(sentences), args.batch_size)
            for start in progress_bar(starts, desc="embedding", unit="batch", total=len(starts)):
                pause_point("embed-batch")
                check_space(output, needed, partial.stat().st_size)  # the disk may fill while we work
                batch = sentences[start:start + args.batch_size]
                result = bilm(batch_to_ids(batch, bilm.options.max_chars).to(args.device))
                stacked = torch.stack(result.layers, dim=1).cpu()  # (B, 3, T, D)
                for row, sentence in enumerate(batch):
                    layers = stacked[row, :, :len(sentence)]
                    if args.layers == "top":
                        layers = layers[-1]
                    elif args.layers == "average":
                        layers = layers.mean(dim=0)
                    out.create_dataset(str(start + row), data=layers.numpy())
            index = {" ".join(s): str(i) for i, s in enumerate(sentences)}
            dataset = out.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))
            dataset[0] = json.dumps(index)
        os.replace(partial, output)
    except (OSError, RuntimeError) as e:  # h5py reports a failed write as either, errno in the text
        if getattr(e, "errno", None) != errno.ENOSPC and "errno = 28" not in str(e):
            raise
        raise ElmoInputError(f"--output '{output}': no space left on device in '{output.parent}' "
                             f"(no output written)") from None
    finally:
        partial.unlink(missing_ok=True)
    print(f"wrote {len(sentences)} sentences to {output}")
    return 0
