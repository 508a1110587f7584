"""Static word vectors for the baselines, trained here because GloVe cannot be downloaded (issue: the small profile).

Every baseline of the paper starts from pretrained GloVe vectors (supplement A.2-A.8): 840B.300d for SQuAD, SNLI,
coref and SST-5, 6B.100d for SRL (deep_srl config/srl_config.json:9), 6B.50d for NER (allennlp-models
ner_elmo.jsonnet:38-43). A profile without those files gets vectors of the same shape trained on the biLM's own
pretraining text, so that the comparison is static against contextual vectors from one corpus. 840B is cased and 6B
lowercased, so the 300-d file is cased and the 100-d and 50-d files are lowercased, as the releases they stand in
for. The text is tokenized as the biLM's pretraining tokenizes it (``elmo_module.pretraining.corpus.tokenize_simple``).

The trainer is gensim's word2vec (skip-gram with negative sampling; Mikolov et al. 2013), one worker thread by default
and one pinned BLAS kernel (``blas_kernel``), so that the output is the same bytes on every run on every x86-64 CPU
kind (gensim's ``corpus_file`` mode with several workers depends on thread timing; vectors that differ all the same,
as on another architecture, are other vectors to the runner: runner/execution/archive.py check_finished). Files are
GloVe's text format (``word v1 ... vD``, no header line, most frequent word first), which allennlp's
``Embedding(pretrained_file=...)`` and our configs' ``GLOVE_PATH`` read.

A profile asks for them with a ``vectors`` section and points ``GLOVE_PATH`` at the files::

    "vectors": {"out": "artifacts/small/vectors", "train": ["../shared/data/lm_corpus/*.txt"],
                "dims": ["300:cased", "100:lowercase", "50:lowercase"], "args": ["--epochs", "5"]}

The stage (``prepare_vectors``, run by the runner before any run) is skipped once ``OUT/vectors.json`` records the same
training files (their sha256 too: a changed corpus makes the vectors again) and settings, and refused while a vector
file no longer matches the sha256 recorded for it; its command and wall time go to ``OUT/stages.json`` as the biLM
stages' do. ``OUT/vectors.json`` also holds the quality checks (WordSim-353 and SimLex-999 rank correlations, the Google
analogy set, nearest neighbours of a few words; the word sets are the copies gensim ships for its own tests), which the
runner writes to ``results/<profile>/vectors.md``.

    python -m runner.stages.word_vectors --train F [F ...] --out DIR \
        [--dims 300:cased 100:lowercase 50:lowercase] [--epochs 5]
"""
import argparse
import codecs
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from runner.execution.freshness import MISSING, changed_reads, changed_writes, in_format, reads, sha256_of
from runner.paths import REPO, expand, repo_path
from runner.records import keep_portable, repo_relative, write_atomic
from runner.spec import SpecError
from runner.stages.bilm_stages import call_stage

RECORD = "vectors.json"
OTHER_SETTINGS = "made with other settings"
NEIGHBOUR_WORDS = ("king", "France", "good", "Monday", "computer", "play", "bank", "seven")


def file_name(dim: int, case: str) -> str:
    return f"vectors.{dim}d.{case}.txt"


def _dims(values: List[str]) -> List[tuple]:
    dims = []
    for value in values:
        dim, _, case = value.partition(":")
        if not dim.isdigit() or int(dim) <= 0 or case not in ("cased", "lowercase"):
            raise SystemExit(f"error: --dims {value}: expected DIM:cased or DIM:lowercase (e.g. 300:cased)")
        dims.append((int(dim), case))
    return dims


