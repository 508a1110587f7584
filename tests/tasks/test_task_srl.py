"""SRL (paper Sec. 4): the official perl scorer on a hand-computed example, the checked CoNLL-2012 reader (sample
data, real format samples, bad input), and train -> evaluate -> save/load for the baseline and each ELMo placement."""
import json
import os
import re
import shutil
import subprocess

import pytest
import torch
from allennlp.commands.evaluate import evaluate_from_archive
from allennlp.common.checks import ConfigurationError
from allennlp_models.structured_prediction.metrics.srl_eval_scorer import DEFAULT_SRL_EVAL_PATH, SrlEvalScorer
from allennlp_models.structured_prediction.models.srl import convert_bio_tags_to_conll_format

from tasks.elmo_input_sized import elmo_output_dim
from tasks.srl.reader import CheckedSrlReader
from tests.conftest import REPO_ROOT, allennlp_evaluate, predictions_after_reload, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

SAMPLE = str(REPO_ROOT / "tasks" / "srl" / "sample_data")
TINY_OPTIONS = str(REPO_ROOT / "elmo_module" / "bundled" / "tiny_options.json")
needs_perl = pytest.mark.skipif(shutil.which("perl") is None, reason="perl is needed for srl-eval.pl")




# --- the official scorer -----------------------------------------------------------------------------------------

# Two predicates of a 6-word sentence "Ann sold the car last week" (verb at index 1), BIO tags:
GOLD_1 = ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "B-ARGM-TMP", "I-ARGM-TMP"]
PRED_1 = ["B-ARG0", "B-V", "B-ARG1", "O", "B-ARGM-TMP", "I-ARGM-TMP"]  # ARG1 boundary wrong
GOLD_2 = ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "O", "O"]
PRED_2 = ["B-ARG0", "I-ARG0", "B-V", "O", "O", "O"]  # ARG1 missed
# V is not scored (srl-eval.pl excludes it). Predicate 1: ARG0 and ARGM-TMP correct, predicted ARG1 (2,2) is excess,
# gold ARG1 (2,3) missed. Predicate 2: ARG0 correct, gold ARG1 (3,3) missed.
# correct = 3, excess = 1, missed = 2 -> P = 3/4, R = 3/5, F1 = 2 * 0.75 * 0.6 / 1.35 = 2/3.


@needs_perl
def test_perl_scorer_gives_hand_computed_f1():
    scorer = SrlEvalScorer(ignore_classes=["V"])
    words = ["Ann", "sold", "the", "car", "last", "week"]
    scorer([1, 2], [words, words],
           [convert_bio_tags_to_conll_format(PRED_1), convert_bio_tags_to_conll_format(PRED_2)],
           [convert_bio_tags_to_conll_format(GOLD_1), convert_bio_tags_to_conll_format(GOLD_2)])
    metrics = scorer.get_metric()
    assert metrics["precision-overall"] == pytest.approx(3 / 4)
    assert metrics["recall-overall"] == pytest.approx(3 / 5)
    assert metrics["f1-measure-overall"] == pytest.approx(2 / 3)
    assert metrics["f1-measure-ARG0"] == pytest.approx(1.0)
    assert metrics["precision-ARG1"] == pytest.approx(0.0)  # 0 correct, 1 excess, 2 missed


