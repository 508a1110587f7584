"""Each dataset of the small and probes_small profiles, made from its public origin (runner/data/fetch.py fetches and
checks).

A dataset is a folder under DATA_DIR (a *unit*: ``wsd/semcor`` and ``wsd/eval`` are two). Its ``origins`` are
``owner/repo@commit:path`` (a file of a public GitHub repository at a pinned commit) or a URL with the sha256 of its
bytes; its ``convert(get)`` reads them with ``get(origin) -> bytes`` and returns ``{path under DATA_DIR: bytes}``.
The rules are those of ../shared/data's README.md, MANIFEST.tsv and SOURCES.md files; runner/data/manifest.tsv holds
the sha256 each output must have. A dataset whose conversion is not written here has ``convert = None`` and ``why``.
"""
import io
import json
import re
import tarfile
import zipfile
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from runner.data import lm_corpus as data_lmcorpus

Get = Callable[[str], bytes]


@dataclass(frozen=True)
class Dataset:
    unit: str  # the folder under DATA_DIR
    licence: str  # printed once per fetch: the licence stays the origin's
    origins: Tuple[str, ...]
    convert: Optional[Callable[[Get], Dict[str, bytes]]]
    why: str = ""  # for convert None: why there is no conversion here yet


# origin -> the path under DATA_DIR it is copied to unchanged: the manifest's bytes and sha256 of that path are the
# origin's own, which runner/data/fetch.py checks each download of it against as it arrives
UNCHANGED: Dict[str, str] = {}


def _copy(unit: str, pairs) -> Callable[[Get], Dict[str, bytes]]:
    """Files used unchanged: (origin, name under the unit)."""
    UNCHANGED.update((origin, f"{unit}/{name}") for origin, name in pairs)
    return lambda get: {f"{unit}/{name}": get(origin) for origin, name in pairs}


# ---------------------------------------------------------------- CoNLL-2003, SST, the Raganato WSD sets: unchanged

CONLL = "suryasumukh/conll-ner@18d3e43a09247adaa9ec088485a087d5ffa758a6:data/"
CONLL_FILES = [(CONLL + f, f) for f in ("eng.train", "eng.testa", "eng.testb")]

SST = "TranVuDucHuy/BERT-SimCSE-SMART@f3ae1ba37209072661aa7ca92ab2ba5a3dc77849:data/trees/"
# train.txt from another copy: the one above has a 2-byte corruption ('R  ock') on its line 1 (MANIFEST.tsv)
SST_FILES = [("iron-fe/rntn_on_Spark@c42e0605cdc05ea9526ae4d93ade1d6ced1a562e:trees/train副本.txt", "train.txt"),
             (SST + "dev.txt", "dev.txt"), (SST + "test.txt", "test.txt")]

RAGANATO = "HSLCY/GlossBERT@64d282d5bae75064fc1a0b35fae8b250538411ec:Evaluation_Datasets/"
WSD_SETS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")
WSD_EVAL_FILES = [(f"{RAGANATO}{s}/{s}.{ext}", f"{s}/{s}.{ext}") for s in WSD_SETS
                  for ext in ("data.xml", "gold.key.txt")] + [(RAGANATO + "README", "README.raganato")]


# ---------------------------------------------------------------- SNLI: e-SNLI's tokenized dev/test as jsonl

ESNLI = "OanaMariaCamburu/e-SNLI@7b585a3f077fdea899780eb0473940522ae44a2e:dataset/eSNLI/"
SNLI_ORIGINS = tuple(f"{ESNLI}{part}.{split}" for split in ("dev", "test") for part in ("s1", "s2", "labels"))