def _tokenized_corpus(train: List[Path], out: Path, lowercase: bool) -> Dict[str, int]:
    """The training text tokenized once, one line per input line, for gensim's fast ``corpus_file`` mode."""
    from elmo_module.pretraining.corpus import tokenize_simple  # (torch/allennlp behind it: loaded when this runs)

    path = out / f"corpus.{'lowercase' if lowercase else 'cased'}.txt"
    counts = {"lines": 0, "tokens": 0}
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as f:
        for source in train:
            print(f"  tokenizing {source}{' (lowercased)' if lowercase else ''}", flush=True)
            with open(source, "rb") as lines:
                for number, raw in enumerate(lines, 1):
                    try:  # one line naming file and line, as pretraining says it (elmo_module/pretraining/corpus.py)
                        line = (raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw).decode("utf-8")
                    except UnicodeDecodeError as e:
                        partial.unlink()
                        raise SystemExit(f"error: {source}:{number}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at "
                                         f"column {e.start + 1}); expected UTF-8 text, one paragraph per "
                                         "line") from None
                    tokens = tokenize_simple(line.lower() if lowercase else line)
                    if tokens:
                        f.write(" ".join(tokens) + "\n")
                        counts["lines"] += 1
                        counts["tokens"] += len(tokens)
    if not counts["tokens"]:
        partial.unlink()
        raise SystemExit(f"error: --train {' '.join(map(str, train))}: no text (empty files, or blank lines only); "
                         f"expected one paragraph per line")
    os.replace(partial, path)
    counts["path"] = str(path)
    return counts


def write_glove(keyed_vectors, path: Path) -> None:
    """GloVe text format, most frequent word first; written to a .partial file and renamed when complete."""
    import numpy as np

    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as f:
        for word, vector in zip(keyed_vectors.index_to_key, keyed_vectors.vectors):
            f.write(word + " " + " ".join(np.char.mod("%.5f", vector).tolist()) + "\n")
    os.replace(partial, path)


def quality(keyed_vectors, lowercase: bool) -> dict:
    """Word-similarity and analogy scores, and nearest neighbours: the vectors' sanity check for vectors.md."""
    from gensim.test.utils import datapath

    checks = {}
    for name, file in (("wordsim353", "wordsim353.tsv"), ("simlex999", "simlex999.txt")):
        try:
            _, spearman, oov = keyed_vectors.evaluate_word_pairs(datapath(file), case_insensitive=True)
            checks[name] = {"spearman": round(float(spearman[0]), 4), "oov_percent": round(float(oov), 1)}
        except (ValueError, ZeroDivisionError):  # a tiny vocabulary (tests) holds fewer than two of the pairs
            checks[name] = {"spearman": None, "oov_percent": 100.0}
    try:
        score, _ = keyed_vectors.evaluate_word_analogies(datapath("questions-words.txt"), restrict_vocab=30000,
                                                         case_insensitive=True)
        checks["google_analogy_accuracy"] = round(float(score), 4)
    except (ValueError, ZeroDivisionError):
        checks["google_analogy_accuracy"] = None
    neighbours = {}
    for word in NEIGHBOUR_WORDS:
        key = word.lower() if lowercase else word
        if key in keyed_vectors.key_to_index:
            neighbours[key] = [w for w, _ in keyed_vectors.most_similar(key, topn=6)]
    checks["neighbours"] = neighbours
    return checks