@needs_perl
def test_perl_scorer_overall_line_agrees(tmp_path):
    """srl-eval.pl's own "Overall" line (counts and F1 in percent) for the same example."""
    words = ["Ann", "sold", "the", "car", "last", "week"]
    for name, sequences in (("gold", [(1, GOLD_1), (2, GOLD_2)]), ("pred", [(1, PRED_1), (2, PRED_2)])):
        with open(tmp_path / name, "w") as props:
            for verb_index, tags in sequences:
                for index, cell in enumerate(convert_bio_tags_to_conll_format(tags)):
                    props.write(f"{words[index] if index == verb_index else '-'} {cell}\n")
                props.write("\n")
    output = subprocess.run(["perl", DEFAULT_SRL_EVAL_PATH, str(tmp_path / "gold"), str(tmp_path / "pred")],
                            stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    overall = re.search(r"^\s*Overall\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", output, re.M)
    assert overall is not None, output
    assert overall.groups() == ("3", "1", "2", "75.00", "60.00", "66.67")


# --- reader ------------------------------------------------------------------------------------------------------

def test_reader_reads_sample_tree():
    instances = list(CheckedSrlReader().read(os.path.join(SAMPLE, "train")))
    # 7 sentences with 1, 1, 1, 2, 1, 1, 0 predicates; the predicate-less one gives one all-"O" instance.
    assert len(instances) == 8
    files_in_order = [" ".join(i["metadata"]["words"]) for i in instances]
    assert files_in_order[0] == "The city opened a park ."  # bn/ before nw/: sorted, reproducible order
    said = next(i for i in instances if i["metadata"]["verb"] == "said")
    assert said["tags"].labels == ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "I-ARG1", "I-ARG1", "I-ARG1", "O"]
    assert list(said["verb_indicator"].labels) == [0, 1, 0, 0, 0, 0, 0, 0]
    no_predicate = next(i for i in instances if i["metadata"]["verb"] is None)
    assert set(no_predicate["tags"].labels) == {"O"}


@pytest.mark.real_data
def test_reader_reads_real_format_sample_like_allennlp_models():
    from allennlp_models.structured_prediction.dataset_readers.srl import SrlReader

    format_sample = str(shared_data("format_samples", "srl_conll2012"))
    ours = list(CheckedSrlReader().read(format_sample))
    theirs = list(SrlReader().read(format_sample))
    assert len(ours) == len(theirs) > 0
    key = lambda instance: (instance["metadata"]["words"], instance["tags"].labels)  # noqa: E731
    assert sorted(map(key, ours)) == sorted(map(key, theirs))


def _one_sentence_file(tmp_path, lines):
    path = tmp_path / "bad" / "x.gold_conll"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#begin document (x); part 000\n" + "\n".join(lines) + "\n\n#end document\n")
    return path


GOOD_LINES = [
    "x 0 0 Ann NNP (TOP(S(NP*) - - - - * (ARG0*) -",
    "x 0 1 sold VBD (VP* sell 01 - - * (V*) -",
    "x 0 2 it PRP (NP*)) - - - - * (ARG1*) -",
    "x 0 3 . . *)) - - - - * * -",
]


def test_reader_accepts_the_good_lines(tmp_path):
    path = _one_sentence_file(tmp_path, GOOD_LINES)
    [instance] = CheckedSrlReader().read(str(path.parent))
    assert instance["tags"].labels == ["B-ARG0", "B-V", "B-ARG1", "O"]


@pytest.mark.parametrize("line_index, bad_line, message", [
    (2, "x 0 2 it PRP (NP*)) - - - - * (ARG1*)", r"x\.gold_conll:4: expected 13 columns .* found 12"),
    (2, "x 0 2 it PRP", r"x\.gold_conll:4: expected at least 12 .* found 5"),
    (2, "x 0 2 it PRP (NP*)) - - - - * (ARGX*) -", r"x\.gold_conll:4: .*found unknown label 'ARGX'"),
    (2, "x 0 2 it PRP (NP*)) - - - - * (ARG1* -", r"x\.gold_conll:6: expected span '\(ARG1\*' .* closed"),
    (2, "x 0 2 it PRP (NP*)) - - - - * *) -", r"x\.gold_conll:4: expected '\*\)' .* found no open span"),
    (3, "x 0 3 . . *) - - - - * * -", r"x\.gold_conll:6: expected the parse bits .* balanced .* found \+1 unclosed"),
])
def test_bad_input_names_file_and_line(tmp_path, line_index, bad_line, message):
    lines = list(GOOD_LINES)
    lines[line_index] = bad_line
    path = _one_sentence_file(tmp_path, lines)
    with pytest.raises(ConfigurationError, match=message):
        list(CheckedSrlReader().read(str(path)))


