"""The intrinsic probes (probes/, Sec. 5.3, Tables 4-6): scorer, WordNet first senses and keys, 1-NN, the POS
probe's linear classifier on the frozen layers, readers' errors, and the runner's probe sweeps."""
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_module.errors import ElmoInputError
from probes.readers import WsdSentence, WsdToken, read_key_file, read_raganato_xml, read_tagged, read_wsd_set
from probes.sample_data.make_wordnet import write_dict
from probes.wordnet import WordNet
from probes.wsd import SenseCentroids, disambiguate, instance_vectors, nearest_sense, score
from tests.conftest import REPO_ROOT, shared_data


def test_scorer_follows_the_framework_rules():
    gold = {"a": ["k1"], "b": ["k2", "k3"], "c": ["k4"], "d": ["k5"]}
    answers = {"a": ["k1"],          # right
               "b": ["k3"],          # right: any gold key counts
               "c": ["k4", "x"],     # two answers, one right: 0.5 right, 0.5 wrong
               "zzz": ["k1"]}        # not in the gold file: skipped; "d" unanswered: lowers recall only
    s = score(gold, answers)
    p, r = 2.5 / 3, 2.5 / 4
    assert s["P"] == pytest.approx(100 * p) and s["R"] == pytest.approx(100 * r)
    assert s["F1"] == pytest.approx(100 * 2 * p * r / (p + r))
    assert s["answered"] == 3 and s["instances"] == 4
    assert score(gold, {})["F1"] == 0.0


SYNSETS = {  # name: (ss_type, lex_filenum, [(word, lex_id)], pointers, gloss); written for this test
    "bank.slope": ("n", 17, [("bank", 1), ("riverbank", 0)], [], "sloping land"),
    "bank.money": ("n", 14, [("depository", 0), ("bank", 0)], [], "a financial institution"),
    "take_place.v": ("v", 30, [("take_place", 0), ("happen", 2)], [], "come to pass"),
    "good.a": ("a", 0, [("good", 0)], [], "having desirable qualities"),
    "fine.s": ("s", 0, [("fine(a)", 4), ("ok", 0)], [("&", "good.a")], "satisfactory"),
}
SENSES = {("bank", "noun"): ["bank.money", "bank.slope"], ("riverbank", "noun"): ["bank.slope"],
          ("take_place", "verb"): ["take_place.v"], ("happen", "verb"): ["take_place.v"],
          ("good", "adj"): ["good.a"], ("fine", "adj"): ["fine.s"]}


def test_pos_and_key_files_drop_a_byte_order_mark(tmp_path):
    """The POS probe used to read a UTF-8 byte-order mark into the first token ('\ufeffThe'); the task readers
    drop it. Lines may end in \r\n or \r as well."""
    marked = "\ufeffThe\tDT\r\ndog\tNN\r\n\r\nIt\tPRP\r"
    assert read_tagged(_write(tmp_path / "p.txt", marked)) == [[("The", "DT"), ("dog", "NN")], [("It", "PRP")]]
    assert read_key_file(_write(tmp_path / "k.txt", "\ufeffd0.s0.t0 bank%1:14:00::\n")) == {
        "d0.s0.t0": ["bank%1:14:00::"]}


def test_a_wordnet_file_with_a_byte_that_is_not_utf8_is_one_line(tmp_path):
    write_dict(tmp_path, SYNSETS, SENSES)
    index = tmp_path / "index.noun"
    index.write_bytes(index.read_bytes().replace(b"riverbank", b"riverb\xe4nk"))
    with pytest.raises(ElmoInputError, match=r"index\.noun:\d+: expected UTF-8 text, found byte 0xe4 at column 7$"):
        WordNet(tmp_path).first_sense("bank", "NOUN")