def snli_pairs(get: Get, split: str):
    """(gold label, premise, hypothesis) of e-SNLI's line-aligned s1/s2/labels files (SNLI 1.0's gold-labelled pairs,
    tokenized; a trailing space on each sentence dropped)."""
    s1, s2, labels = (get(f"{ESNLI}{part}.{split}").decode("utf-8").splitlines() for part in ("s1", "s2", "labels"))
    if not len(s1) == len(s2) == len(labels):
        raise ValueError(f"{ESNLI}{{s1,s2,labels}}.{split}: {len(s1)}, {len(s2)}, {len(labels)} lines, expected equal")
    return [(g.strip(), a.strip(), b.strip()) for g, a, b in zip(labels, s1, s2) if g.strip()]


def _jsonl(pairs, prefix: str) -> bytes:
    # the official SNLI jsonl field names (sentence1, sentence2, gold_label); pairIDs made up: prefix + index
    return "".join(json.dumps({"gold_label": g, "sentence1": a, "sentence2": b, "pairID": f"{prefix}{i}"}) + "\n"
                   for i, (g, a, b) in enumerate(pairs)).encode("utf-8")


def convert_snli(get: Get) -> Dict[str, bytes]:
    """train = all SNLI dev pairs; dev / test = the SNLI test pairs split by premise, the first half of the distinct
    premises (in file order, rounded down) -> dev (data/README.md: snli_small)."""
    test = snli_pairs(get, "test")
    premises = list(dict.fromkeys(p for _, p, _ in test))
    first = set(premises[:len(premises) // 2])
    return {"snli_small/train.jsonl": _jsonl(snli_pairs(get, "dev"), "dev-"),
            "snli_small/dev.jsonl": _jsonl([t for t in test if t[1] in first], "test-a-"),
            "snli_small/test.jsonl": _jsonl([t for t in test if t[1] not in first], "test-b-")}


# ---------------------------------------------------------------- SQuAD 1.1: the official dev set split by article

SQUAD = "rajpurkar/SQuAD-explorer@eee5fdbf62f8613a7812b03419e6b29617b74fd1:dataset/dev-v1.1.json"
SQUAD_SPLITS = (("train", 0, 32), ("dev", 32, 40), ("test", 40, 48))  # articles in file order


def convert_squad(get: Get) -> Dict[str, bytes]:
    """The 48 articles of dev-v1.1.json: 1-32 train, 33-40 dev, 41-48 test; layout unchanged (json.dumps with its
    defaults, as the official file is written: the three outputs merged give its git blob e9a3f913 back)."""
    data = json.loads(get(SQUAD))
    if len(data["data"]) != 48:
        raise ValueError(f"{SQUAD}: {len(data['data'])} articles, expected 48")
    return {f"squad_small/{name}.json": json.dumps({"data": data["data"][a:b], "version": data["version"]}).encode()
            for name, a, b in SQUAD_SPLITS}


# ---------------------------------------------------------------- WordNet 3.0: Debian's wordnet-base package

WORDNET_DEB = ("http://deb.debian.org/debian/pool/main/w/wordnet/wordnet-base_3.0-37_all.deb"
               "#sha256=61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752")


def deb_files(deb: bytes) -> Dict[str, bytes]:
    """The files of a .deb (an ar archive holding data.tar.xz/gz/zst; xz and gz read here), by path."""
    if deb[:8] != b"!<arch>\n":
        raise ValueError("not a .deb (ar) archive")
    at, members = 8, {}
    while at + 60 <= len(deb):
        header = deb[at:at + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
        members[name], at = deb[at + 60:at + 60 + size], at + 60 + size + (size & 1)
    data = next(v for k, v in members.items() if k.startswith("data.tar"))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.lstrip("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def convert_wordnet(get: Get) -> Dict[str, bytes]:
    """usr/share/wordnet/* -> wordnet3.0/dict/, the package's copyright file -> wordnet3.0/COPYRIGHT."""
    files = deb_files(get(WORDNET_DEB))
    out = {f"wordnet3.0/dict/{p.rsplit('/', 1)[1]}": b for p, b in files.items() if p.startswith("usr/share/wordnet/")}
    out["wordnet3.0/COPYRIGHT"] = files["usr/share/doc/wordnet-base/copyright"]
    return out


# ---------------------------------------------------------------- POS: NLTK's 10 % WSJ sample, gold tags of the trees

TREEBANK = "nltk/nltk_data@5db857e6f7df11eabb5e5665836db9ec8df07e28:packages/corpora/treebank.zip"
POS_SPLITS = (("train", 1, 159), ("dev", 160, 179), ("test", 180, 199))  # wsj_NNNN document numbers
_BRACKET = re.compile(r"\(|\)|[^\s()]+")


def tagged_sentences(mrg: str):
    """[(word, tag)] per top-level tree of a .mrg file: its preterminals ``(TAG word)`` in order, -NONE- dropped."""
    sentences, words, depth, tokens = [], [], 0, _BRACKET.findall(mrg)
    for i, tok in enumerate(tokens):
        if tok == "(":
            depth += 1
            if i + 3 < len(tokens) and tokens[i + 1] not in "()" and tokens[i + 2] not in "()" \
                    and tokens[i + 3] == ")" and tokens[i + 1] != "-NONE-":
                words.append((tokens[i + 2], tokens[i + 1]))
        elif tok == ")":
            depth -= 1
            if depth == 0 and words:
                sentences.append(words)
                words = []
    return sentences


def convert_pos(get: Get) -> Dict[str, bytes]:
    """token<TAB>tag, a blank line after each sentence, from treebank/combined/wsj_0001.mrg..wsj_0199.mrg
    (pos_wsj_sample/README.md): train 0001-0159, dev 0160-0179, test 0180-0199."""
    with zipfile.ZipFile(io.BytesIO(get(TREEBANK))) as z:
        out = {}
        for name, first, last in POS_SPLITS:
            text = []
            for n in range(first, last + 1):
                for sentence in tagged_sentences(z.read(f"treebank/combined/wsj_{n:04d}.mrg").decode("utf-8")):
                    text += [f"{w}\t{t}\n" for w, t in sentence] + ["\n"]
            out[f"pos_wsj_sample/{name}.txt"] = "".join(text).encode("utf-8")
    return out


# ---------------------------------------------------------------- LitBank: CoNLL-2012 v4 columns, fold 0 with one swap

LITBANK = "dbamman/litbank@3e50db0ffc033d7ccbb94f4d88f6b99210328ed8:coref/conll/"
FOLDS = "dbamman/lrec2020-coref@e30de53743d36d1ea2c9e7292c69477fa332713c:data/litbank_tenfold_splits/0/"
# litbank_coref/SOURCES.md (Split): 1155 The Secret Adversary is in the biLM's pretraining text, so it leaves fold
# 0's test for train, and the train document nearest to it in size, 5348 Ragged Dick, takes its place
LITBANK_SWAP = {"1155": "train", "5348": "test"}  # document -> the split it moves to


def litbank_conll(text: str) -> str:
    """LitBank's 13 tab-separated columns -> CoNLL-2012 v4 ones: id lit/litbank/00/<Gutenberg number>, part, word
    number and word verbatim, POS XX, parse bit *, lemma/frameset/sense/speaker -, entities *, coreference (- for an
    empty cell); sentence breaks kept (litbank_coref/SOURCES.md, Conversion)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#begin document ("):
            doc = "lit/litbank/00/" + line[len("#begin document ("):].split("_", 1)[0]
            out.append(f"#begin document ({doc}); part 000")
        elif line.startswith("#end document") or not line:
            out.append(line)
        else:
            cells = line.split("\t")
            if len(cells) != 13:
                raise ValueError(f"LitBank line {n}: {len(cells)} tab-separated columns, expected 13")
            out.append(" ".join([doc, *cells[1:4], "XX", "*", "-", "-", "-", "-", "*", cells[12] or "-"]))
    return "\n".join(out) + "\n"


def convert_litbank(get: Get) -> Dict[str, bytes]:
    """The 100 LitBank documents in fold 0's train / dev / test (lrec2020-coref's split files), with the swap above."""
    out = {}
    for split in ("train", "dev", "test"):
        for name in get(f"{FOLDS}{split}.ids").decode().split():
            stem = name.rsplit(".", 1)[0]
            number = stem.split("_", 1)[0]
            split_here = LITBANK_SWAP.get(number, split)
            target = f"litbank_coref/{split_here}/data/english/annotations/lit/litbank/00/{number}.v4_gold_conll"
            out[target] = litbank_conll(get(f"{LITBANK}{stem}.conll").decode("utf-8")).encode("utf-8")
    return out


# ---------------------------------------------------------------- SRL: unified PropBank skeletons + the WSJ sample's
# words

PROPBANK = "propbank/propbank-release@4abade0b53ce4a181e1d98b3518101c1a44d395a:data/ontonotes/nw/wsj/"
SRL_SPLITS = (("train", 1, 111), ("dev", 112, 140), ("test", 141, 199))  # srl_propbank_wsj/SOURCES.md (Files)
_SEPARATORS = re.compile(r"-|\\/|%")


def _segmentations(word: str):
    """(pieces, cuts, distance of the cuts from the word's end) for each way of cutting ``word`` at its `-`, `\\/`
    and `%` (a cut makes the separator a piece of its own, as OntoNotes tokenizes `York-based`, `62%-owned`)."""
    spots = [m.span() for m in _SEPARATORS.finditer(word)][:6]
    for mask in range(1 << len(spots)):
        pieces, at, distance = [], 0, 0
        for k, (a, b) in enumerate(spots):
            if mask >> k & 1:
                pieces += [word[at:a], word[a:b]]
                at, distance = b, distance + len(word) - b
        pieces = [p for p in pieces + [word[at:]] if p]
        yield pieces, bin(mask).count("1"), distance


def align_words(words, tags, skeleton_tags):
    """The tree's words cut to line up one to one with the skeleton's tokens (srl_propbank_wsj/SOURCES.md,
    Conversion): a dynamic programme over (words used, tokens used) minimising, in order, the cuts, the uncut words
    whose tag differs from the skeleton's, and the cuts' distance from their word's end."""
    n = len(skeleton_tags)
    best = {(0, 0): ((0, 0, 0), [])}
    for i, (word, tag) in enumerate(zip(words, tags)):
        nxt = {}
        for (_, j), (cost, pieces_so_far) in best.items():
            for pieces, cuts, distance in _segmentations(word):
                span = skeleton_tags[j:j + len(pieces)]
                if len(span) < len(pieces):
                    continue
                ok = all((t in ("HYPH", "SYM", ":", "CC", ",")) if p in ("-", "\\/") and cuts else t != "HYPH"
                         or p == word for p, t in zip(pieces, span))
                if not ok:
                    continue
                c = (cost[0] + cuts, cost[1] + (not cuts and tag != span[0]), cost[2] + distance)
                key = (i + 1, j + len(pieces))
                if key not in nxt or c < nxt[key][0]:
                    nxt[key] = (c, pieces_so_far + pieces)
        best = nxt
    if (len(words), n) not in best:
        raise ValueError(f"the words {' '.join(words)[:60]}... do not line up with {n} skeleton tokens")
    return best[(len(words), n)][1]


def srl_document(skeleton: str, mrg: str) -> str:
    """One .gold_skel with the words of the same document's tree: CoNLL-2012 columns, part 0, the roleset split at
    its last dot into columns 7-8, word sense and speaker -, entities *, the argument columns, coreference -."""
    sentences = [block.splitlines() for block in skeleton.strip("\n").split("\n\n")]
    trees = tagged_sentences(mrg)
    if len(trees) != len(sentences):
        raise ValueError(f"{len(sentences)} skeleton sentences, {len(trees)} trees, expected equal")
    doc = sentences[0][0].split()[0].replace("ontonotes/", "", 1)
    out = [f"#begin document ({doc}); part 000"]
    for rows, tree in zip(sentences, trees):
        cells = [row.split() for row in rows]
        words = align_words([w for w, _ in tree], [t for _, t in tree], [c[4] for c in cells])
        for c, word in zip(cells, words):
            roleset = c[7].rsplit(".", 1) if c[7] != "-" else ["-", "-"]
            out.append(" ".join([doc, "0", c[2], word, c[4], c[5], *roleset, "-", "-", "*", *c[8:], "-"]))
        out.append("")
    return "\n".join(out + ["#end document"]) + "\n"


def _numbers(ranges: str):
    return [n for part in ranges.split(",") for a, _, b in [part.partition("-")]
            for n in range(int(a), int(b or a) + 1)]


# The sample documents the release lacks, the PropBank-1 files OntoNotes left out (srl_propbank_wsj/SOURCES.md,
# Conversion; propbank-documentation other-documentation/missing-from-ontonotes.txt)
SRL_ABSENT = set(_numbers("6,13,15,18,26,27,32,48,57,63,67,68,73,80,106,109,118,122,124,125,127,132,135,136,137,144,"
                          "149-153,157-162,165-169,171-173,175-179,184,187-189,194"))


def convert_srl(get: Get) -> Dict[str, bytes]:
    """The 144 sample documents of wsj_0001-0199 that the release annotates, split by document number."""
    with zipfile.ZipFile(io.BytesIO(get(TREEBANK))) as z:
        out = {}
        for split, first, last in SRL_SPLITS:
            for n in (n for n in range(first, last + 1) if n not in SRL_ABSENT):
                folder, name = f"{n // 100:02d}", f"wsj_{n:04d}"
                skeleton = get(f"{PROPBANK}{folder}/{name}.gold_skel").decode("utf-8")
                try:
                    document = srl_document(skeleton, z.read(f"treebank/combined/{name}.mrg").decode("utf-8"))
                except ValueError as e:
                    raise ValueError(f"{PROPBANK}{folder}/{name}.gold_skel: {e}") from None
                out[f"srl_propbank_wsj/{split}/data/english/annotations/nw/wsj/{folder}/{name}.gold_conll"] = \
                    document.encode("utf-8")
    return out


# ---------------------------------------------------------------- SemCor 3.0 (NAF) to the Raganato et al. (2017) XML

WSD_CORPORA = "rubenIzquierdo/wsd_corpora@c31b9b8eb6d6ca726b6868f19123aaf7e5eb1d88:semcor3.0/"
SEMCOR_FILES = {  # the 352 NAF files, br-XNN.naf, in the order of the texts' ids d000-d351 (wsd/README.md)
    "brown1": "a01 a02 a11 a12 a13 a14 a15 b13 b20 c01 c02 c04 d01 d02 d03 d04 e01 e02 e04 e21 e24 e29 f03 f10 f19 f43 "
              "g01 g11 g15 h01 j01 j02 j03 j04 j05 j06 j07 j08 j09 j10 j11 j12 j13 j14 j15 j16 j17 j18 j19 j20 j22 j23 "
              "j37 j52 j53 j54 j55 j56 j57 j58 j59 j60 j70 k01 k02 k03 k04 k05 k06 k07 k08 k09 k10 k11 k12 k13 k14 k15 "
              "k16 k17 k18 k19 k20 k21 k22 k23 k24 k25 k26 k27 k28 k29 l11 l12 m01 m02 n05 p01 r05 r06 r07 r08 r09",
    "brown2": "e22 e23 e25 e26 e27 e28 e30 e31 f08 f13 f14 f15 f16 f17 f18 f20 f21 f22 f23 f24 f25 f33 f44 g12 g14 g16 "
              "g17 g18 g19 g20 g21 g22 g23 g28 g31 g39 g43 g44 h09 h11 h12 h13 h14 h15 h16 h17 h18 h21 h24 j29 j30 j31 "
              "j32 j33 j34 j35 j38 j41 j42 l08 l09 l10 l13 l14 l15 l16 l17 l18 n09 n10 n11 n12 n14 n15 n16 n17 n20 p07 "
              "p09 p10 p12 p24 r04",
    "brownv": "a03 a04 a05 a06 a07 a08 a09 a10 a16 a17 a18 a19 a20 a21 a22 a23 a24 a25 a26 a27 a28 a29 a30 a31 a32 a33 "
              "a34 a35 a36 a37 a38 a39 a40 a41 a42 a43 a44 b01 b02 b03 b04 b05 b06 b07 b08 b09 b10 b11 b12 b14 b15 b16 "
              "b17 b18 b19 b21 b22 b23 b24 b25 b26 b27 c03 c05 c06 c07 c08 c09 c10 c11 c12 c13 c14 c15 c16 c17 d05 d06 "
              "d07 d08 d09 d10 d11 d12 d13 d14 d15 d16 d17 e03 e05 e06 e07 e08 e09 e10 e11 e12 e13 e14 e15 e16 e17 e18 "
              "e19 e20 f01 f02 f04 f05 f06 f07 f09 f11 f12 g02 g03 g04 g05 g06 g07 g08 g09 g10 g13 h02 h03 h04 h05 h06 "
              "h07 h08 h10 j21 j24 j25 j26 j27 j28 l01 l02 l03 l04 l05 l06 l07 m03 m04 m05 m06 n01 n02 n03 n04 n06 n07 "
              "n08 p02 p03 p04 p05 p06 p08 r01 r02 r03",
}
# wsd/README.md: the Petrov et al. universal tags that Raganato's files follow, with SemCor's odd tags
UNIVERSAL = {**dict.fromkeys(("NN", "NNS", "NNP", "NNPS", "NP", "NPS"), "NOUN"), "MD": "VERB",
             **dict.fromkeys(("JJ", "JJR", "JJS"), "ADJ"), **dict.fromkeys(("RB", "RBR", "RBS", "WRB"), "ADV"),
             **dict.fromkeys(("DT", "PDT", "EX", "WDT"), "DET"), "IN": "ADP",
             **dict.fromkeys(("PRP", "PRP$", "WP", "WP$", "PP", "PR"), "PRON"), "CC": "CONJ",
             **dict.fromkeys(("TO", "RP", "POS"), "PRT"), "CD": "NUM", **dict.fromkeys(("FW", "LS", "UH", "SYM"), "X")}
_SS_TYPE = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}
_MARKER = re.compile(r"\([a-z]+\)(?=:)")  # an adjective marker on a satellite's head word: preceding(a), out(p)


def wordnet_sense_keys(files: Dict[str, bytes]) -> set:
    """Every WordNet 3.0 sense key, rebuilt from the data.* files (Debian's package has no index.sense):
    lemma%ss_type:lex_filenum:lex_id:head_word:head_id, a satellite's head being the first word of the synset its
    similar-to (&) pointer names (WordNet's senseidx(5WN))."""
    synsets = {}
    for pos in ("noun", "verb", "adj", "adv"):
        for line in files[f"usr/share/wordnet/data.{pos}"].decode("latin-1").splitlines():
            if line.startswith("  "):
                continue
            f = line.split(" ")
            n = int(f[3], 16)
            words = [(re.sub(r"\(.*\)$", "", f[4 + 2 * i]).lower(), int(f[5 + 2 * i], 16)) for i in range(n)]
            at = 4 + 2 * n
            pointers = [(f[at + 1 + 4 * k], f[at + 2 + 4 * k]) for k in range(int(f[at]))]
            synsets[(pos, f[0])] = (f[1], f[2], words, pointers)
    keys = set()
    for (_pos, _), (lex_filenum, ss_type, words, pointers) in synsets.items():
        head = ":"
        if ss_type == "s":
            head_words = next(synsets[("adj", off)][2] for sym, off in pointers if sym == "&")
            head = f"{head_words[0][0]}:{head_words[0][1]:02d}"
        keys.update(f"{w}%{_SS_TYPE[ss_type]}:{lex_filenum}:{i:02d}:{head}" for w, i in words)
    return keys


def _xml(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&apos;"))


def _naf(naf: bytes):
    """(word id, token, sentence) of each <wf>, and word id -> (NAF term id, lemma, PTB tag, [sense numbers],
    [lexical keys]) of the terms (one word each in SemCor's NAF)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(naf)
    words = [(w.get("id"), w.text, w.get("sent")) for w in root.iter("wf")]
    terms = {}
    for t in root.iter("term"):
        refs = [(r.get("reftype"), r.get("reference")) for r in t.iter("externalRef")]
        target = t.find("span/target").get("id")
        terms[target] = (t.get("id"), t.get("lemma"), t.get("pos"), [v for k, v in refs if k == "sense_number"],
                         [v for k, v in refs if k == "lexical_key"])
    return words, terms


def convert_semcor(get: Get) -> Dict[str, bytes]:
    """wsd/README.md, SemCor conversion rules: texts d000-d351 in SEMCOR_FILES order, sentences by the NAF's sent
    attribute, a token an <instance> when its lexical keys give at least one WordNet 3.0 sense key; the keys that do
    not, listed in semcor.dropped.tsv."""
    valid = wordnet_sense_keys(deb_files(get(WORDNET_DEB)))
    xml = ['<?xml version="1.0" encoding="UTF-8" ?>', '<corpus lang="en" source="semcor">']
    gold, docs, dropped = [], ["# text_id\tNAF file (semcor3.0/...)"], [
        "# SemCor 3.0 NAF sense annotations NOT kept in semcor.gold.key.txt: lemma%key is not a WordNet 3.0 sense key",
        "# sentence_id\ttoken_index_in_sentence\tnaf_doc\tnaf_term\tword\tlemma\tnaf_sense_number\tnaf_lexical_key"
        "\tdropped_key\tstatus"]
    names = [(sub, f"br-{code}") for sub, codes in SEMCOR_FILES.items() for code in codes.split()]
    for d, (sub, name) in enumerate(names):
        words, terms = _naf(get(f"{WSD_CORPORA}{sub}/{name}.naf"))
        docs.append(f"d{d:03d}\t{sub}/{name}.naf")
        xml.append(f'<text id="d{d:03d}" source="{name}">')
        s, previous = -1, None
        for wid, token, sent in words:
            if sent != previous:
                if previous is not None:
                    xml.append("</sentence>")
                s, previous, index, instances = s + 1, sent, 0, 0
                xml.append(f'<sentence id="d{d:03d}.s{s:03d}">')
            surface = "to" if token == "_to" else token.replace("_", " ")
            if wid in terms:
                tid, lemma, tag, senses, lexical = terms[wid]
                lemma = "to" if lemma == "_to" else lemma  # the one stray token, as its surface form
                pos = UNIVERSAL.get(tag.split("|")[0], "VERB" if tag.startswith("VB") else tag)
                keys, bad = [], []
                for ref in lexical:
                    for part in ref.split(";"):
                        key = lemma + "%" + _MARKER.sub("", part)
                        (keys if key in valid else bad).append(key)
                sid = f"d{d:03d}.s{s:03d}"
                for key in bad:
                    dropped.append("\t".join([sid, str(index), name, tid, token, lemma, ";".join(senses),
                                              ";".join(lexical), key,
                                              "key_dropped_other_key_kept" if keys else "instance_dropped"]))
            else:
                # no term: SemCor's <punc>, lemma the token, POS "." but NOUN for its 10 abbreviations (av., rd.)
                lemma, pos, keys = token, "NOUN" if re.search(r"[a-z]", token) else ".", []
            if keys:
                iid = f"d{d:03d}.s{s:03d}.t{instances:03d}"
                instances += 1
                gold.append(f"{iid} {' '.join(keys)}")
                xml.append(f'<instance id="{iid}" lemma="{_xml(lemma)}" pos="{pos}">{_xml(surface)}</instance>')
            else:
                xml.append(f'<wf lemma="{_xml(lemma)}" pos="{pos}">{_xml(surface)}</wf>')
            index += 1
        xml += ["</sentence>", "</text>"]
    xml.append("</corpus>")
    return {f"wsd/semcor/semcor.{name}": ("\n".join(lines) + "\n").encode("utf-8")
            for name, lines in (("data.xml", xml), ("gold.key.txt", gold), ("docs.tsv", docs),
                                ("dropped.tsv", dropped))}


# ---------------------------------------------------------------- the LM corpus: its recipe (runner/data/lm_corpus.py)

def convert_lm_corpus(get: Get) -> Dict[str, bytes]:
    """lm_corpus/*.txt and heldout/*: the documents and paragraphs runner/data/lm_corpus_recipe.tsv.xz names, in its
    order, from Wikinews, Wikipedia 2015 and 2018, Reuters-21578 and Project Gutenberg (lm_corpus/SOURCES.md)."""
    return data_lmcorpus.build(get)


# ---------------------------------------------------------------- the registry

_CC_BY_SA_4 = "CC BY-SA 4.0"
DATASETS = {d.unit: d for d in (
    Dataset("conll2003", "CoNLL-2003 English: the text is Reuters' (RCV1), for research use; see "
            "https://www.clips.uantwerpen.be/conll2003/ner/", tuple(o for o, _ in CONLL_FILES),
            _copy("conll2003", CONLL_FILES)),
    Dataset("sst_trees", "Stanford Sentiment Treebank (Socher et al. 2013): https://nlp.stanford.edu/sentiment/",
            tuple(o for o, _ in SST_FILES), _copy("sst_trees", SST_FILES)),
    Dataset("snli_small", f"SNLI 1.0 (Bowman et al. 2015), {_CC_BY_SA_4}", SNLI_ORIGINS, convert_snli),
    Dataset("squad_small", f"SQuAD 1.1 (Rajpurkar et al. 2016), {_CC_BY_SA_4}", (SQUAD,), convert_squad),
    Dataset("wsd/eval", "Raganato et al. (2017) WSD evaluation framework (its README states no licence; the "
            "underlying Senseval/SemEval data keep theirs)", tuple(o for o, _ in WSD_EVAL_FILES),
            _copy("wsd/eval", WSD_EVAL_FILES)),
    Dataset("wordnet3.0", "WordNet 3.0, Princeton WordNet licence: free use and redistribution with its notice "
            "(wordnet3.0/COPYRIGHT)", (WORDNET_DEB,), convert_wordnet),
    Dataset("pos_wsj_sample", "Penn Treebank WSJ sample, (C) LDC 1995, as distributed by NLTK: non-commercial use "
            "only", (TREEBANK,), convert_pos),
    Dataset("wsd/semcor", "SemCor 3.0, WordNet 3.0 licence (NAF version: Apache-2.0)",
            (WSD_CORPORA + "*/br-*.naf", WORDNET_DEB), convert_semcor),
    Dataset("srl_propbank_wsj", f"unified PropBank ({_CC_BY_SA_4}) on the Penn Treebank WSJ sample ((C) LDC 1995; "
            "NLTK: non-commercial use only)", (PROPBANK + "*/wsj_*.gold_skel", TREEBANK), convert_srl),
    Dataset("litbank_coref", "LitBank (Bamman et al. 2019, 2020), CC BY 4.0", (
        *(f"{FOLDS}{s}.ids" for s in ("train", "dev", "test")), LITBANK + "*.conll"), convert_litbank),
    Dataset("lm_corpus", "Wikinews CC BY 2.5; Wikipedia CC BY-SA 3.0; Reuters-21578 research use only; Project "
            "Gutenberg texts public domain in the USA", data_lmcorpus.ORIGINS, convert_lm_corpus),
)}