def test_empty_file_and_empty_tree_are_errors(tmp_path):
    empty = tmp_path / "tree" / "empty.gold_conll"
    empty.parent.mkdir()
    empty.write_text("")
    with pytest.raises(ConfigurationError, match=r"empty\.gold_conll: expected CoNLL-2012 sentences, found none"):
        list(CheckedSrlReader().read(str(empty.parent)))
    (tmp_path / "no_conll").mkdir()
    with pytest.raises(ConfigurationError, match=r"no_conll: expected \*gold_conll files .* found none"):
        list(CheckedSrlReader().read(str(tmp_path / "no_conll")))


# --- Hugging Face hub records (load_dataset replaced by a fake: no network in tests) -------------------------------

HUB_RECORD = {"document_id": "nw/x/00/x_0001", "sentences": [
    {"part_id": 0, "words": ["Ann", "sold", "it", "."], "coref_spans": [[3, 0, 0]],
     "srl_frames": [{"verb": "sold", "frames": ["B-ARG0", "B-V", "B-ARG1", "O"]}]},
    {"part_id": 0, "words": ["She", "left", "."], "coref_spans": [[3, 0, 0]], "srl_frames": []},
    {"part_id": 1, "words": ["Bob", "ran", "."], "coref_spans": [],
     "srl_frames": [{"verb": "ran", "frames": ["B-ARG0", "B-V", "O"]}]},
]}


def fake_hub(monkeypatch, tmp_path, records, name="ontonotes/conll2012_ontonotesv5", config="english_v12",
             layout="{config}/{split}-00000-of-00001.parquet"):
    """A local copy of the hub repository in its parquet layout (ELMO_HF_MIRROR): ``records`` in every split of
    ``config``, and another config beside it whose records must never be read with it (datasets 2.10.1 would mix
    them). ``layout``: the main branch's file names, or the automatic conversion's ``{config}/{split}/0000.parquet``."""
    import datasets

    decoy = {"document_id": "decoy", "sentences": [dict(HUB_RECORD["sentences"][2], words=["X", "Y", "Z"])]}
    for config_name, rows in ((config, records), ("arabic_v4", [decoy])):
        for split in ("train", "validation", "test"):
            path = tmp_path / "hub" / name / layout.format(config=config_name, split=split)
            path.parent.mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_list(rows).to_parquet(str(path))
    monkeypatch.setenv("ELMO_HF_MIRROR", str(tmp_path / "hub"))


@pytest.mark.parametrize("layout", ["{config}/{split}-00000-of-00001.parquet", "{config}/{split}/0000.parquet"])
def test_reader_reads_hub_records_from_the_parquet_layout(monkeypatch, tmp_path, layout):
    fake_hub(monkeypatch, tmp_path, [HUB_RECORD], layout=layout)
    instances = list(CheckedSrlReader().read("hf:ontonotes/conll2012_ontonotesv5:english_v12:validation"))
    assert [(i["metadata"]["verb"], i["tags"].labels) for i in instances] == [
        ("sold", ["B-ARG0", "B-V", "B-ARG1", "O"]), (None, ["O", "O", "O"]), ("ran", ["B-ARG0", "B-V", "O"])]
    missing = r"english_v4:train: expected parquet files english_v4/train-\*\.parquet in .* found none"
    with pytest.raises(ConfigurationError, match=missing + r" \(configs there: arabic_v4, english_v12\)"):
        list(CheckedSrlReader().read("hf:ontonotes/conll2012_ontonotesv5:english_v4:train"))


def test_bad_hub_records_and_names_are_errors(monkeypatch, tmp_path):
    bad = {"document_id": "d", "sentences": [dict(HUB_RECORD["sentences"][0], srl_frames=[
        {"verb": "sold", "frames": ["B-ARG0", "B-V", "B-ARG1"]}])]}
    fake_hub(monkeypatch, tmp_path / "a", [bad], name="o/c", config="en")
    with pytest.raises(ConfigurationError, match=r"hf:o/c:en:train: document d sentence 0: expected 4 SRL tags"):
        list(CheckedSrlReader().read("hf:o/c:en:train"))
    bad["sentences"][0]["srl_frames"] = [{"verb": "sold", "frames": ["B-ARG0", "B-V", "B-ARGX", "O"]}]
    fake_hub(monkeypatch, tmp_path / "b", [bad], name="o/c", config="en")
    with pytest.raises(ConfigurationError, match=r"found unknown label 'B-ARGX'"):
        list(CheckedSrlReader().read("hf:o/c:en:train"))
    with pytest.raises(ConfigurationError, match=r"hf:ontonotes: expected hf:<dataset>:<config>:<split>"):
        list(CheckedSrlReader().read("hf:ontonotes"))


