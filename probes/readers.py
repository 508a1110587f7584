"""Readers for the probes' data: the Raganato et al. (2017) unified WSD XML and its gold key files, and CoNLL-style
``token<TAB>tag`` POS files.

Bad input raises ``ElmoInputError`` with one line naming the file, the line, what was expected and what was found
(``python -m probes`` prints it as ``error: ...`` and exits 2).
"""
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from xml.parsers import expat

from elmo_module.errors import ElmoInputError

# lemma%ss_type:lex_filenum:lex_id:head_word:head_id (senseidx(5WN)); head_word/head_id only for ss_type 5
SENSE_KEY = re.compile(r"^[^%\s]+%[1-5]:\d\d:\d\d:[^:\s]*:(\d\d)?$")


@dataclass
class WsdToken:
    text: str  # surface form; a multiword expression keeps its spaces ("took place")
    lemma: str
    pos: str  # universal POS (NOUN, VERB, ADJ, ADV, ...)
    instance_id: Optional[str] = None  # set for <instance> tokens (the ones to disambiguate)


@dataclass
class WsdSentence:
    sentence_id: str
    tokens: List[WsdToken] = field(default_factory=list)

    def words(self) -> List[str]:
        """What the biLM reads: every token split at spaces (a multiword expression is several words)."""
        return [w for t in self.tokens for w in t.text.split()]

    def spans(self) -> List[Tuple[int, int]]:
        """[start, end) of each token's words in ``words()``."""
        spans, start = [], 0
        for t in self.tokens:
            n = len(t.text.split())
            spans.append((start, start + n))
            start += n
        return spans


def _open_text(path) -> bytes:
    path = Path(path)
    if not path.is_file():
        raise ElmoInputError(f"{path}: file does not exist")
    return path.read_bytes()


def _text_lines(path) -> List[str]:
    """The lines of a UTF-8 text file, a byte-order mark dropped (the task readers drop it too: it was read into the
    first token, '\ufeffThe'), split at \n, \r\n or \r as Python's text files are."""
    data = _open_text(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ElmoInputError(f"{path}: expected UTF-8 text, found invalid bytes at byte {e.start}") from None
    return io.StringIO(text, newline=None).read().split("\n") if text else []


def read_raganato_xml(path) -> List[WsdSentence]:
    """``corpus/text/sentence`` with ``<wf lemma pos>`` and ``<instance id lemma pos>`` tokens (Raganato 2017)."""
    path = Path(path)
    data = _open_text(path)
    parser = expat.ParserCreate("UTF-8")
    sentences: List[WsdSentence] = []
    state = {"token": None, "text": []}

    def fail(expected: str, found: str):
        raise ElmoInputError(f"{path}:{parser.CurrentLineNumber}: expected {expected}, found {found}")

    def start(name, attrs):
        if name == "sentence":
            if "id" not in attrs:
                fail("a <sentence> with an id attribute", "none")
            sentences.append(WsdSentence(attrs["id"]))
        elif name in ("wf", "instance"):
            if not sentences or state["token"] is not None:
                fail(f"<{name}> inside a <sentence>", f"<{name}> outside one")
            needed = ("id", "lemma", "pos") if name == "instance" else ("lemma", "pos")
            missing = [a for a in needed if not attrs.get(a)]
            if missing:
                fail(f"<{name}> with attribute(s) {', '.join(needed)}", f"none for {', '.join(missing)}")
            state["token"] = WsdToken("", attrs["lemma"], attrs["pos"], attrs.get("id") if name == "instance" else None)
            state["text"] = []
        elif name not in ("corpus", "text"):
            fail("<corpus>, <text>, <sentence>, <wf> or <instance>", f"<{name}>")

    def end(name):
        if name in ("wf", "instance"):
            token = state["token"]
            token.text = " ".join("".join(state["text"]).split())
            if not token.text:
                fail(f"a word inside <{name}>", "an empty element")
            sentences[-1].tokens.append(token)
            state["token"] = None

    def chars(text):
        if state["token"] is not None:
            state["text"].append(text)

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ElmoInputError(f"{path}:{e.lineno}: expected well-formed XML, found {expat.ErrorString(e.code)}") \
            from None
    if not sentences:
        raise ElmoInputError(f"{path}: expected <sentence> elements, found none")
    return sentences


def read_key_file(path, check_keys: bool = True) -> Dict[str, List[str]]:
    """``id key1 [key2 ...]`` per line (the framework's gold and answer format) -> id -> keys in file order."""
    path = Path(path)
    keys: Dict[str, List[str]] = {}
    lines = _text_lines(path)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) < 2:
            raise ElmoInputError(f"{path}:{number}: expected 'id key [key ...]', found {line.strip()!r}")
        if parts[0] in keys:
            raise ElmoInputError(f"{path}:{number}: expected each id once, found {parts[0]!r} again")
        bad = [k for k in parts[1:] if check_keys and not SENSE_KEY.match(k)]
        if bad:
            raise ElmoInputError(f"{path}:{number}: expected WordNet sense keys "
                                 f"(lemma%ss_type:lex_filenum:lex_id:head_word:head_id), found {bad[0]!r}")
        keys[parts[0]] = parts[1:]
    if not keys:
        raise ElmoInputError(f"{path}: expected 'id key [key ...]' lines, found none")
    return keys


def gold_key_path(xml_path) -> Path:
    """The framework's layout: ``<name>.data.xml`` beside ``<name>.gold.key.txt``."""
    xml_path = Path(xml_path)
    if not xml_path.name.endswith(".data.xml"):
        raise ElmoInputError(f"{xml_path}: expected a file named <name>.data.xml (Raganato layout), found "
                             f"{xml_path.name!r}")
    return xml_path.with_name(xml_path.name[:-len(".data.xml")] + ".gold.key.txt")


def read_wsd_set(xml_path) -> Tuple[List[WsdSentence], Dict[str, List[str]]]:
    """An XML file and its gold keys, checked against each other (every instance has keys, every key an instance)."""
    sentences = read_raganato_xml(xml_path)
    key_path = gold_key_path(xml_path)
    keys = read_key_file(key_path)
    ids = [t.instance_id for s in sentences for t in s.tokens if t.instance_id]
    seen = set()
    for instance_id in ids:
        if instance_id in seen:
            raise ElmoInputError(f"{xml_path}: expected unique instance ids, found {instance_id!r} twice")
        seen.add(instance_id)
        if instance_id not in keys:
            raise ElmoInputError(f"{key_path}: expected a line for instance {instance_id!r} of {xml_path}, found none")
    extra = [k for k in keys if k not in seen]
    if extra:
        raise ElmoInputError(f"{key_path}: expected only instances of {xml_path}, found {extra[0]!r} "
                             f"(and {len(extra) - 1} more)")
    return sentences, keys


def read_tagged(path) -> List[List[Tuple[str, str]]]:
    """CoNLL-style POS file: ``token<TAB>tag`` (or space-separated) per line, a blank line between sentences."""
    path = Path(path)
    lines = _text_lines(path)
    sentences, current = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise ElmoInputError(f"{path}:{number}: expected 'token<TAB>tag', found {line!r}")
        current.append((parts[0].strip(), parts[1].strip()))
    if current:
        sentences.append(current)
    if not sentences:
        raise ElmoInputError(f"{path}: expected 'token<TAB>tag' lines, found none")
    return sentences