def train(args) -> dict:
    import gensim
    from gensim.models import Word2Vec

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    # the freshness record of runner/execution/freshness.py (settings, reads, writes), then what the files are
    record = {"settings": settings(args), "reads": reads(args.train), "writes": {}, "gensim": gensim.__version__,
              "files": {}, "corpus": {}}
    for lowercase in sorted({case == "lowercase" for _, case in _dims(args.dims)}):
        corpus = _tokenized_corpus([Path(p) for p in args.train], out, lowercase)
        record["corpus"]["lowercase" if lowercase else "cased"] = corpus
        for dim, case in _dims(args.dims):
            if (case == "lowercase") != lowercase:
                continue
            print(f"  training {dim}-d {case} vectors ({args.epochs} epochs over {corpus['tokens']:,} tokens, "
                  f"{args.threads} thread(s))", flush=True)
            began = time.time()
            try:
                model = Word2Vec(corpus_file=corpus["path"], vector_size=dim, window=args.window,
                                 min_count=args.min_count, max_final_vocab=args.max_vocab, sg=1, negative=5,
                                 sample=1e-4, epochs=args.epochs, workers=args.threads, seed=args.seed)
            except RuntimeError as e:  # gensim: "you must first build vocabulary before training the model"
                os.remove(corpus["path"])
                raise SystemExit(f"error: --train: no word occurs --min-count {args.min_count} times in its "
                                 f"{corpus['tokens']:,} tokens ({e}); expected more text or a lower "
                                 "--min-count") from None
            path = out / file_name(dim, case)
            write_glove(model.wv, path)
            record["writes"][path.name] = sha256_of(path)
            record["files"][str(dim)] = {"path": path.name, "case": case, "vocabulary": len(model.wv),
                                         "bytes": path.stat().st_size,
                                         "train_s": round(time.time() - began, 1),
                                         **quality(model.wv, lowercase)}
        os.remove(corpus["path"])  # the tokenized text is large and cheap to make again
        corpus["path"] = Path(corpus["path"]).name  # records name no absolute path of this machine
    record["wall_time_s"] = round(time.time() - started, 1)
    record["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    partial = out / (RECORD + ".partial")
    partial.write_text(json.dumps(record, indent=2))
    os.replace(partial, out / RECORD)  # last: its presence means every file above is complete
    return record




def settings(args) -> dict:
    """What makes the vectors what they are: a record with other settings is not reused."""
    return {"train": [str(p) for p in args.train], "dims": list(args.dims), "epochs": args.epochs,
            "window": args.window, "min_count": args.min_count, "max_vocab": args.max_vocab, "seed": args.seed,
            "method": "word2vec skip-gram, 5 negatives, sample 1e-4", "blas_kernel": blas_kernel()}


def blas_kernel() -> str:
    """The OpenBLAS kernel the stage pins (OPENBLAS_CORETYPE). gensim's word2vec updates every vector through BLAS
    (sdot, saxpy of scipy's OpenBLAS: gensim/models/word2vec_inner.pyx), and OpenBLAS picks its kernels per CPU model
    at load time (DYNAMIC_ARCH); each kernel sums in its own order, so the same corpus and seed gave other bytes on
    an AVX-512 machine than on an AVX2 one. Pinned to Haswell's (AVX2 + FMA: every x86-64 CPU of the last decade, the
    AVX-512 ones included), else the baseline x86-64 kernel (Prescott); on another architecture not pinned (say so)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"not pinned ({platform.machine()}: OpenBLAS's choice for this CPU)"
    try:
        flags = set(next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        flags = set()
    return "Haswell" if {"avx2", "fma"} <= flags else "Prescott"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m runner.stages.word_vectors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", nargs="+", required=True, help="training text files (one paragraph per line)")
    parser.add_argument("--out", required=True, help="directory for vectors.<dim>d.<case>.txt and vectors.json")
    parser.add_argument("--dims", nargs="+", default=["300:cased", "100:lowercase", "50:lowercase"],
                        help="DIM:cased|lowercase, one file each (default: the three GloVe files the paper's "
                             "baselines read)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-vocab", type=int, default=200000, help="most frequent words kept (default 200,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="worker threads (default 1: more are faster but no longer give the same bytes)")
    args = parser.parse_args(argv)
    for name in ("epochs", "window", "min_count", "max_vocab", "threads"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a positive integer")
    _dims(args.dims)
    for path in args.train:
        if "heldout" in Path(path).parts:
            parser.error(f"--train {path}: a held-out file; the vectors train on the training text only (the "
                         f"biLM's held-out perplexity is measured on it)")
        if not Path(path).is_file():
            parser.error(f"--train {path}: not a file")
    return args


def to_make(out: Path, args: List[str]) -> Optional[str]:
    """None when OUT holds the vectors that ``args`` ask for (the stage is then skipped): OUT/vectors.json records
    the same settings and the same bytes of the training files as today's. Else why they are to be made (one line).
    A vector file that no longer matches its own record (cut, edited) is refused (SpecError): reused, or trained on
    by --redo-stale, it would give runs of other vectors than the record says."""

    path = out / RECORD
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or cut short (it is written last, by rename: a stage never finished)
        return "not made yet"
    in_format(record, path)
    wanted = parse_args([*args, "--out", str(out)])
    if record.get("settings") != settings(wanted):
        now = settings(wanted)
        changed = [f"{k} {record.get('settings', {}).get(k)} -> {now[k]}" for k in now
                   if (record.get("settings") or {}).get(k) != now[k]]
        return f"{OTHER_SETTINGS} ({'; '.join(changed)})"
    # (the stage itself runs in the repository: runner/stages/bilm_stages.py call_stage)
    changed = changed_reads(record["reads"], reads(wanted.train))
    if changed:
        return f"{', '.join(changed)} changed since they were made"
    for name, recorded, found in changed_writes(record, out):
        if found == MISSING:
            return f"{name} is missing"
        vocabulary = next(f["vocabulary"] for f in record["files"].values() if f["path"] == name)
        with open(out / name, "rb") as lines:
            count = sum(block.count(b"\n") for block in iter(lambda: lines.read(1 << 22), b""))
        raise SpecError(f"word vectors: {out / name} does not match its record in {path} ({vocabulary:,} words, "
                        f"sha256 {recorded[:12]}; found {count:,} lines, sha256 {found[:12]}): remove {out} to make "
                        f"the vectors again (the runs that read them then train again)")
    return None


def stage_args(spec: dict) -> List[str]:
    """The stage's command-line arguments (``spec``: the profile's "vectors"): its training files (globs expanded,
    sorted) and settings."""
    import glob


    train = []
    for pattern in spec["train"]:  # as given (relative to the repository, where the stage runs): portable records
        pattern = expand(pattern)
        train += sorted(glob.glob(pattern, root_dir=REPO)) if glob.has_magic(pattern) else [pattern]
    return ["--train", *train, *(["--dims", *spec["dims"]] if spec.get("dims") else []), *spec.get("args", [])]


def check_vectors_settings(spec: dict) -> None:
    """With no run left to do the stage does not run: vectors made with other settings than the profile's "vectors"
    (``spec``, {} without a stage) are then refused in one line (the finished baselines read them), never taken as
    the profile's."""
    if not spec:
        return
    out = repo_path(spec["out"])
    why = to_make(out, stage_args(spec)) if (out / RECORD).is_file() else None
    if why and why.startswith(OTHER_SETTINGS):
        raise SpecError(f"word vectors: {out} was {why[len('made '):]}: remove {out} to make them again (the "
                        f"finished runs that read them are then stale), or put the profile's args back")


