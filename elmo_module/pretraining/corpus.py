"""Raw text for biLM pretraining: tokenizing, the vocabulary, and the parallel streams cut into windows.

arXiv:1802.05365v2 Sec. 3.4, p. 4 (corpus, epochs); the windows, carried state and reversed text are bilm-tf's
bilm/data.py LMDataset: every line (a sentence or paragraph) becomes
``<S> tokens </S>``, lines are shuffled per epoch and concatenated, the result is cut into B parallel streams, and
training walks over them in windows of ``unroll`` tokens with the LSTM state carried from one window to the next.
The backward LM reads the same text reversed, so its state is carried the same way.

The model's input is the characters of the actual word (an out-of-vocabulary word keeps its spelling); only the
softmax target becomes ``<UNK>``. So the corpus is stored as *type* ids (every distinct string) plus a map from type
to vocabulary id.
"""
import codecs
import glob
import re
from array import array
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from elmo_module.characters import BOS_TOKEN, EOS_TOKEN, token_to_ids
from elmo_module.errors import ElmoInputError

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)  # vocabulary ids 0, 1, 2 (bilm-tf's vocabulary files start the same)
BOS_ID, EOS_ID, UNK_ID = 0, 1, 2

# A small PTB/CoNLL-like tokenizer: punctuation split off, "n't" and clitics ('s 're 've 'll 'd 'm) separate,
# hyphenated words, numbers with separators and dotted abbreviations (U.S.) kept whole.
_SIMPLE_TOKEN = re.compile(r"""
      (?:[^\W\d_]\.){2,}                      # U.S.  e.g.
    | \d+(?:[.,:/]\d+)+                       # 1,000.5  12:30  1/2
    | \w+(?=n['’]t\b)                         # do|n't
    | n['’]t\b
    | ['’](?:[sSdDmM]|re|RE|ve|VE|ll|LL)\b    # 's 're 've 'll 'd 'm
    | \w+(?:-\w+)*                            # words, well-known
    | \.\.\.|--
    | \S
""", re.VERBOSE)


def tokenize_simple(line: str) -> List[str]:
    return _SIMPLE_TOKEN.findall(line)


TOKENIZERS: Dict[str, Callable[[str], List[str]]] = {"simple": tokenize_simple, "whitespace": str.split}


def expand_paths(patterns: Sequence[str], what: str) -> List[Path]:
    """Files and globs -> existing files, in the order given (each glob sorted)."""
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise ElmoInputError(f"{what}: no file matches '{pattern}'")
        for match in matches:
            if not Path(match).is_file():
                raise ElmoInputError(f"{what}: '{match}' is not a file")
            paths.append(Path(match))
    return paths


def text_problem(path: Path) -> Optional[str]:
    """None for UTF-8 text with a non-blank line; else what is wrong with it, in one line naming the file (and the
    line of the first byte that is not UTF-8). A cheap whole-file pass, for checks before any training (the runner's
    preflight of the stage corpora); read_corpus and the word-vectors stage say the same when they read the file."""
    decoder, line, text = codecs.getincrementaldecoder("utf-8")(), 1, False
    with open(path, "rb") as f:
        for number, block in enumerate(iter(lambda: f.read(1 << 22), b"")):
            block = block.removeprefix(codecs.BOM_UTF8) if number == 0 else block
            try:
                text = decoder.decode(block).strip() != "" or text
            except UnicodeDecodeError as e:
                at = max(0, min(e.start, len(block) - 1))
                return (f"{path}:{line + block.count(b'\n', 0, at)}: not valid UTF-8 (byte 0x{block[at]:02x}); "
                        f"expected UTF-8 text, one sentence or paragraph per line")
            line += block.count(b"\n")
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return f"{path}:{line}: not valid UTF-8 (cut in the middle of a character at its end)"
    return None if text else f"{path}: no text (an empty file, or blank lines only); expected one sentence or " \
                             f"paragraph per line"


class Corpus:
    """Text as one flat array of type ids, each line wrapped in ``<S> ... </S>``; ``starts`` marks the lines."""

    def __init__(self, types: List[str], ids: np.ndarray, starts: np.ndarray, files: List[Path], skipped: int):
        self.types, self.ids, self.starts, self.files, self.skipped = types, ids, starts, files, skipped

    @property
    def n_tokens(self) -> int:
        """Tokens including the ``<S>``/``</S>`` of every line."""
        return len(self.ids)

    def type_counts(self) -> np.ndarray:
        return np.bincount(self.ids, minlength=len(self.types))

    def shuffled_ids(self, seed: int, epoch: int) -> np.ndarray:
        """The lines in a random order fixed by (seed, epoch), so a resumed run sees exactly the same stream."""
        order = np.random.default_rng([seed, epoch]).permutation(len(self.starts) - 1)
        lengths = np.diff(self.starts)[order]
        first = self.starts[:-1][order]
        offsets = np.cumsum(lengths) - lengths
        index = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths) + np.repeat(first, lengths)
        return self.ids[index]


