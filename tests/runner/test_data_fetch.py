"""runner/data/fetch.py and runner/data/convert.py: each conversion on a small stand-in in its origin's format (written
here), the download step against a file server on 127.0.0.1, the sha256 check refusing a changed file, resuming, and the
profiles' DATA_DIR root that keeps the archived runs' ids. No network."""
import dataclasses
import functools
import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from runner.data import convert as data_convert
from runner.data import fetch as data
from tests.conftest import REPO_ROOT, shared_data


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _stand_in_manifest_and_profile(tmp_path, monkeypatch, made: dict, train_path: str):
    """A manifest of the stand-in files ``made`` (the fetch checks against it) and a profile reading one of them."""
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("".join(f"{rel}\t{len(b)}\t{_sha(b)}\tstand-in\n" for rel, b in made.items()))
    monkeypatch.setattr(data, "MANIFEST", manifest)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"tasks": ["snli"], "sweeps": ["table1"],
                                   "knobs": {"TRAIN_PATH": "${DATA_DIR}/" + train_path}}))
    return profile


# ---------------------------------------------------------------- conversions on stand-ins

ESNLI = {"s1.dev": "A man sleeps . \nA man sleeps . \n", "s2.dev": "He rests . \nHe runs . \n",
         "labels.dev": "entailment\ncontradiction\n",
         "s1.test": "P one . \nP one . \nP two . \nP three . \n", "s2.test": "h1 .\nh2 .\nh3 .\nh4 .\n",
         "labels.test": "neutral\nentailment\ncontradiction\nneutral\n"}


def _esnli_get(files=ESNLI):
    return lambda origin: files[origin.rsplit("/", 1)[1]].encode()


def test_snli_dev_becomes_train_and_test_is_split_by_premise():
    out = data_convert.convert_snli(_esnli_get())
    train = [json.loads(line) for line in out["snli_small/train.jsonl"].decode().splitlines()]
    assert train[0] == {"gold_label": "entailment", "sentence1": "A man sleeps .", "sentence2": "He rests .",
                        "pairID": "dev-0"}
    # the field order of the manifest's bytes
    assert list(train[0]) == ["gold_label", "sentence1", "sentence2", "pairID"]
    dev = [json.loads(line) for line in out["snli_small/dev.jsonl"].decode().splitlines()]
    test = [json.loads(line) for line in out["snli_small/test.jsonl"].decode().splitlines()]
    # 3 distinct premises: the first 3 // 2 = 1 goes to dev, with both its pairs
    assert [d["sentence2"] for d in dev] == ["h1 .", "h2 ."] and dev[1]["pairID"] == "test-a-1"
    assert [t["sentence2"] for t in test] == ["h3 .", "h4 ."] and test[0]["pairID"] == "test-b-0"


def test_snli_refuses_files_of_different_lengths():
    with pytest.raises(ValueError, match="expected equal"):
        data_convert.convert_snli(_esnli_get({**ESNLI, "labels.dev": "entailment\n"}))


def test_squad_is_split_by_article_in_file_order_and_refuses_another_count():
    articles = [{"title": f"t{i}", "paragraphs": [{"context": "é", "qas": []}]} for i in range(48)]
    original = json.dumps({"data": articles, "version": "1.1"}).encode()
    out = data_convert.convert_squad(lambda origin: original)
    assert [a["title"] for a in json.loads(out["squad_small/dev.json"])["data"]] == [f"t{i}" for i in range(32, 40)]
    merged = {"data": sum((json.loads(out[f"squad_small/{s}.json"])["data"] for s in ("train", "dev", "test")), []),
              "version": "1.1"}
    assert json.dumps(merged).encode() == original  # the layout is unchanged, byte for byte
    with pytest.raises(ValueError, match="47 articles, expected 48"):
        data_convert.convert_squad(lambda origin: json.dumps({"data": articles[:47], "version": "1.1"}).encode())


MRG = """
( (S (NP-SBJ (NNP Pierre) (NNP Vinken) )
    (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1) )))
    (. .) ))
( (S (NP-SBJ (-LRB- -LRB-) (CD 1\\/2) (-RRB- -RRB-) ) (. .) ))
"""


def test_pos_takes_the_preterminals_of_each_tree_without_traces():
    assert data_convert.tagged_sentences(MRG) == [
        [("Pierre", "NNP"), ("Vinken", "NNP"), ("said", "VBD"), (".", ".")],
        [("-LRB-", "-LRB-"), ("1\\/2", "CD"), ("-RRB-", "-RRB-"), (".", ".")]]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for n in range(1, 200):
            z.writestr(f"treebank/combined/wsj_{n:04d}.mrg", MRG if n in (1, 160) else "")
    out = data_convert.convert_pos(lambda origin: buffer.getvalue())
    assert out["pos_wsj_sample/train.txt"].decode().startswith("Pierre\tNNP\nVinken\tNNP\nsaid\tVBD\n.\t.\n\n-LRB-")
    assert out["pos_wsj_sample/dev.txt"] != b"" and out["pos_wsj_sample/test.txt"] == b""


