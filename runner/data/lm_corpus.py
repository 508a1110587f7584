"""lm_corpus, the biLM's pretraining text, rebuilt from its five public origins by a committed recipe.

lm_corpus/SOURCES.md gives the corpus's rules only in outline (documents sampled and shuffled, paragraphs filtered,
duplicates dropped), with no list of what was kept; the recipe, runner/data/lm_corpus_recipe.tsv.xz, is that list. It
was derived by aligning every line of the reference files with the origins, and holds metadata only, never text:

    source<TAB>NAME                 the origin below whose documents the next rows name
    file<TAB>lm_corpus/PATH         the output file the next rows make, one line per item, in order
    KEY<TAB>K,A-B,...               a document of that origin (page id, NEWID, or COMMIT:PATH of a book) and the
                                    paragraphs of it that are the next lines: K (0-based, as parsed below), A..B

Each output file is its lines, each followed by "\n". Every line is a whole paragraph of an origin document, parsed
per origin as written in each ``*_docs`` function (the documented cleaning: wikiextractor lines stripped, Reuters'
wrapped lines re-joined, Gutenberg's hard-wrapped lines joined, page markers and ``_italic_`` underscores removed).
The choice and the order of documents and paragraphs are the recipe's (SOURCES.md's sampling and filters).
"""
import html
import json
import lzma
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

RECIPE = Path(__file__).with_name("lm_corpus_recipe.tsv.xz")
Docs = Dict[str, List[str]]  # document key -> its paragraphs


def wikinews_docs(data: bytes) -> Docs:
    """wikiextractor --json: one JSON object per line; paragraphs = its "text" split at newlines, each stripped."""
    docs = {}
    for line in data.decode("utf-8").split("\n"):
        if not line.strip():
            continue
        page = json.loads(line)
        docs[page["id"]] = [p.strip() for p in page["text"].split("\n")]
    return docs


_DOC = re.compile(r'<doc id="(\d+)"[^>]*>\n(.*?)</doc>', re.S)


def wikiextractor_docs(data: bytes) -> Docs:
    """wikiextractor's <doc id=...> blocks; paragraphs = the block's lines (the title first), each stripped."""
    return {m.group(1): [p.strip() for p in m.group(2).split("\n")] for m in _DOC.finditer(data.decode("utf-8"))}


_STORY = re.compile(r'<REUTERS [^>]*NEWID="(\d+)">(.*?)</REUTERS>', re.S)


def reuters_docs(data: bytes) -> Docs:
    """Reuters-21578 SGML: each story's <BODY> without its &#N; control characters; a paragraph starts at an indented
    or blank line, its wrapped lines re-joined with single spaces, entities (&lt;) decoded (SOURCES.md: "wrapped
    lines re-joined")."""
    docs = {}
    for story in _STORY.finditer(data.decode("latin-1")):
        body = re.search(r"<BODY>(.*?)</BODY>", story.group(2), re.S)
        if not body:
            continue
        paragraphs, current = [], []
        for line in re.sub(r"&#\d+;", "", body.group(1)).split("\n"):
            if (line[:1] in (" ", "\t") or not line.strip()) and current:
                paragraphs.append(current)
                current = []
            if line.strip():
                current.append(line.strip())
        if current:
            paragraphs.append(current)
        docs[story.group(1)] = [html.unescape(" ".join(" ".join(p).split())) for p in paragraphs]
    return docs


_ITALIC = re.compile(r"(?<![\w_])_([^_]+?)_(?![\w_])")
_MARKER = re.compile(r"\[(?:p\.\d+|FN#\d+)\]|\{\d+\}")  # page markers [p.155], {12}; footnote anchors [FN#24]


def gutenberg_paragraphs(data: bytes) -> List[str]:
    """A Project Gutenberg e-text: blank-line-separated blocks, their hard-wrapped lines joined with single spaces,
    page markers removed, ``_italic_`` underscores removed where they wrap a phrase, spaces they leave collapsed
    (SOURCES.md: "hard-wrapped lines joined", "_italic_ underscores and {page} markers removed")."""
    blocks, current = [], []
    for line in data.decode("utf-8").lstrip("\ufeff").replace("\r\n", "\n").split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return [" ".join(_ITALIC.sub(r"\1", " ".join(_MARKER.sub("", " ".join(block)).split())).split())
            for block in blocks + [current] if block]


@dataclass(frozen=True)
class Source:
    repo: str  # owner/name@commit, or owner/name where each key names its commit (COMMIT:PATH)
    files: Tuple[str, ...]  # the origin files that hold the documents (none: the keys name them)
    docs: Callable[[bytes], Docs]