def read_corpus(paths: Sequence[Path], tokenize: Callable[[str], List[str]], skip_bad_lines: bool = False,
                types: Optional[List[str]] = None, max_tokens: Optional[int] = None) -> Corpus:
    """Read UTF-8 text, one line per sentence or paragraph; empty lines are ignored.

    A line that is not valid UTF-8 is an error naming file and line, unless ``skip_bad_lines`` (then counted).
    ``types`` seeds the type table (so two corpora can share one); ``max_tokens`` stops after that many tokens.
    """
    types = list(types) if types is not None else [BOS_TOKEN, EOS_TOKEN]
    table = {t: i for i, t in enumerate(types)}
    ids, starts, skipped = array("i"), array("q", [0]), 0
    bos, eos = table[BOS_TOKEN], table[EOS_TOKEN]
    for path in paths:
        with open(path, "rb") as f:
            for line_number, raw in enumerate(f, 1):
                if line_number == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)  # a byte-order mark is not part of the first word
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    if skip_bad_lines:
                        skipped += 1
                        continue
                    raise ElmoInputError(f"{path}:{line_number}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at "
                                         f"column {e.start + 1}); fix the file or pass --skip-bad-lines") from None
                tokens = tokenize(line)
                if not tokens:
                    continue
                row = [bos]
                for token in tokens:
                    tid = table.get(token)
                    if tid is None:
                        tid = table[token] = len(types)
                        types.append(token)
                    row.append(tid)
                row.append(eos)
                ids.extend(row)
                starts.append(len(ids))
                if max_tokens is not None and len(ids) >= max_tokens:
                    break
        if max_tokens is not None and len(ids) >= max_tokens:
            break
    if len(starts) == 1:
        names = ", ".join(str(p) for p in paths)
        raise ElmoInputError(f"{names}: no tokens found (expected one sentence or paragraph per line"
                             + (f"; {skipped} lines were not valid UTF-8 and were skipped)" if skipped else ")"))
    return Corpus(types, np.frombuffer(ids, dtype=np.int32).copy(), np.frombuffer(starts, dtype=np.int64).copy(),
                  list(paths), skipped)


def build_vocabulary(corpus: Corpus, max_size: int, min_count: int) -> List[str]:
    """``<S>``, ``</S>``, ``<UNK>``, then the most frequent words (ties alphabetical). Frequency order matters: the
    log-uniform sampler of the sampled softmax assumes id order = frequency order."""
    counts = corpus.type_counts()
    words = [(-int(c), t) for t, c in zip(corpus.types, counts) if c >= min_count and t not in SPECIALS]
    words.sort()
    return list(SPECIALS) + [t for _, t in words[:max(0, max_size - len(SPECIALS))]]


def read_vocabulary(path: Path) -> List[str]:
    if not Path(path).is_file():
        raise ElmoInputError(f"vocabulary file '{path}' does not exist")
    try:
        words = Path(path).read_text(encoding="utf-8-sig").split("\n")
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise ElmoInputError(f"vocabulary file '{path}', line {line}: not valid UTF-8 "
                             f"(byte 0x{e.object[e.start]:02x})") from None
    words = words[:-1] if words and words[-1] == "" else words
    for i, special in enumerate(SPECIALS):
        if i >= len(words) or words[i] != special:
            found = words[i] if i < len(words) else "end of file"
            raise ElmoInputError(f"vocabulary file '{path}', line {i + 1}: expected '{special}', found '{found}'")
    return words


def type_to_vocabulary(types: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
    """(n_types,) vocabulary id of every type; out-of-vocabulary types -> ``<UNK>``."""
    index = {w: i for i, w in enumerate(vocabulary)}
    return np.array([index.get(t, UNK_ID) for t in types], dtype=np.int64)


def character_table(types: Sequence[str], max_chars: int, start: int = 0, table: np.ndarray = None) -> np.ndarray:
    """(n_types, max_chars) character ids (int16, shifted by +1 as the biLM expects); extends ``table`` if given."""
    new = np.array([token_to_ids(t, max_chars) for t in types[start:]], dtype=np.int16).reshape(-1, max_chars)
    return new if table is None else np.concatenate([table, new])


def streams(ids: np.ndarray, rows: int) -> np.ndarray:
    """Cut the id array into ``rows`` consecutive streams of equal length, (rows, length); the tail is dropped."""
    length = len(ids) // rows
    return ids[:rows * length].reshape(rows, length)


def n_windows(length: int, unroll: int) -> int:
    """Windows over streams of ``length`` tokens: each predicts up to ``unroll`` next tokens."""
    return max(0, -(-(length - 1) // unroll))


def windows(matrix: np.ndarray, unroll: int, first: int = 0) -> Iterator[Tuple[int, np.ndarray, np.ndarray]]:
    """(window index, inputs (rows, t), next tokens (rows, t)) with t = unroll except maybe in the last window."""
    length = matrix.shape[1]
    for k in range(first, n_windows(length, unroll)):
        start, end = k * unroll, min(k * unroll + unroll, length - 1)
        yield k, matrix[:, start:end], matrix[:, start + 1:end + 1]
