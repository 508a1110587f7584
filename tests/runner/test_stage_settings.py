"""A stage's settings are checked on every invocation, runs left to do or not: raising the pretraining's --tokens or
the vectors' --epochs in a profile whose runs are all finished was "0 to do", the tables built from the old
stages."""
import json

import pytest

from runner.spec import SpecError
from runner.stages import word_vectors
from runner.stages.bilm_stages import SETTINGS, check_stage_settings


def test_a_pretraining_made_with_other_args_is_refused_in_one_line(tmp_path):
    out = tmp_path / "bilm"
    out.mkdir()
    (out / SETTINGS).write_text(json.dumps({"settings": ["--tokens", "8000", "--epochs", "1"], "reads": {}}))
    profile = {"bilm": {"pretrain": {"out": str(out), "args": ["--tokens", "9000", "--epochs", "1"]}}}
    with pytest.raises(SpecError, match=r"^biLM pretraining: .* made with other settings than the profile's "
                                        r"\(--tokens 8000 -> 9000\): remove .*\(the finished runs that read it are "
                                        r"then stale"):
        check_stage_settings(profile["bilm"])
    profile["bilm"]["pretrain"]["args"][1] = "8000"
    check_stage_settings(profile["bilm"])  # the same args: nothing to say


def test_a_fine_tuning_made_with_other_args_is_refused(tmp_path):
    out = tmp_path / "bilm-ner"
    out.mkdir()
    (out / SETTINGS).write_text(json.dumps({"settings": ["--epochs", "1"], "reads": {}}))
    profile = {"bilm": {"finetune": {"tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"), "args": ["--epochs", "2"],
                                     "from": {}}}}
    with pytest.raises(SpecError, match=r"^biLM fine-tuning on ner: .*\(--epochs 1 -> 2\)"):
        check_stage_settings(profile["bilm"])


def test_vectors_made_with_other_settings_are_refused_when_no_run_is_left(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\n" * 20)
    out = tmp_path / "vectors"
    out.mkdir()
    made = word_vectors.parse_args(["--train", str(corpus), "--out", str(out), "--epochs", "1"])
    (out / word_vectors.RECORD).write_text(json.dumps({"settings": word_vectors.settings(made), "reads": {},
                                                           "writes": {}, "files": {}}))
    profile = {"vectors": {"out": str(out), "train": [str(corpus)], "args": ["--epochs", "2"]}}
    with pytest.raises(SpecError, match=r"^word vectors: .* was with other settings \(epochs 1 -> 2\): remove"):
        word_vectors.check_vectors_settings(profile["vectors"])
