"""SRL (paper Sec. 4): the official perl scorer on a hand-computed example, the checked CoNLL-2012 reader (sample
data, real format samples, bad input), and train -> evaluate -> save/load for the baseline and each ELMo placement."""
import json
import os
import re
import shutil
import subprocess

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.commands.evaluate import evaluate_from_archive
from allennlp.commands.train import train_model_from_file
from allennlp.models.archival import load_archive
from allennlp_models.structured_prediction.metrics.srl_eval_scorer import DEFAULT_SRL_EVAL_PATH, SrlEvalScorer
from allennlp_models.structured_prediction.models.srl import convert_bio_tags_to_conll_format

from tasks.elmo_input_sized import elmo_output_dim
from tasks.srl.reader import CheckedSrlReader

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, "jsonnet_configs", "srl.jsonnet")
SAMPLE = os.path.join(REPO, "tasks", "srl", "sample_data")
FORMAT_SAMPLE = "/work/shared/data/format_samples/srl_conll2012"
TINY_OPTIONS = os.path.join(REPO, "elmo_module", "bundled", "tiny_options.json")
needs_perl = pytest.mark.skipif(shutil.which("perl") is None, reason="perl is needed for srl-eval.pl")


@pytest.fixture
def knobs(monkeypatch, tmp_path):
    """Tiny model on the bundled sample, caches and loggers isolated in tmp_path, run from the repo root."""
    monkeypatch.chdir(REPO)
    for name, value in {"SIZE": "tiny", "ELMO": "none", "NUM_EPOCHS": "2", "TRAIN_FRACTION": "1.0",
                        "TRAIN_PATH": "", "DEV_PATH": "", "TEST_PATH": "", "GLOVE_PATH": "",
                        "ELMO_OPTIONS": "", "ELMO_WEIGHTS": "", "CUDA_DEVICE": "-1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("ALLENNLP_CACHE_ROOT", "WANDB_DIR", "HF_HOME", "NLTK_DATA"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    return monkeypatch


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


@pytest.mark.skipif(not os.path.isdir(FORMAT_SAMPLE), reason="shared format sample absent")
def test_reader_reads_real_format_sample_like_allennlp_models():
    from allennlp_models.structured_prediction.dataset_readers.srl import SrlReader

    ours = list(CheckedSrlReader().read(FORMAT_SAMPLE))
    theirs = list(SrlReader().read(FORMAT_SAMPLE))
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


# --- train, evaluate, save/load ----------------------------------------------------------------------------------

def _train_evaluate_reload(tmp_path, overrides=""):
    serialization_dir = tmp_path / "run"
    model = train_model_from_file(CONFIG, serialization_dir, overrides=overrides)
    archive_path = serialization_dir / "model.tar.gz"
    evaluated = evaluate_from_archive(str(archive_path), os.path.join(SAMPLE, "test"))
    archive = load_archive(str(archive_path))
    instances = list(archive.validation_dataset_reader.read(os.path.join(SAMPLE, "test")))
    model.eval()
    archive.model.eval()  # Model.load leaves the module in training mode (recurrent dropout on)
    before = model.forward_on_instances(instances)
    after = archive.model.forward_on_instances(instances)
    for trained, reloaded in zip(before, after):
        assert trained["tags"] == reloaded["tags"]
        assert torch.allclose(torch.as_tensor(trained["class_probabilities"]),
                              torch.as_tensor(reloaded["class_probabilities"]), atol=1e-6)
    with open(serialization_dir / "metrics.json") as metrics_file:
        metrics = json.load(metrics_file)
    return model, metrics, evaluated


@needs_perl
def test_baseline_learns_and_evaluates_with_the_perl_f1(knobs, tmp_path):
    knobs.setenv("NUM_EPOCHS", "30")
    _, metrics, evaluated = _train_evaluate_reload(tmp_path, overrides='{"trainer.patience": null}')
    with open(tmp_path / "run" / "metrics_epoch_0.json") as first:
        first_epoch = json.load(first)
    assert metrics["training_loss"] < 0.5 * first_epoch["training_loss"]
    assert first_epoch["validation_f1-measure-overall"] == 0.0
    assert metrics["best_validation_f1-measure-overall"] > 0.3
    # `allennlp evaluate` reports the perl scorer's F1; same model and data as the end-of-training test score.
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"])


@needs_perl
@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placements_train_evaluate_and_reload(knobs, tmp_path, placement):
    pytest.importorskip("elmo_module.allennlp_adapter")  # registers the ELMo indexer, embedder and encoder
    knobs.setenv("ELMO", placement)
    model, metrics, evaluated = _train_evaluate_reload(tmp_path)
    assert "f1-measure-overall" in evaluated and 0.0 <= evaluated["f1-measure-overall"] <= 1.0
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
    assert os.path.exists(tmp_path / "run" / "elmo_mix_weights.json")