def _deb(files: dict) -> bytes:
    """A .deb as dpkg-deb writes one: an ar archive of debian-binary, control.tar.xz and data.tar.xz."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:xz") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    out = b"!<arch>\n"
    for name, body in (("debian-binary", b"2.0\n"), ("control.tar.xz", b"x"), ("data.tar.xz", tar_bytes.getvalue())):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode() + body + (b"\n" if len(body) % 2
                                                                                                else b"")
    return out


def test_wordnet_comes_out_of_the_debian_package():
    deb = _deb({"usr/share/wordnet/index.noun": b"noun index\n", "usr/share/wordnet/data.verb": b"verbs\n",
                "usr/share/doc/wordnet-base/copyright": b"WordNet Release 3.0\n", "usr/share/man/x.5": b"man"})
    out = data_convert.convert_wordnet(lambda origin: deb)
    assert out == {"wordnet3.0/dict/index.noun": b"noun index\n", "wordnet3.0/dict/data.verb": b"verbs\n",
                   "wordnet3.0/COPYRIGHT": b"WordNet Release 3.0\n"}


def test_litbank_columns_become_conll_2012_and_fold_0_swaps_1155_for_5348():
    conll = ("#begin document (1155_the_secret_adversary_brat); part 0\n"
             "1155_the_secret_adversary_brat\t0\t0\tTommy\t_\t_\t_\t_\t_\t_\t_\t_\t(3\n"
             "1155_the_secret_adversary_brat\t0\t1\tsaid\t_\t_\t_\t_\t_\t_\t_\t_\t3)|(4)\n"
             "1155_the_secret_adversary_brat\t0\t2\t.\t_\t_\t_\t_\t_\t_\t_\t_\t\n\n#end document\n")
    assert data_convert.litbank_conll(conll) == (
        "#begin document (lit/litbank/00/1155); part 000\n"
        "lit/litbank/00/1155 0 0 Tommy XX * - - - - * (3\nlit/litbank/00/1155 0 1 said XX * - - - - * 3)|(4)\n"
        "lit/litbank/00/1155 0 2 . XX * - - - - * -\n\n#end document\n")
    ids = {"train.ids": "5348_ragged_dick_brat.tsv\n77_seven_gables_brat.tsv\n", "dev.ids": "158_emma_brat.tsv\n",
           "test.ids": "1155_the_secret_adversary_brat.tsv\n"}
    out = data_convert.convert_litbank(
        lambda origin: (ids.get(origin.rsplit("/", 1)[1]) or conll.replace("1155_the_secret_adversary",
                                                                           origin.rsplit("/", 1)[1][:-6])).encode())
    assert sorted(k.split("/")[1] + ":" + k.rsplit("/", 1)[1] for k in out) == [
        "dev:158.v4_gold_conll", "test:5348.v4_gold_conll", "train:1155.v4_gold_conll", "train:77.v4_gold_conll"]
    with pytest.raises(ValueError, match="LitBank line 2: 4 tab-separated columns, expected 13"):
        data_convert.litbank_conll("#begin document (1_x); part 0\n1_x\t0\t0\tword\n")


SKELETON = """ontonotes/nw/wsj/00/wsj_0001    0   0   [WORD]   NNP    (TOP(S(NP(NML*   -        -      (ARG0*
ontonotes/nw/wsj/00/wsj_0001    0   1   [WORD]  HYPH                *   -        -           *
ontonotes/nw/wsj/00/wsj_0001    0   2   [WORD]   VBN               *)   -        -           *
ontonotes/nw/wsj/00/wsj_0001    0   3   [WORD]   NNS               *)   -        -           *)
ontonotes/nw/wsj/00/wsj_0001    0   4   [WORD]   VBD             (VP*  rise   rise.01     (V*)
ontonotes/nw/wsj/00/wsj_0001    0   5   [WORD]     .              *))   -        -           *

"""
SRL_MRG = "( (S (NP-SBJ (JJ York-based) (NNS firms) ) (VP (VBD rose) (NP (-NONE- *-1) )) (. .) ))\n"


def test_srl_cuts_the_tree_words_to_the_skeletons_tokens_and_writes_conll_2012():
    assert data_convert.align_words(["York-based", "firms"], ["JJ", "NNS"], ["NNP", "HYPH", "VBN", "NNS"]) == \
        ["York", "-", "based", "firms"]
    # the fewest cuts, then the cut nearest the word's end (OntoNotes keeps anti- attached)
    assert data_convert.align_words(["anti-morning-sickness"], ["JJ"], ["JJ", "HYPH", "NN"]) == \
        ["anti-morning", "-", "sickness"]
    assert data_convert.align_words(["62%-owned"], ["JJ"], ["CD", "NN", "HYPH", "VBN"]) == ["62", "%", "-", "owned"]
    assert data_convert.srl_document(SKELETON, SRL_MRG) == (
        "#begin document (nw/wsj/00/wsj_0001); part 000\n"
        "nw/wsj/00/wsj_0001 0 0 York NNP (TOP(S(NP(NML* - - - - * (ARG0* -\n"
        "nw/wsj/00/wsj_0001 0 1 - HYPH * - - - - * * -\n"
        "nw/wsj/00/wsj_0001 0 2 based VBN *) - - - - * * -\n"
        "nw/wsj/00/wsj_0001 0 3 firms NNS *) - - - - * *) -\n"
        "nw/wsj/00/wsj_0001 0 4 rose VBD (VP* rise 01 - - * (V*) -\n"
        "nw/wsj/00/wsj_0001 0 5 . . *)) - - - - * * -\n\n#end document\n")
    with pytest.raises(ValueError, match="do not line up with 5 skeleton tokens"):
        data_convert.align_words(["a", "b"], ["DT", "NN"], ["DT", "NN", "NN", "NN", "NN"])
    with pytest.raises(ValueError, match="1 skeleton sentences, 2 trees, expected equal"):
        data_convert.srl_document(SKELETON, SRL_MRG * 2)


WORDNET_DATA = {  # WordNet's data.* lines (wndb(5WN)): offset lex_filenum ss_type w_cnt word lex_id ... p_cnt pointers
    "noun": "  1 licence line\n00001740 03 n 02 Jury 0 panel 1 000 | a body of citizens\n",
    "verb": "00002000 32 v 01 say 0 000 | express\n",
    "adj": "00003000 00 a 01 ordinal(a) 0 000 | being of a position\n"
           "00003100 00 s 01 eighth 0 001 & 00003000 a 0000 | the ordinal of eight\n",
    "adv": ""}
NAF = """<?xml version='1.0' encoding='UTF-8'?>
<NAF><text>
<wf id="w0" sent="1">The</wf><wf id="w1" sent="1">eighth</wf><wf id="w2" sent="1">jury</wf>
<wf id="w3" sent="1">said_so</wf><wf id="w4" sent="1">.</wf><wf id="w5" sent="2">A&amp;B</wf>
</text><terms>
<term id="t0" pos="DT" lemma="the"><span><target id="w0"/></span></term>
<term id="t1" pos="JJ" lemma="eighth"><span><target id="w1"/></span><externalReferences>
 <externalRef reference="1" reftype="sense_number"/><externalRef reference="5:00:00:ordinal(a):00"
   reftype="lexical_key"/>
</externalReferences></term>
<term id="t2" pos="NN" lemma="jury"><span><target id="w2"/></span><externalReferences>
 <externalRef reference="0;1" reftype="sense_number"/><externalRef reference="1:03:09::;1:03:00::"
   reftype="lexical_key"/>
</externalReferences></term>
<term id="t3" pos="VB" lemma="say_so"><span><target id="w3"/></span><externalReferences>
 <externalRef reference="0" reftype="sense_number"/><externalRef reference="2:32:00::" reftype="lexical_key"/>
</externalReferences></term>
<term id="t5" pos="NNP" lemma="a&amp;b"><span><target id="w5"/></span></term>
</terms></NAF>"""


def test_semcor_naf_becomes_raganato_xml_with_wordnet_3_keys_only(monkeypatch):
    files = {f"usr/share/wordnet/data.{pos}": text.encode() for pos, text in WORDNET_DATA.items()}
    assert data_convert.wordnet_sense_keys(files) == {"jury%1:03:00::", "panel%1:03:01::", "say%2:32:00::",
                                                      "ordinal%3:00:00::", "eighth%5:00:00:ordinal:00"}
    monkeypatch.setattr(data_convert, "SEMCOR_FILES", {"brown1": "a01"})
    deb = _deb({**files, "usr/share/doc/wordnet-base/copyright": b"c"})
    out = data_convert.convert_semcor(lambda origin: deb if origin == data_convert.WORDNET_DEB else NAF.encode())
    assert out["wsd/semcor/semcor.data.xml"].decode().splitlines() == [
        '<?xml version="1.0" encoding="UTF-8" ?>', '<corpus lang="en" source="semcor">',
        '<text id="d000" source="br-a01">', '<sentence id="d000.s000">', '<wf lemma="the" pos="DET">The</wf>',
        '<instance id="d000.s000.t000" lemma="eighth" pos="ADJ">eighth</instance>',
        '<instance id="d000.s000.t001" lemma="jury" pos="NOUN">jury</instance>',
        '<wf lemma="say_so" pos="VERB">said so</wf>', '<wf lemma="." pos=".">.</wf>', "</sentence>",
        '<sentence id="d000.s001">', '<wf lemma="a&amp;b" pos="NOUN">A&amp;B</wf>', "</sentence>", "</text>",
        "</corpus>"]
    assert out["wsd/semcor/semcor.gold.key.txt"] == b"d000.s000.t000 eighth%5:00:00:ordinal:00\n" \
                                                   b"d000.s000.t001 jury%1:03:00::\n"
    assert out["wsd/semcor/semcor.docs.tsv"].decode().splitlines()[1:] == ["d000\tbrown1/br-a01.naf"]
    assert out["wsd/semcor/semcor.dropped.tsv"].decode().splitlines()[2:] == [
        "d000.s000\t2\tbr-a01\tt2\tjury\tjury\t0;1\t1:03:09::;1:03:00::\tjury%1:03:09::\tkey_dropped_other_key_kept",
        "d000.s000\t3\tbr-a01\tt3\tsaid_so\tsay_so\t0\t2:32:00::\tsay_so%2:32:00::\tinstance_dropped"]


def test_every_manifest_file_belongs_to_a_dataset_and_each_profile_names_its_datasets():
    rows = data.read_manifest()
    assert len(rows) == 303 and all(data.unit_of(rel) for rel in rows)
    assert set(data.profile_units("small")) == {"lm_corpus", "srl_propbank_wsj", "snli_small", "squad_small",
                                                "litbank_coref", "conll2003", "sst_trees"}
    assert set(data.profile_units("probes_small")) == {"wsd/semcor", "wsd/eval", "wordnet3.0", "pos_wsj_sample"}


def test_a_broken_manifest_line_is_named_in_one_line(tmp_path):
    bad = tmp_path / "m.tsv"
    bad.write_text("snli_small/train.jsonl\t12\tnot-a-hash\tsomewhere\n")
    with pytest.raises(data.SpecError, match=r"m.tsv:1: expected path<TAB>bytes<TAB>sha256<TAB>origin"):
        data.read_manifest(bad)


# ---------------------------------------------------------------- lm_corpus: its recipe on the origins' stand-ins

WIKINEWS = "".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in (
    ("3", "Main Page", "skip"), ("736", "A", "First news paragraph here.\n Second one, stripped. \nThird.")))
WIKI = ('<doc id="12" url="?curid=12" title="Anarchism">\nAnarchism\n\nAnarchism is a philosophy.\n</doc>\n'
        '<doc id="25" url="?curid=25" title="Autism">\nAutism\n\nAutism is a condition.\nMore on it.\n</doc>\n')
REUTERS = ('<REUTERS TOPICS="YES" NEWID="1">\n<TEXT>&#2;\n<BODY>Showers continued throughout\nthe week &lt;in> the\n'
           'Bahia zone.\n    The dry  period means\nlate crops.\n &#127;  Arrivals rose.\n Reuter\n&#3;</BODY></TEXT>\n'
           '</REUTERS>\n<REUTERS NEWID="2">\n<TEXT>no body</TEXT>\n</REUTERS>\n')
BOOK = ("\ufeffTitle: A Book\r\n\r\nIt was a _dark_ and\r\nstormy night [p.1] in {12} 1_st Gent_.\r\n  \r\n"
        "CHAPTER I\r\n\r\nThe end.\r\n\r\n_   19 Notes on it_, etc.\r\n")
LM_RECIPE = ("source\twikinews\nfile\tlm_corpus/heldout/wikinews.heldout.txt\n736\t2,0-1\n"
             "source\tenwiki2015\nfile\tlm_corpus/enwiki2015_00.txt\n25\t2-3\n12\t0,2\n"
             "source\treuters21578\nfile\tlm_corpus/reuters21578_00.txt\n1\t0-3\n"
             "source\tgutenberg\nfile\tlm_corpus/gutenberg_00.txt\nc0ffee:data/b.txt\t1,3-4\n")


def _lm_origins():
    from runner.data.lm_corpus import SOURCES

    return {f"{SOURCES['wikinews'].repo}:text/AA/wiki_07": WIKINEWS,
            f"{SOURCES['enwiki2015'].repo}:text/AC/wiki_99": WIKI,
            f"{SOURCES['reuters21578'].repo}:data/reut2-021.sgm": REUTERS,
            f"{SOURCES['gutenberg'].repo}@c0ffee:data/b.txt": BOOK}


def test_lm_corpus_recipe_rebuilds_each_origins_paragraphs_in_its_order():
    from runner.data import lm_corpus as data_lmcorpus

    files = _lm_origins()
    out = data_lmcorpus.build(lambda origin: files.get(origin, "").encode("latin-1" if "reut" in origin
                                                                                  else "utf-8"), LM_RECIPE)
    assert out["lm_corpus/heldout/wikinews.heldout.txt"] == \
        b"Third.\nFirst news paragraph here.\nSecond one, stripped.\n"
    assert out["lm_corpus/enwiki2015_00.txt"] == b"Autism is a condition.\nMore on it.\nAnarchism\nAnarchism is a " \
                                                 b"philosophy.\n"
    # wrapped lines re-joined, a paragraph at each indented line, &#N; dropped, entities decoded
    assert out["lm_corpus/reuters21578_00.txt"].decode().splitlines() == [
        "Showers continued throughout the week <in> the Bahia zone.", "The dry period means late crops.",
        "Arrivals rose.", "Reuter"]
    # hard-wrapped lines joined, page markers and _italic_ underscores removed (not inside 1_st Gent_)
    assert out["lm_corpus/gutenberg_00.txt"] == b"It was a dark and stormy night in 1_st Gent_.\nThe end.\n" \
                                                   b"19 Notes on it, etc.\n"  # the spaces '_' leaves: collapsed


@pytest.mark.parametrize("recipe, message", [
    ("source\tnowhere\n", "lm_corpus_recipe.tsv.xz:1: unknown source 'nowhere'"),
    ("source\twikinews\n736\t0\n", "lm_corpus_recipe.tsv.xz:2: a document row before any file line"),
    ("source\twikinews\nfile\tlm_corpus/x.txt\n999\t0\n", "lm_corpus_recipe.tsv.xz:3: document '999' is not in "
                                                          "wikinews's origin files"),
    ("source\twikinews\nfile\tlm_corpus/x.txt\n736\t0-7\n", "lm_corpus_recipe.tsv.xz:3: item '0-7' is not a "
                                                            "paragraph or range of the document (3 paragraphs)"),
    ("source\twikinews\nfile\n", "lm_corpus_recipe.tsv.xz:2: expected two tab-separated fields")])
def test_a_bad_lm_corpus_recipe_line_is_named_in_one_line(recipe, message):
    from runner.data import lm_corpus as data_lmcorpus

    files = _lm_origins()
    with pytest.raises(ValueError, match=re.escape(message)):
        data_lmcorpus.build(lambda origin: files.get(origin, "").encode(), recipe)


def test_the_committed_recipe_names_every_corpus_file_of_the_manifest():
    import lzma

    from runner.data import lm_corpus as data_lmcorpus

    plan = data_lmcorpus.read_recipe(lzma.decompress(data_lmcorpus.RECIPE.read_bytes()).decode())
    assert {path for _, path, _ in plan} == {rel for rel in data.read_manifest() if rel.startswith("lm_corpus/")}
    assert data_lmcorpus.RECIPE.stat().st_size < 1_000_000  # metadata only: ids and offsets, never the text


def test_the_recipe_tool_finds_each_line_as_a_paragraph_and_follows_a_document():
    from tools.lm_corpus_recipe import align, ranges

    docs = [("7", ["Title", "A b c.", "Same.", "D e f."]), ("9", ["Same.", "G h.", "I j."])]
    lines = ["G h.", "A b c.", "D e f.", "Same.", "I j."]  # "Same." in both: 9 covers the longer run from there
    rows = align(docs, lines)
    assert [(docs[d][0], ranges(ks)) for d, ks in rows] == [("9", "1"), ("7", "1,3"), ("9", "0,2")]
    assert [docs[d][1][k] for d, ks in rows for k in ks] == lines
    with pytest.raises(ValueError, match="line 2 .* is in no origin document"):
        align(docs, ["A b c.", "not there"])


# ---------------------------------------------------------------- the download step, over loopback

class _Server:
    """http.server on 127.0.0.1 serving ``root``; ``paths`` lists what was asked."""

    def __init__(self, root: Path):
        paths = self.paths = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                paths.append(self.path)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def snli_site(tmp_path, monkeypatch):
    """A stand-in of e-SNLI served as raw.githubusercontent.com serves it, a manifest with the hashes of its
    conversion, and a profile that reads snli_small under ${DATA_DIR}."""
    site = tmp_path / "site"
    for name, text in ESNLI.items():
        repo, rest = data_convert.ESNLI.split("@")
        commit, path = rest.split(":")
        target = site / repo / commit / path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    made = data_convert.convert_snli(_esnli_get())
    profile = _stand_in_manifest_and_profile(tmp_path, monkeypatch, made, "snli_small/train.jsonl")
    server = _Server(site)
    yield server, profile, made
    server.close()


def test_fetch_downloads_converts_verifies_and_resumes(snli_site, tmp_path, capsys):
    server, profile, made = snli_site
    into = tmp_path / "data"
    assert data.fetch(str(profile), into, server.url) == 0
    for rel, body in made.items():
        assert (into / rel).read_bytes() == body
    assert len(server.paths) == 6  # s1, s2, labels of dev and test, each once
    # the downloads (and their folders) go once their dataset is verified
    assert not list((into / ".origins").rglob("*"))
    out = capsys.readouterr().out
    assert "licence: SNLI 1.0" in out and "snli_small/train.jsonl: ok" in out and "1 of 1 datasets complete" in out
    assert data.fetch(str(profile), into, server.url) == 0  # resumable: verified files are kept, nothing downloaded
    assert len(server.paths) == 6 and "no files of 3 to make" in capsys.readouterr().out
    assert data.check(str(profile), into) == 0


def test_fetch_refuses_a_file_whose_hash_differs(snli_site, tmp_path, capsys, monkeypatch):
    server, profile, made = snli_site
    changed = {**ESNLI, "labels.dev": "entailment\nneutral\n"}  # one label changed at the origin
    site_file = next(Path(server.httpd.RequestHandlerClass.keywords["directory"]).rglob("labels.dev"))
    site_file.write_text(changed["labels.dev"])
    into = tmp_path / "data"
    assert data.fetch(str(profile), into, server.url) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "train.jsonl" in line]
    assert len(lines) == 1 and "expected" in lines[0] and "left as train.jsonl.partial, not used" in lines[0]
    assert not (into / "snli_small/train.jsonl").exists() and (into / "snli_small/train.jsonl.partial").is_file()
    assert (into / "snli_small/dev.jsonl").is_file()  # the files that match are kept
    assert list((into / ".origins").rglob("labels.dev"))  # and the downloads of an unfinished dataset
    assert data.check(str(profile), into) == 1


def test_a_download_that_fails_is_one_line_and_nothing_is_written(snli_site, tmp_path, capsys):
    server, profile, made = snli_site
    into = tmp_path / "data"
    assert data.main(["fetch", str(profile), "--into", str(into), "--base-url", server.url + "/nothing-here"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: snli_small: download http://127.0.0.1") and "404" in err[0]
    assert not (into / "snli_small").exists() and not list(into.rglob("*.part"))


def test_fetch_makes_lm_corpus_from_its_origins_over_loopback(tmp_path, monkeypatch, capsys):
    import lzma

    from runner.data import lm_corpus as data_lmcorpus

    files = _lm_origins()
    sources = {name: dataclasses.replace(spec, files=tuple(f.split(":", 1)[1] for f in files if f.startswith(
        spec.repo + ":"))) for name, spec in data_lmcorpus.SOURCES.items()}
    monkeypatch.setattr(data_lmcorpus, "SOURCES", sources)
    recipe = LM_RECIPE
    monkeypatch.setattr(data_lmcorpus, "RECIPE", tmp_path / "recipe.tsv.xz")
    data_lmcorpus.RECIPE.write_bytes(lzma.compress(recipe.encode()))
    site = tmp_path / "site"
    for origin, text in files.items():
        repo, _, rest = origin.partition("@")
        target = site / repo / rest.replace(":", "/", 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("latin-1" if "reut" in origin else "utf-8"))
    made = data_lmcorpus.build(lambda origin: (site / origin.replace("@", "/", 1).replace(":", "/", 1)).read_bytes())
    profile = _stand_in_manifest_and_profile(tmp_path, monkeypatch, made, "lm_corpus/wikinews_00.txt")
    server = _Server(site)
    try:
        into = tmp_path / "data"
        assert data.fetch(str(profile), into, server.url) == 0
        assert len(server.paths) == 4  # one file of each origin in this stand-in
        for rel, body in made.items():
            assert (into / rel).read_bytes() == body
        assert "lm_corpus: 4 files written and verified" in capsys.readouterr().out
    finally:
        server.close()


def test_a_pinned_url_origin_is_checked_before_use(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "x.deb").write_bytes(b"other bytes")
    server = _Server(tmp_path / "site")
    try:
        get = data.Downloads(tmp_path / "cache")
        with pytest.raises(data.SpecError, match="expected " + "0" * 64 + "; deleted"):
            get(f"{server.url}/x.deb#sha256=" + "0" * 64)
        assert not list((tmp_path / "cache").rglob("x.deb"))
    finally:
        server.close()


class _ScriptedServer:
    """127.0.0.1 answering each path with its next scripted reply (the last one again once the others are used):
    (status, body, the Content-Length it declares: None for the body's own)."""

    def __init__(self, replies: dict):
        asked = self.asked = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                asked.append(self.path)
                queue = replies[self.path]
                status, body, length = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)  # fewer bytes than declared: HTTP/1.0, the connection then closes

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def sleeps(monkeypatch):
    """The waits between tries, recorded instead of slept."""
    waited = []
    monkeypatch.setattr(data, "sleep", waited.append, raising=False)
    return waited


HTML = b"\n<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Please sign in</body></html>\n"


@pytest.mark.parametrize("name, expected", [("treebank.zip", "a zip archive"), ("x.tar.gz", "a gzip file"),
                                            ("dev-v1.1.json", "JSON"), ("eng.train", "the data file eng.train")])
def test_an_html_page_served_with_200_is_named_and_not_kept(name, expected, tmp_path, sleeps):
    """A proxy's or a login page served with status 200 where an archive or JSON was expected was kept in
    DIR/.origins/ and failed every later fetch (a conversion error, or a sha256 mismatch) without being fetched
    again."""
    server = _ScriptedServer({f"/o/r/c0ffee/data/{name}": [(200, HTML, None)]})
    try:
        get = data.Downloads(tmp_path / "cache", server.url, delay=0.01)
        for tries in (1, 2):
            with pytest.raises(data.SpecError) as error:
                get(f"o/r@c0ffee:data/{name}")
            assert str(error.value) == (f"download {server.url}/o/r/c0ffee/data/{name}: expected {expected}, found "
                                        f"an HTML page ({len(HTML)} bytes: an error, login or proxy page served as "
                                        f"the file?); deleted")
            assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
            assert len(server.asked) == tries and not sleeps  # fetched again, not retried at once
    finally:
        server.close()


def test_a_download_cut_short_is_removed_and_fetched_again(tmp_path, capsys, sleeps):
    body = bytes(range(256)) * 40
    server = _ScriptedServer({"/o/r/c0ffee/big.bin": [(200, body[:1000], len(body)), (200, body, None)]})
    try:
        get = data.Downloads(tmp_path / "cache", server.url, delay=0.01)
        assert get("o/r@c0ffee:big.bin") == body
        assert len(server.asked) == 2 and sleeps == [0.01]
        [line] = [line for line in capsys.readouterr().out.splitlines() if "retry" in line]
        assert line == (f"  {server.url}/o/r/c0ffee/big.bin: cut short (1,000 of 10,240 bytes); retry 1 of 3 in "
                        f"0.01 s"), line
        assert not list((tmp_path / "cache").rglob("*.part"))
    finally:
        server.close()


def test_503_and_429_are_retried_with_growing_waits_and_refused_connections_give_up_after_4_tries(tmp_path, capsys,
                                                                                                  sleeps):
    server = _ScriptedServer({"/o/r/c0ffee/f.txt": [(503, b"busy", None), (429, b"slow down", None),
                                                    (200, b"the file\n", None)]})
    try:
        get = data.Downloads(tmp_path / "cache", server.url, delay=0.01)
        assert get("o/r@c0ffee:f.txt") == b"the file\n"
        assert len(server.asked) == 3 and sleeps == [0.01, 0.02]
        lines = [line for line in capsys.readouterr().out.splitlines() if "retry" in line]
        assert lines == [f"  {server.url}/o/r/c0ffee/f.txt: HTTP 503 Service Unavailable; retry 1 of 3 in 0.01 s",
                         f"  {server.url}/o/r/c0ffee/f.txt: HTTP 429 Too Many Requests; retry 2 of 3 in 0.02 s"]
    finally:
        server.close()
    closed = server.url  # nothing listens there now: each connection is refused
    sleeps.clear()
    with pytest.raises(data.SpecError) as error:
        data.Downloads(tmp_path / "cache", closed, delay=0.01)("o/r@c0ffee:g.txt")
    assert str(error.value) == (f"download {closed}/o/r/c0ffee/g.txt: [Errno 111] Connection refused, 4 tries; "
                                f"run the same command again later")
    assert sleeps == [0.01, 0.02, 0.04]
    assert len([line for line in capsys.readouterr().out.splitlines() if "Connection refused; retry" in line]) == 3


def test_a_404_is_not_retried(tmp_path, sleeps):
    server = _ScriptedServer({"/o/r/c0ffee/f.txt": [(404, b"no such file", None)]})
    try:
        with pytest.raises(data.SpecError, match="HTTP Error 404"):
            data.Downloads(tmp_path / "cache", server.url, delay=0.01)("o/r@c0ffee:f.txt")
        assert len(server.asked) == 1 and not sleeps
    finally:
        server.close()


def test_an_origin_used_unchanged_is_checked_against_the_manifest_when_it_arrives(tmp_path, monkeypatch, capsys):
    """CoNLL-2003's files are used as they are: the manifest's size and sha256 of the output are the origin's, so a
    changed file is refused as it arrives and deleted (it was kept in DIR/.origins/ and failed every rerun)."""
    files = {name: f"-DOCSTART- -X- O O\n\n{name} NN B-NP O\n".encode() for _, name in data_convert.CONLL_FILES}
    profile = _stand_in_manifest_and_profile(tmp_path, monkeypatch, {f"conll2003/{n}": b for n, b in files.items()},
                                             "conll2003/eng.train")
    site = tmp_path / "site"
    for origin, name in data_convert.CONLL_FILES:
        repo, _, rest = origin.partition("@")
        target = site / repo / rest.replace(":", "/", 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[name] if name != "eng.testa" else files[name] + b"one more line\n")
    monkeypatch.setenv("ELMO_DATA_RETRY_DELAY", "0.01")
    server = _Server(site)
    try:
        into = tmp_path / "data"
        assert data.main(["fetch", str(profile), "--into", str(into), "--base-url", server.url]) == 1
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"error: conll2003: download {server.url}/suryasumukh/conll-ner/") and line.endswith(
            f"/data/eng.testa: {len(files['eng.testa']) + 14} bytes, expected {len(files['eng.testa'])} (the bytes of "
            f"conll2003/eng.testa in manifest.tsv, which uses it unchanged); deleted"), line
        assert not list((into / ".origins").rglob("eng.testa"))
        next(site.rglob("eng.testa")).write_bytes(files["eng.testa"])  # the origin put right: fetched again, made
        assert data.main(["fetch", str(profile), "--into", str(into), "--base-url", server.url]) == 0
        assert (into / "conll2003" / "eng.testa").read_bytes() == files["eng.testa"]
    finally:
        server.close()