def vectors_pending(spec: dict) -> bool:
    """True when prepare_vectors() would train the profile's vectors (``spec``: its "vectors", {} without a stage)."""

    return bool(spec) and to_make(repo_path(spec["out"]), stage_args(spec)) is not None


def prepare_vectors(spec: dict, quiet: bool = False) -> Optional[Path]:
    """Run the profile's vectors stage (``spec``: its "vectors", {} without a stage) unless it is done. Returns its
    output directory (None without a stage)."""
    if not spec:
        return None

    out = repo_path(spec["out"])
    args = stage_args(spec)
    why = to_make(out, args)
    if why is None:
        print(f"word vectors: done ({out})", flush=True)
        return out
    if (out / RECORD).is_file():  # the runs that read the old vectors are then stale (their checksums differ)
        print(f"word vectors: made again ({why})", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORD).unlink(missing_ok=True)
    call_stage([sys.executable, "-m", "runner.stages.word_vectors", *args, "--out", str(out)], out, out / "vectors.log",
          "word vectors", show=not quiet)
    return out


def archive_vectors(spec: dict, archive: Path) -> None:
    """A multi-session profile keeps the stage's records (not the large vector files, which stay out of git and are
    made again, the same bytes, by a fresh clone that still has runs to do) in RESULTS/vectors/."""
    out = repo_path(spec["out"])
    for name in (RECORD, "stages.json"):
        if (out / name).is_file():
            keep_portable(out / name, archive / name)