def test_sense_keys_and_first_sense_from_index_and_data_files(tmp_path):
    write_dict(tmp_path, SYNSETS, SENSES)
    wn = WordNet(tmp_path)
    # index order is the sense order, whatever the order in data.noun; keys as senseidx(5WN) spells them
    assert wn.sense_keys("bank", "NOUN") == ["bank%1:14:00::", "bank%1:17:01::"]
    assert wn.first_sense("Bank", "NOUN") == "bank%1:14:00::"
    assert wn.first_sense("take place", "VERB") == "take_place%2:30:00::"
    assert wn.first_sense("happen", "VERB") == "happen%2:30:02::"
    assert wn.first_sense("fine", "ADJ") == "fine%5:00:04:good:00"  # satellite: head word and id; marker dropped
    assert wn.first_sense("good", "ADJ") == "good%3:00:00::"
    assert wn.first_sense("bank", "VERB") is None and wn.first_sense("zorp", "NOUN") is None
    assert wn.first_sense("bank", "DET") is None


def _token(lemma, pos, instance_id=None, text=None):
    return WsdToken(text or lemma, lemma, pos, instance_id)


def test_fallback_to_first_sense_only_for_lemmas_semcor_lacks(tmp_path):
    write_dict(tmp_path, SYNSETS, SENSES)
    centroids = SenseCentroids(n_layers=2, dim=2)
    centroids.add("bank", "NOUN", ["bank%1:17:01::"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    sentence = WsdSentence("s", [_token("bank", "NOUN", "i1"), _token("good", "ADJ", "i2"),
                                 _token("zorp", "NOUN", "i3"), _token("the", "DET")])
    vectors = {i: np.ones((2, 2)) for i in ("i1", "i2", "i3")}
    per_layer, first, counts = disambiguate(centroids, WordNet(tmp_path), [sentence], vectors)
    for answers in per_layer:
        # bank: SemCor's only sense, not WordNet's first; good: not in SemCor -> first sense; zorp: no answer
        assert answers == {"i1": ["bank%1:17:01::"], "i2": ["good%3:00:00::"]}
    assert first == {"i1": ["bank%1:14:00::"], "i2": ["good%3:00:00::"]}
    assert counts == {"instances": 3, "fallback": 2, "unanswerable": 1}


def test_nearest_sense_centroid_matches_brute_force():
    rng = np.random.default_rng(0)
    n_layers, dim = 3, 5
    centroids = SenseCentroids(n_layers, dim)
    train = []  # (lemma, key, vector)
    for lemma in ("play", "bank"):
        for k in range(4):
            for _ in range(rng.integers(1, 5)):
                train.append((lemma, f"{lemma}%1:0{k}:00::", rng.normal(size=(n_layers, dim)) + k))
    for lemma, key, vector in train:
        centroids.add(lemma, "NOUN", [key], vector)
    for _ in range(20):
        lemma, query = random.Random(_).choice(["play", "bank"]), rng.normal(size=(n_layers, dim))
        keys, unit = centroids.matrices(lemma, "NOUN")
        ours = nearest_sense(keys, unit, query)
        for layer in range(n_layers):  # brute force: every key's mean, cosine by hand, best first
            best, best_sim = None, -2.0
            for key in sorted({k for item, k, _ in train if item == lemma}):
                members = [v[layer] for item, k, v in train if k == key]
                mean = [sum(m[d] for m in members) / len(members) for d in range(dim)]
                dot = sum(a * b for a, b in zip(mean, query[layer]))
                sim = dot / math.sqrt(sum(a * a for a in mean)) / math.sqrt(sum(b * b for b in query[layer]))
                if sim > best_sim:
                    best, best_sim = key, sim
            assert ours[layer] == best


def test_multiword_instance_is_the_mean_of_its_words():
    sentence = WsdSentence("s", [_token("it", "PRON", text="It"), _token("take_place", "VERB", "i1", "took place")])
    assert sentence.words() == ["It", "took", "place"]
    layers = np.arange(2 * 3 * 2, dtype=np.float64).reshape(2, 3, 2)
    [(position, vector)] = instance_vectors(sentence, layers)
    assert position == 1 and np.allclose(vector, layers[:, 1:3].mean(axis=1))


def test_pos_probe_features_are_exactly_the_frozen_layers_and_the_classifier_is_linear(tmp_path):
    from elmo_module.characters import batch_to_ids
    from probes.layers import FrozenBiLm
    from probes.pos import LinearProbe, features, train_linear

    torch.set_num_threads(1)
    sentences = [["The", "cat", "sat", "."], ["Prices", "rose", "5", "%", "in", "March", "."], ["Hello"]]
    direct = FrozenBiLm(batch_size=2)
    reference = [direct.bilm(batch_to_ids([s])).layers for s in sentences]  # one sentence at a time
    expected = np.concatenate([torch.stack([item[0] for item in layers]).detach().numpy() for layers in reference],
                              axis=1)
    assert np.allclose(features(direct, sentences, "t"), expected, atol=1e-6)
    cached = FrozenBiLm(batch_size=2, cache_dir=str(tmp_path / "cache"))
    # through the activation cache (which may store fp16): equal to storage precision
    assert np.allclose(features(cached, sentences, "t"), expected, rtol=2e-3, atol=2e-3)
    assert any((tmp_path / "cache").rglob("*"))

    # the classifier: one affine map and nothing else, trained to separate linearly separable tags
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0).astype(np.int64)
    model, info = train_linear(x[:200], y[:200], x[200:], y[200:], n_tags=4, max_iter=50)
    assert [type(m) for m in model.modules()] == [LinearProbe, torch.nn.Linear]
    assert info["dev_accuracy"] > 90
    a, b = torch.from_numpy(x[:5]), torch.from_numpy(x[5:10])
    f0 = model(torch.zeros(1, 8))
    assert torch.allclose(model(2 * a - 3 * b) - f0, 2 * (model(a) - f0) - 3 * (model(b) - f0), atol=1e-4)


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.slow
def test_reader_errors_name_file_and_line(tmp_path):
    xml = _write(tmp_path / "x.data.xml", '<?xml version="1.0" ?>\n<corpus>\n<text id="d0">\n<sentence id="d0.s0">\n'
                                          '<instance id="d0.s0.t0" '
                                          'pos="NOUN">bank</instance>\n</sentence></text></corpus>\n')
    with pytest.raises(ElmoInputError, match=r"x\.data\.xml:5: expected <instance> with attribute\(s\) id, lemma, "
                                             r"pos, found none for lemma"):
        read_raganato_xml(xml)
    with pytest.raises(ElmoInputError, match=r"y\.data\.xml:3: expected well-formed XML, found mismatched tag"):
        read_raganato_xml(_write(tmp_path / "y.data.xml", "<corpus>\n<text>\n</corpus>\n"))
    with pytest.raises(ElmoInputError, match=r"k\.txt:2: expected 'id key \[key \.\.\.\]', found 'd0.s0.t1'"):
        read_key_file(_write(tmp_path / "k.txt", "d0.s0.t0 bank%1:14:00::\nd0.s0.t1\n"))
    with pytest.raises(ElmoInputError, match=r"k2\.txt:1: expected WordNet sense keys .* found 'bank#n#1'"):
        read_key_file(_write(tmp_path / "k2.txt", "d0.s0.t0 bank#n#1\n"))
    with pytest.raises(ElmoInputError, match=r"p\.txt:3: expected 'token<TAB>tag', found 'EU\\tNNP\\tB-NP'"):
        read_tagged(_write(tmp_path / "p.txt", "The\tDT\n\nEU\tNNP\tB-NP\n"))
    good = _write(tmp_path / "z.data.xml", '<corpus><text id="d0"><sentence id="d0.s0">\n'
                                           '<instance id="d0.s0.t0" lemma="bank" pos="NOUN">bank</instance>\n'
                                           '</sentence></text></corpus>\n')
    _write(tmp_path / "z.gold.key.txt", "d0.s0.t9 bank%1:14:00::\n")
    with pytest.raises(ElmoInputError, match=r"z\.gold\.key\.txt: expected a line for instance 'd0.s0.t0'"):
        read_wsd_set(good)
    # the command prints it as one line, no traceback, exit 2
    result = subprocess.run([sys.executable, "-m", "probes", "pos", "--train", str(tmp_path / "p.txt")],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.stderr and "p.txt:3" in result.stderr


@pytest.mark.real_data
def test_first_sense_baseline_reproduces_the_framework_on_real_data():
    """Our sense keys, first-sense rule and scorer give the framework's published WordNet first-sense F1
    (Raganato et al. 2017, Table 4: SE2 66.8, SE3 66.2, SE07 55.2, SE13 63.0, SE15 67.8, ALL 65.2)."""
    xml = shared_data("wsd", "eval", "ALL", "ALL.data.xml")
    wn = WordNet(shared_data("wordnet3.0", "dict"))
    sentences, gold = read_wsd_set(xml)
    first = {t.instance_id: [wn.first_sense(t.lemma, t.pos)] for s in sentences for t in s.tokens if t.instance_id}
    expected = {"senseval2": 66.8, "senseval3": 66.2, "semeval2007": 55.2, "semeval2013": 63.0, "semeval2015": 67.8}
    for name, f1 in expected.items():
        part = {i: k for i, k in gold.items() if i.startswith(name + ".")}
        assert round(score(part, first)["F1"], 1) == f1
    assert round(score(gold, first)["F1"], 1) == 65.2


def test_runner_probe_sweep_writes_its_table_with_provenance_and_paper_values(tmp_path, monkeypatch):
    from runner.__main__ import main
    from runner.profile import Profile, SpecError
    from runner.spec import load_sweeps

    monkeypatch.chdir(REPO_ROOT)
    assert main(["--only", "table5", "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    table = (tmp_path / "results" / "table5.md").read_text()
    assert table.startswith("# Table 5") and "- **git_commit**" in table and "- **weights**: bundled tiny" in table
    assert "| second LSTM layer |" in table and "| 69.0 |" in table  # ours beside the paper's
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert summary["sweeps"]["table5"]["probe"]["status"] == "ok"
    # per-instance units (for the paired tests): summed, they give back each layer's F1 on the set the table reports
    from runner.metrics import metric_value

    result = json.loads(next((tmp_path / "runs").glob("probes/table5-*/result.json")).read_text())
    units = result["units"]["test"]
    for j, name in enumerate(result["layer_names"]):
        assert metric_value("wsd_f1", np.sum(units["counts"][name], axis=0)) == pytest.approx(
            result["sets"][units["set"]]["layers"][j]["F1"])
    # --only picks probe sweeps as it picks task sweeps: table5 alone ran table6 (and table4) too before
    assert not list((tmp_path / "runs").glob("probes/table[46]-*"))
    assert main(["--only", "table6", "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    pos = json.loads(next((tmp_path / "runs").glob("probes/table6-*/result.json")).read_text())
    for name, layer in zip(pos["layer_names"], pos["layers"]):  # per test sentence [correct, tokens]
        assert metric_value("accuracy", np.sum(pos["units"]["test"]["counts"][name], axis=0)) == pytest.approx(
            layer["test_accuracy"])
    assert "**holds**" not in table and "Test: " in table  # the verdict comes with its test
    with pytest.raises(SpecError, match="sweep 'table5' .*: key 'kind': expected one of .*found 'wsdx'"):
        load_sweeps(Profile(name="p", sweeps=("table5",), sweep_overrides={"table5": {"kind": "wsdx"}}),
                    tmp_path / "p.json")


@pytest.mark.slow
def test_a_probe_run_whose_bilm_changed_is_stale(tmp_path, monkeypatch, capsys):
    """Probe runs kept no record of what they read: after a profile's biLM was made again (another machine's bytes)
    the archived probe results stayed "finished" and their tables went on naming the new weights. Now a probe run
    records the checksums of its biLM and data, and a changed file makes it stale as a task run is."""
    import shutil

    import h5py

    from runner.__main__ import main

    monkeypatch.chdir(REPO_ROOT)
    bundled = REPO_ROOT / "elmo_module" / "bundled"
    weights = tmp_path / "weights.hdf5"
    shutil.copy(bundled / "tiny_weights.hdf5", weights)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"sweeps": ["table6"], "knobs": {
        "ELMO_OPTIONS": str(bundled / "tiny_options.json"), "ELMO_WEIGHTS": str(weights)}}))
    argv = ["--profile", str(profile), "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"),
            "--no-cache"]
    assert main(argv) == 0
    [result] = (tmp_path / "runs").glob("probes/table6-*/result.json")
    recorded = json.loads(result.read_text())["reads"]
    assert set(recorded) == {str(bundled / "tiny_options.json"), str(weights), "probes/sample_data/pos/train.txt",
                             "probes/sample_data/pos/dev.txt", "probes/sample_data/pos/test.txt"}
    before = json.loads(result.read_text())["layers"]

    with h5py.File(weights, "r+") as f:  # the biLM made again: other bytes at the same path
        names = []
        f.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        data = f[names[0]]
        data[...] = data[...] * 0.5
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 finished probe runs read files that have changed since"), err
    assert f"{result.parent}: {weights}" in err and "--redo-stale" in err
    assert main([*argv, "--build-only"]) == 2  # no table from it either
    capsys.readouterr()
    assert main([*argv, "--build-only", "--redo-stale"]) == 0  # set aside, not run: it said "runs again"
    assert f"stale, left out of the tables until trained again: {result.parent} ({weights} changed)" in \
        capsys.readouterr().out
    assert main([*argv, "--redo-stale"]) == 0
    assert (result.parent / "result.stale.json").is_file()
    assert json.loads(result.read_text())["reads"][str(weights)] != recorded[str(weights)]
    assert json.loads(result.read_text())["layers"] != before  # run again on the new weights
    assert main(argv) == 0


def test_neighbour_sentence_is_never_the_source_itself():
    """Table 4's source sentences are (cut-down) SemCor sentences: the nearest SemCor use of the word must come from
    another sentence (before the fix each source found itself)."""
    from probes.layers import FrozenBiLm
    from probes.neighbours import run_neighbours
    from probes.readers import read_wsd_set

    semcor = Path(__file__).resolve().parents[2] / "probes" / "sample_data" / "wsd" / "semcor" / "semcor.data.xml"
    sentences, _ = read_wsd_set(str(semcor))
    with_play = [" ".join(s.words()) for s in sentences if "play" in s.words()]
    assert len(with_play) >= 2
    sources = [with_play[0], " ".join(with_play[1].split()[:-1])]  # a whole SemCor sentence, and one cut short
    result = run_neighbours(FrozenBiLm(batch_size=4), str(semcor), sources=sources, nearest=1, min_count=1)
    for entry, whole in zip(result["contextual"], with_play[:2]):
        assert entry["nearest"] and all(n["sentence"] != whole for n in entry["nearest"])


@pytest.mark.parametrize("argv, message", [
    (["neighbours", "--top", "-3"], "--top: expected at least 1, found -3"),
    (["pos", "--threads", "-2"], "--threads: expected at least 1, found -2"),
    (["neighbours", "--glove", "{tmp}/glove.txt"], "--glove '{tmp}/glove.txt': expected a GloVe text file, found no "
                                                   "such file"),
    (["pos", "--out", "{tmp}/a_file/pos.json"], "--out '{tmp}/a_file/pos.json': cannot make directory "
                                                "'{tmp}/a_file' (File exists)"),
])
def test_bad_probe_flags_are_one_line_before_any_work(tmp_path, capsys, argv, message):
    """These used to be a traceback (--threads, --glove), a silently short list (--top -3), or a traceback after
    all the work (--out under a file)."""
    from probes.__main__ import main

    (tmp_path / "a_file").write_text("")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert capsys.readouterr().err == f"error: {message.format(tmp=tmp_path)}\n"