def test_a_bad_retry_delay_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_DATA_RETRY_DELAY", "soon")
    assert data.main(["fetch", "small", "--into", str(tmp_path), "--base-url", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err == ("error: ELMO_DATA_RETRY_DELAY: expected a number of seconds >= 0 (the first "
                                       "wait before a download is tried again; default 2), found 'soon'\n")



@pytest.mark.slow  # other Pythons
def test_fetch_needs_neither_torch_nor_allennlp(tmp_path):
    """`python -m runner.data fetch PROFILE` is for a machine that has no environment yet: a plain Python."""
    code = ("import runner.data.fetch, sys; bad = sorted({m.split('.')[0] for m in sys.modules} & {'torch', "
            "'allennlp', 'numpy'}); assert not bad, bad")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    # the whole command, with torch and allennlp made unimportable
    for name in ("torch", "allennlp"):
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    env["PYTHONPATH"] = f"{tmp_path}:{REPO_ROOT}"
    done = subprocess.run([sys.executable, "-m", "runner.data", "check", "small", "--into", str(tmp_path / "d")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == "", done.stderr  # 1: nothing verified there
    assert "conll2003: 0 of 3 files verified" in done.stdout

# ---------------------------------------------------------------- DATA_DIR keeps the archived runs

def _planned_ids(profile_name: str):
    from runner.profile import load_profile
    from runner.spec import expand_cells, load_sweeps, unique_runs

    profile, path = load_profile(profile_name)
    return {r.run_id: r for r in unique_runs(expand_cells(profile, load_sweeps(profile, path)))}


def test_data_dir_moves_the_data_but_not_the_run_ids(monkeypatch, tmp_path):
    monkeypatch.delenv("DATA_DIR", raising=False)
    here = _planned_ids("small")
    archived = {p.stem for p in (REPO_ROOT / "results" / "small" / "runs").rglob("*.json")}
    assert len(archived) == 125 and archived <= set(here)
    assert next(iter(here.values())).knob_dict["TRAIN_PATH"].startswith("../shared/data/")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "elsewhere"))
    there = _planned_ids("small")
    assert set(there) == set(here)
    assert all(r.knob_dict["TRAIN_PATH"].startswith(str(tmp_path / "elsewhere") + "/") for r in there.values())


@pytest.mark.parametrize("name, runs", [("cache_benchmark", 4), ("cache_size", 20), ("recheck_py312", 1)])
def test_the_other_real_data_profiles_read_data_dir_with_the_same_run_ids(name, runs, monkeypatch, tmp_path):
    monkeypatch.delenv("DATA_DIR", raising=False)
    monkeypatch.setenv("BILM_DIR", "/bilm")  # cache_benchmark's weights
    here = _planned_ids(name)
    assert len(here) == runs and all(r.knob_dict["TRAIN_PATH"].startswith("../shared/data/") for r in here.values())
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    there = _planned_ids(name)
    assert set(there) == set(here)
    assert all(r.knob_dict["TRAIN_PATH"].startswith(f"{tmp_path}/") for r in there.values())


def test_probe_run_ids_do_not_depend_on_data_dir(monkeypatch, tmp_path):
    from runner.execution.probes import plan_probes
    from runner.profile import load_profile
    from runner.spec import load_sweeps

    def ids():
        profile, path = load_profile("probes_small")
        return [r.run_id for r in plan_probes(profile.knobs, load_sweeps(profile, path))]

    monkeypatch.delenv("DATA_DIR", raising=False)
    here = ids()
    assert set(here) == {p.stem for p in (REPO_ROOT / "results" / "probes_small" / "runs").rglob("*.json")} or \
        not (REPO_ROOT / "results" / "probes_small" / "runs").is_dir()
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert ids() == here


# ---------------------------------------------------------------- the real data and the origins, where present

@pytest.mark.real_data
def test_the_manifest_matches_the_real_data_folder():
    root = shared_data()
    rows = data.read_manifest()
    small = [rel for rel, row in rows.items() if row["bytes"] < 2_000_000]
    assert all(data.verified(root, rel, rows[rel]) for rel in small)
    assert all((root / rel).stat().st_size == row["bytes"] for rel, row in rows.items())


@pytest.mark.skipif(not os.environ.get("ELMO_DATA_ORIGINS"), reason="set ELMO_DATA_ORIGINS to a folder of origin "
                                                                    "snapshots (OWNER+REPO/repo git repositories)")
def test_conversions_are_byte_for_byte_on_the_origins(capsys):
    assert data.verify_conversions(Path(os.environ["ELMO_DATA_ORIGINS"]),
                                   ["conll2003", "sst_trees", "snli_small", "wsd/eval", "pos_wsj_sample",
                                    "litbank_coref", "srl_propbank_wsj", "wordnet3.0", "squad_small", "wsd/semcor",
                                    "lm_corpus"]) == 0


def test_check_names_the_missing_training_text_of_the_stages_still_to_run(tmp_path, monkeypatch):
    from runner.preflight.checks import stage_files
    from runner.profile import Profile

    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    profile = {"bilm": {"pretrain": {"out": str(tmp_path / "bilm"), "args": [
                   "--options", "x.json", "--train", "${DATA_DIR}/lm/a.txt", "${DATA_DIR}/lm/b.txt",
                   "--heldout", "${DATA_DIR}/lm/heldout/h.txt", "--epochs", "1"]}},
               "vectors": {"out": str(tmp_path / "vectors"), "train": ["${DATA_DIR}/lm/*.txt"]}}
    profile = Profile(name="p", sweeps=("table1",), **profile)
    problems = [str(p) for p in stage_files(profile)]
    assert len(problems) == 4 and problems[0].startswith(f"{tmp_path}/data/lm/a.txt: expected the biLM pretraining's "
                                                         "--train file; found nothing there. A file of DATA_DIR")
    assert "python -m runner.data fetch PROFILE" in problems[0] and "vectors.train" in problems[3]
    (tmp_path / "data" / "lm" / "heldout").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "heldout/h.txt"):
        (tmp_path / "data" / "lm" / name).write_text("text\n")
    assert stage_files(profile) == []