def write_report(spec: dict, archive_runs: bool, results_dir: Path, provenance: List[str],
                 out_dir: Optional[Path] = None) -> None:
    """vectors.md (in out_dir, by default results/<profile>/) from the record of the stage ``spec`` (the profile's
    "vectors"; here, else the one archived in results/<profile>/vectors/); a multi-session profile (``archive_runs``)
    archives the record first."""

    out = spec["out"]
    out_dir = results_dir if out_dir is None else out_dir
    if archive_runs:
        archive_vectors(spec, results_dir / "vectors")
    for path in (repo_path(out) / RECORD, results_dir / "vectors" / RECORD):
        if path.is_file():
            text = vectors_markdown(repo_relative(json.loads(path.read_text())), out, provenance)
            out_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(out_dir / "vectors.md", text)
            return


def vectors_markdown(record: dict, out: str, provenance: List[str]) -> str:
    """results/<profile>/vectors.md: what the baselines' word vectors are and how good they look."""
    s = record["settings"]
    lines = ["# Word vectors of the baselines (GloVe stand-ins)", "",
             f"Trained by `python -m runner.stages.word_vectors` (gensim {record['gensim']}, {s['method']}, window "
             f"{s['window']}, "
             f"{s['epochs']} epochs, min count {s['min_count']}, at most {s['max_vocab']:,} words, seed {s['seed']}, "
             f"BLAS kernel {s.get('blas_kernel', 'of its CPU (not pinned then)')}) "
             f"on the biLM's training text; written to `{out}/` in GloVe's text format; "
             f"{record['wall_time_s'] / 60:.0f} min in all.", ""]
    for case, corpus in record["corpus"].items():
        lines.append(f"- {case} text: {corpus['tokens']:,} tokens in {corpus['lines']:,} lines")
    lines += ["- training files: " + ", ".join(f"`{p}`" for p in s["train"]), "",
              "| file | stands in for | words | WordSim-353 ρ | SimLex-999 ρ | Google analogies (top 30k words) | "
              "training |",
              "|---|---|---|---|---|---|---|"]
    glove = {"300": "glove.840B.300d (cased)", "100": "glove.6B.100d (lowercased)", "50": "glove.6B.50d (lowercased)"}
    for dim, f in record["files"].items():
        lines.append(f"| `{f['path']}` | {glove.get(dim, '-')} | {f['vocabulary']:,} | "
                     f"{_score(f['wordsim353']['spearman'])} | "
                     f"{_score(f['simlex999']['spearman'])} | {_score(f['google_analogy_accuracy'], 100, ' %')} | "
                     f"{f['train_s'] / 60:.1f} min |")
    lines += ["", "The GloVe files they stand in for were trained on 6 (6B) and 840 (840B) billion tokens; these on "
                  "the "
              "~20M above. Word pairs and analogies: the copies of WordSim-353, SimLex-999 and Mikolov et al.'s "
              "analogy set that gensim ships for its tests (Spearman ρ over the pairs both words of which are in "
              "the vocabulary).", "", "Nearest neighbours (cosine):", ""]
    for dim, f in record["files"].items():
        for word, near in f["neighbours"].items():
            lines.append(f"- {dim}-d `{word}`: {', '.join(near)}")
    return "\n".join(lines + ["", *provenance]) + "\n"


def _score(value, scale=1, unit="") -> str:
    return "-" if value is None else f"{scale * value:.{1 if scale != 1 else 3}f}{unit}"


def main(argv=None) -> int:
    args = parse_args(argv)
    kernel = blas_kernel()
    if not kernel.startswith("not pinned") and os.environ.get("OPENBLAS_CORETYPE") != kernel:
        # OpenBLAS picks its kernel when it loads: the stage runs in a child that has it from its start
        return subprocess.call([sys.executable, "-m", "runner.stages.word_vectors",
                                *(sys.argv[1:] if argv is None else argv)],
                               env={**os.environ, "OPENBLAS_CORETYPE": kernel})
    record = train(args)
    for f in record["files"].values():
        print(f"  {f['path']}: {f['vocabulary']:,} words, WordSim-353 {_score(f['wordsim353']['spearman'])}, "
              f"SimLex-999 {_score(f['simlex999']['spearman'])}, analogies "
              f"{_score(f['google_analogy_accuracy'], 100, ' %')}")
    print(f"vectors in {args.out} ({record['wall_time_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