# --- train, evaluate, save/load ----------------------------------------------------------------------------------

def _check_reload_and_metrics(model, run_dir):
    """Save -> load gives the same predictions; returns the end-of-training metrics."""
    before, after = predictions_after_reload(model, run_dir / "model.tar.gz", os.path.join(SAMPLE, "test"),
                                             ["tags", "class_probabilities"])
    for (tags, probabilities), (reloaded_tags, reloaded_probabilities) in zip(before, after):
        assert tags == reloaded_tags
        assert torch.allclose(torch.as_tensor(probabilities), torch.as_tensor(reloaded_probabilities), atol=1e-6)
    return json.loads((run_dir / "metrics.json").read_text())


@needs_perl
def test_baseline_learns_and_evaluates_with_the_perl_f1(train_task, tmp_path):
    model, run_dir = train_task("srl", overrides={"trainer.patience": None}, NUM_EPOCHS=30)
    metrics = _check_reload_and_metrics(model, run_dir)
    first_epoch = json.loads((run_dir / "metrics_epoch_0.json").read_text())
    assert metrics["training_loss"] < 0.7 * first_epoch["training_loss"]
    assert first_epoch["validation_f1-measure-overall"] == 0.0
    assert metrics["best_validation_f1-measure-overall"] > 0.3
    # `allennlp evaluate` reports the perl scorer's F1; same model and data as the end-of-training test score.
    evaluated = allennlp_evaluate(run_dir / "model.tar.gz", os.path.join(SAMPLE, "test"), tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"])
    # the per-predicate counts kept for the significance tests give back srl-eval.pl's dev and test F1
    from runner.execution.training import keep_predictions

    kept = keep_predictions(run_dir, tmp_path, "f1-measure-overall", metrics, {})
    assert kept["metric"] == "span_f1" and set(kept["units"]) == {"dev", "test"}, kept
    # the file alone gives the counts back: the predicted and gold tags and the verb word are kept
    import gzip

    from runner.execution.training import PREDICTIONS
    from tasks.predictions import srl_eval_counts

    dev = json.loads(gzip.decompress((tmp_path / PREDICTIONS).read_bytes()))["splits"]["dev"]
    assert dev["counts"] == [srl_eval_counts(*unit) for unit in zip(dev["pred"], dev["gold"], dev["verb"])]
    assert dev["verb"] == ["bought", "sold"] and dev["gold"][0][:2] == ["B-ARG0", "B-V"]


@needs_perl
@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placements_train_evaluate_and_reload(train_task, placement):
    model, run_dir = train_task("srl", ELMO=placement)
    _check_reload_and_metrics(model, run_dir)
    evaluated = evaluate_from_archive(str(run_dir / "model.tar.gz"), os.path.join(SAMPLE, "test"))
    assert 0.0 <= evaluated["f1-measure-overall"] <= 1.0
    elmo_dim = elmo_output_dim(TINY_OPTIONS)
    hidden, verb_dim, word_dim = 8, 4, 8  # SIZE=tiny in srl.jsonnet
    embedded = model.text_field_embedder.get_output_dim()
    if placement == "output":
        assert embedded == word_dim  # the ELMo embedder adds nothing at the input
    else:
        assert embedded == word_dim + elmo_dim
    assert model.encoder.get_input_dim() == embedded + verb_dim
    # Output ELMo sits on top of the LSTM stack: the tag projection sees [h; ELMo'] (Sec. 3.3).
    projection_in = model.tag_projection_layer._module.in_features
    assert projection_in == hidden + (elmo_dim if placement in ("output", "both") else 0)
    assert (run_dir / "elmo_mix_weights.json").exists()
