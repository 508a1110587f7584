"""SST-5: checked treebank reader (phrases for training, roots for dev/test), training, evaluate, save/load."""
import json

import pytest
from allennlp.common.checks import ConfigurationError

from tasks.sst.sst_reader import CheckedSstReader
from tests.conftest import REPO_ROOT, allennlp_evaluate, assert_read_error, predictions_after_reload, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

SAMPLE = REPO_ROOT / "tasks" / "sst" / "sample_data"


def test_sample_reads_roots_or_all_phrases():
    roots = list(CheckedSstReader(use_subtrees=False).read(str(SAMPLE / "dev.txt")))
    assert [i["label"].label for i in roots] == ["4", "0", "2"]
    assert [t.text for t in roots[0]["tokens"].tokens] == ["The", "film", "is", "wonderful", "."]
    phrases = list(CheckedSstReader(use_subtrees=True).read(str(SAMPLE / "dev.txt")))
    # every node of a tree is a labelled phrase: first tree (4 (2 (2 The) (2 film)) (4 (4 (2 is) (4 wonderful)) (2 .)))
    assert [i["label"].label for i in phrases[:9]] == ["4", "2", "2", "2", "4", "4", "2", "4", "2"]


@pytest.mark.real_data
@pytest.mark.parametrize("name, trees", [("train.txt", 8544), ("dev.txt", 1101), ("test.txt", 2210)])
def test_real_treebank_tree_counts(name, trees):
    path = shared_data("sst_trees", name)
    assert sum(1 for _ in CheckedSstReader(use_subtrees=False).read(str(path))) == trees


@pytest.mark.parametrize(
    "content, message",
    [
        ("(3 (2 A) (3 good))\n(2 (2 A) (2 film)\n", "line 2: expected a PTB-format tree"),
        ("(3 (2 A) (3 good))\n(7 (2 A) (2 film))\n", "line 2: expected node labels in"),
        ("(3 (2 A) (3 good))\n(2 (2 A) (x film))\n", "found x"),
        ("\n", "found none (empty file)"),
    ],
)
def test_bad_input_gives_one_line_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    assert_read_error(CheckedSstReader(), path, message)


def test_baseline_trains_evaluates_and_reloads(train_task, tmp_path):
    model, run = train_task("sst", overrides={"trainer.optimizer.lr": 0.01}, NUM_EPOCHS=6)
    first, last = (json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 5))
    assert last["training_loss"] < first["training_loss"]
    assert first["validation_accuracy"] in (0.0, 1 / 3, 2 / 3, 1.0)  # root accuracy: 3 dev trees, not 27 phrases

    metrics = allennlp_evaluate(run / "model.tar.gz", "tasks/sst/sample_data/test.txt", tmp_path / "eval.json")
    assert metrics["accuracy"] in (0.0, 1 / 3, 2 / 3, 1.0)  # 3 test roots

    keys = ["class_probabilities"]
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.txt"), keys)
    for b, a in zip(before, after):
        assert b[0] == pytest.approx(a[0], abs=1e-6)


@pytest.mark.parametrize("phrases, expected", [("true", 27), ("false", 3)])
def test_sst_phrases_knob_picks_phrases_or_sentences_for_training(task_env, phrases, expected):
    from allennlp.common import Params
    from allennlp.data import DatasetReader

    task_env(SST_PHRASES=phrases)
    params = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / "sst.jsonnet"))
    train = list(DatasetReader.from_params(params["dataset_reader"]).read(str(SAMPLE / "dev.txt")))
    assert len(train) == expected  # 3 trees with 27 labelled nodes in all
    assert params["validation_dataset_reader"]["use_subtrees"] is False


@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placement_trains_and_reloads(train_task, placement):
    model, run = train_task("sst", ELMO=placement, NUM_EPOCHS=1)
    assert (run / "elmo_mix_weights.json").exists()
    assert (type(model._integrator).__name__ == "ElmoOutputEncoder") == (placement in ("output", "both"))
    assert type(model._encoder).__name__ != "ElmoOutputEncoder"
    keys = ["class_probabilities"]
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.txt"), keys)
    for b, a in zip(before, after):
        assert b[0] == pytest.approx(a[0], abs=1e-6)


def test_hub_split_is_read_through_the_same_checks(monkeypatch):
    """hf:sst:ptb:SPLIT (online use): the hub's ptb_tree strings go through the same tree checks."""
    import datasets

    from tasks import hub_data

    rows = {"ptb_tree": ["(3 (2 A) (3 good))", "(9 (2 A) (2 film))"]}
    monkeypatch.setattr(hub_data, "load_hub_split", lambda path: datasets.Dataset.from_dict(rows))
    with pytest.raises(ConfigurationError, match="hf:sst:ptb:train: record 1: expected node labels in"):
        list(CheckedSstReader().read("hf:sst:ptb:train"))
    rows["ptb_tree"].pop()
    assert [i["label"].label for i in CheckedSstReader().read("hf:sst:ptb:train")] == ["3"]


@pytest.mark.parametrize("rows", [
    {"sentence": ["A good film ."], "label": [0.8], "tokens": ["A|good|film|."], "tree": ["5|5|6|6|0"]},  # hf:sst
    {"text": ["a good film"], "label": [3], "label_text": ["positive"]},  # hf:SetFit/sst5
])
def test_hub_split_without_trees_is_a_one_line_error(monkeypatch, rows):
    """hf:sst:train (the default config) and hf:SetFit/sst5:train have no phrase trees: before, a bare
    KeyError: 'ptb_tree'."""
    import datasets

    from tasks import hub_data

    monkeypatch.setattr(hub_data, "load_hub_split", lambda path: datasets.Dataset.from_dict(rows))
    with pytest.raises(ConfigurationError, match=r"^hf:SetFit/sst5:train: expected records with a 'ptb_tree' .* "
                                                 r"hf:sst:ptb:<split>\), found columns " + ", ".join(rows) + "$"):
        list(CheckedSstReader().read("hf:SetFit/sst5:train"))