def _numbered(pattern: str, count: int, folders=("",)) -> Tuple[str, ...]:
    return tuple(pattern.format(folder=f, n=n) for f in folders for n in range(count))


SOURCES = {
    "wikinews": Source("jshepp27/countaBot@eac9439eff525f2f4c753983fe2a2973e22e2e7f",
                       _numbered("text/AA/wiki_{n:02d}", 41), wikinews_docs),
    "enwiki2015": Source("jason-feng/wikiVisual@1c0fac92f29f17c1603bfffbe864e0dfdff66897",
                         _numbered("text/{folder}/wiki_{n:02d}", 100, ("AA", "AB", "AC", "AD")), wikiextractor_docs),
    "enwiki2018": Source("Vibhas-hs-edu/WikiTasks@52b1f163137bc40b0f67cbf129d5dab4f6fd5901",
                         _numbered("text/AA/wiki_{n:02d}", 64), wikiextractor_docs),
    "reuters21578": Source("Arthur-sauvage/Reuter@d0a779dd9cc078074c4185f1cac45e5a840a124c",
                           _numbered("data/reut2-{n:03d}.sgm", 22), reuters_docs),
    "gutenberg": Source("RU-ECE/ECE451-Parallel", (), lambda data: {"": gutenberg_paragraphs(data)}),
}
ORIGINS = tuple(f"{s.repo}:{f}" for s in SOURCES.values() for f in s.files) + ("RU-ECE/ECE451-Parallel@*:data/**.txt",)


def read_recipe(text: str):
    """[(source, output path, [(key, items, recipe line number)])], each row checked for its shape."""
    plan, source = [], None
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[1]:
            raise ValueError(f"{RECIPE.name}:{n}: expected two tab-separated fields, found {line[:60]!r}")
        if fields[0] == "source":
            if fields[1] not in SOURCES:
                raise ValueError(f"{RECIPE.name}:{n}: unknown source {fields[1]!r}, expected one of {list(SOURCES)}")
            source = fields[1]
        elif fields[0] == "file":
            if source is None:
                raise ValueError(f"{RECIPE.name}:{n}: a file before any source line")
            plan.append((source, fields[1], []))
        elif not plan:
            raise ValueError(f"{RECIPE.name}:{n}: a document row before any file line")
        else:
            plan[-1][2].append((fields[0], fields[1], n))
    return plan


def _lines(paragraphs: List[str], items: str, where: str) -> List[str]:
    out = []
    for item in items.split(","):
        a, _, b = item.partition("-")
        if not (a.isdigit() and (b or a).isdigit() and int(a) <= int(b or a) < len(paragraphs)):
            raise ValueError(f"{where}: item {item!r} is not a paragraph or range of the document ({len(paragraphs)} "
                             f"paragraphs)")
        out += paragraphs[int(a):int(b or a) + 1]
    return out


def origin_of(source: str, key: str) -> Optional[str]:
    """The origin file of a Gutenberg book key (COMMIT:PATH); None for the other sources (their files are listed)."""
    return f"{SOURCES[source].repo}@{key}" if not SOURCES[source].files else None


def build(get, recipe_text: Optional[str] = None) -> Dict[str, bytes]:
    """{output path: bytes} following the recipe."""
    plan = read_recipe(recipe_text if recipe_text is not None else lzma.decompress(RECIPE.read_bytes()).decode())
    wanted: Dict[str, set] = {}
    for source, _, rows in plan:
        wanted.setdefault(source, set()).update(key for key, _, _ in rows)
    docs: Dict[Tuple[str, str], List[str]] = {}
    for source, keys in wanted.items():
        spec = SOURCES[source]
        if spec.files:  # parse every file, keep the documents the recipe names
            for name in spec.files:
                for key, paragraphs in spec.docs(get(f"{spec.repo}:{name}")).items():
                    if key in keys:
                        docs[(source, key)] = paragraphs
        else:
            for key in sorted(keys):
                docs[(source, key)] = spec.docs(get(origin_of(source, key)))[""]
    out = {}
    for source, path, rows in plan:
        lines = []
        for key, items, n in rows:
            if (source, key) not in docs:
                raise ValueError(f"{RECIPE.name}:{n}: document {key!r} is not in {source}'s origin files")
            lines += _lines(docs[(source, key)], items, f"{RECIPE.name}:{n}")
        out[path] = "".join(line + "\n" for line in lines).encode("utf-8")
    return out
