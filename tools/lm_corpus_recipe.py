"""Derives runner/data/lm_corpus_recipe.tsv.xz: aligns every line of a reference lm_corpus with the paragraphs of its
origins (runner/data/lm_corpus.py parses them) and writes which document and paragraph each line is. Ids and paragraph
numbers only, never text. Needs the reference corpus (only the suite's builders have it) and git snapshots of the
origins (``DIR/OWNER+REPO/repo``, as ``python -m runner.data verify-conversions`` reads them):

    python -m tools.lm_corpus_recipe --corpus ../shared/data/lm_corpus --origins DIR [--out FILE]

A line found in no origin document is named in one line and the recipe is not written (docs/data.md: none is).
"""
import argparse
import bisect
import collections
import lzma
import subprocess
import sys
from pathlib import Path

from runner.data.fetch import Snapshots
from runner.data.lm_corpus import RECIPE, SOURCES, gutenberg_paragraphs
from runner.spec import SpecError

OUTPUTS = {"wikinews": ["heldout/wikinews.heldout.txt", "wikinews_00.txt", "wikinews_01.txt"],
           "enwiki2015": ["heldout/enwiki2015.heldout.txt", "enwiki2015_00.txt", "enwiki2015_01.txt"],
           "enwiki2018": ["heldout/enwiki2018.heldout.txt"],
           "reuters21578": ["heldout/reuters21578.heldout.txt", "reuters21578_00.txt"],
           "gutenberg": ["heldout/gutenberg.heldout.txt", "gutenberg_00.txt"]}


def gutenberg_books(origins: Path):
    """COMMIT:PATH of every distinct .txt blob under data/ in the snapshot's history (SOURCES.md: "all commits"),
    in blob-id order; of the places a blob is at, the first path and commit in sort order."""
    git = ["git", "--git-dir", str(origins / SOURCES["gutenberg"].repo.replace("/", "+") / "repo")]
    books = {}
    for commit in subprocess.run(git + ["rev-list", "--all", "--", "data"], capture_output=True, text=True,
                                 check=True).stdout.split():
        for row in subprocess.run(git + ["ls-tree", "-r", commit, "data"], capture_output=True, text=True,
                                  check=True).stdout.splitlines():
            meta, path = row.split("\t", 1)
            if path.endswith(".txt"):
                blob = meta.split()[2]
                books[blob] = min(books.get(blob, (path, commit)), (path, commit))
    return [f"{books[blob][1]}:{books[blob][0]}" for blob in sorted(books)]


def documents(source: str, get, origins: Path):
    """[(key, paragraphs)] of every document of the source, in file order."""
    spec = SOURCES[source]
    if not spec.files:
        found = []
        for key in gutenberg_books(origins):
            try:
                found.append((key, gutenberg_paragraphs(get(f"{spec.repo}@{key}"))))
            except SpecError:  # a blob the snapshot lists without its bytes
                pass
        return found
    return [doc for name in spec.files for doc in spec.docs(get(f"{spec.repo}:{name}")).items()]


def align(docs, lines):
    """[(document index, [paragraph indices])]: a document is followed while the next lines are its later
    paragraphs; a new one is the candidate whose paragraphs cover the longest run of lines from here."""
    where = collections.defaultdict(set)
    positions = []
    for d, (_, paragraphs) in enumerate(docs):
        at = collections.defaultdict(list)
        for k, p in enumerate(paragraphs):
            where[p].add(d)
            at[p].append(k)
        positions.append(at)

    def after(d, line, last):
        ks = positions[d].get(line, [])
        j = bisect.bisect_right(ks, last)
        return ks[j] if j < len(ks) else None

    rows, i, current, last = [], 0, None, -1
    while i < len(lines):
        k = after(current, lines[i], last) if current is not None else None
        if k is None:
            if not where.get(lines[i]):
                raise ValueError(f"line {i + 1} ({len(lines[i])} characters) is in no origin document")
            best, length = None, -1
            for d in sorted(where[lines[i]]):
                j, at = i, -1
                while j < len(lines) and (at := after(d, lines[j], at)) is not None:
                    j += 1
                if j - i > length:
                    best, length = d, j - i
            k = after(best, lines[i], -1)
            if not (rows and rows[-1][0] == best and rows[-1][1][-1] < k):
                rows.append((best, []))
            current = best
        rows[-1][1].append(k)
        last, i = k, i + 1
    return rows


def ranges(ks):
    out, i = [], 0
    while i < len(ks):
        j = i
        while j + 1 < len(ks) and ks[j + 1] == ks[j] + 1:
            j += 1
        out.append(str(ks[i]) if i == j else f"{ks[i]}-{ks[j]}")
        i = j + 1
    return ",".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lm_corpus_recipe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="the reference lm_corpus folder")
    parser.add_argument("--origins", required=True, help="folder of snapshots: OWNER+REPO/repo (git)")
    parser.add_argument("--out", default=str(RECIPE))
    args = parser.parse_args(argv)
    get, out = Snapshots(Path(args.origins)), []
    for source, names in OUTPUTS.items():
        docs = documents(source, get, Path(args.origins))
        out.append(f"source\t{source}")
        for name in names:
            lines = (Path(args.corpus) / name).read_text(encoding="utf-8").split("\n")[:-1]
            try:
                rows = align(docs, lines)
            except ValueError as e:
                print(f"error: {args.corpus}/{name}: {e}", file=sys.stderr)
                return 1
            out.append(f"file\tlm_corpus/{name}")
            out += [f"{docs[d][0]}\t{ranges(ks)}" for d, ks in rows]
            print(f"{name}: {len(lines)} lines from {len({d for d, _ in rows})} documents", flush=True)
    data = lzma.compress(("\n".join(out) + "\n").encode(), preset=9 | lzma.PRESET_EXTREME)
    Path(args.out).write_bytes(data)
    print(f"{args.out}: {len(out)} rows, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
