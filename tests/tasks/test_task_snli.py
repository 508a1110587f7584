"""SNLI: checked reader (drops gold label "-"), blank spaCy tokenizer, training, evaluate, save/load."""
import json

import pytest

from tasks.snli.snli_reader import CheckedSnliReader
from tasks.spacy_blank_tokenizer import BlankEnglishSpacyTokenizer
from tests.conftest import REPO_ROOT, allennlp_evaluate, assert_read_error, predictions_after_reload, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

SAMPLE = REPO_ROOT / "tasks" / "snli" / "sample_data"


def reader():
    return CheckedSnliReader(tokenizer=BlankEnglishSpacyTokenizer())


def test_blank_spacy_tokenizer_splits_punctuation_and_keeps_offsets():
    tokens = BlankEnglishSpacyTokenizer().tokenize("A man's dog, running.")
    assert [t.text for t in tokens] == ["A", "man", "'s", "dog", ",", "running", "."]
    assert [t.idx for t in tokens] == [0, 2, 5, 8, 11, 13, 20]


def test_sample_reads_and_drops_no_majority_pairs():
    instances = list(reader().read(str(SAMPLE / "train.jsonl")))
    assert len(instances) == 8  # 9 lines, one with gold_label "-"
    assert [i["label"].label for i in instances[:3]] == ["entailment", "contradiction", "neutral"]
    assert [t.text for t in instances[0]["hypothesis"].tokens] == ["A", "man", "plays", "music", "."]


@pytest.mark.real_data
def test_real_format_sample_reads():
    path = shared_data("format_samples", "snli", "snli.jsonl")
    instances = list(reader().read(str(path)))
    assert instances and all(i["label"].label in ("entailment", "neutral", "contradiction") for i in instances)


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"gold_label": "neutral", "sentence1": "A b.", "sentence2": "C d."}', '{"gold_label": "neutral", '],
         "line 2: expected a JSON object, found text cut short inside a JSON value (a broken download? get the "
         "file again)"),
        (['{"gold_label" "neutral"}'], "line 1: expected a JSON object, found invalid JSON (Expecting ':' delimiter at "
                                       "column 15)"),
        (['{"gold_label": "neutral", "sentence1": "A b."}'], "line 1: expected a string 'sentence2'"),
        (['{"gold_label": "maybe", "sentence1": "A b.", "sentence2": "C d."}'], "line 1: expected gold_label in"),
        ([], "found none (empty file)"),
    ],
)
def test_bad_input_gives_one_line_error_naming_file_and_line(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    assert_read_error(reader(), path, message)


def test_baseline_trains_evaluates_and_reloads(train_task, tmp_path):
    model, run = train_task(
        "snli",
        overrides={"trainer.optimizer.lr": 0.004, "trainer.patience": None, "trainer.learning_rate_scheduler": None},
        SIZE="small",
        NUM_EPOCHS=10,
    )
    first, last = (json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 9))
    assert last["training_loss"] < first["training_loss"]

    metrics = allennlp_evaluate(run / "model.tar.gz", "tasks/snli/sample_data/test.jsonl", tmp_path / "eval.json")
    assert metrics["accuracy"] in (0.0, 1 / 3, 2 / 3, 1.0)  # 3 test pairs

    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.jsonl"), ["label_probs"])
    for b, a in zip(before, after):
        assert b[0] == pytest.approx(a[0], abs=1e-6)


@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placement_trains_and_reloads(train_task, placement):
    model, run = train_task("snli", ELMO=placement, NUM_EPOCHS=1)
    assert (run / "elmo_mix_weights.json").exists()
    assert (type(model._encoder).__name__ == "ElmoOutputEncoder") == (placement in ("output", "both"))
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.jsonl"), ["label_probs"])
    for b, a in zip(before, after):
        assert b[0] == pytest.approx(a[0], abs=1e-6)


def test_hub_split_is_read_through_the_same_checks(monkeypatch):
    """hf:snli:SPLIT (online use): ClassLabel ids become label names; -1 (no majority) is dropped."""
    import datasets

    from tasks import hub_data

    features = datasets.Features({
        "premise": datasets.Value("string"),
        "hypothesis": datasets.Value("string"),
        "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
    })
    rows = {"premise": ["A dog runs.", "A dog runs.", "A cat sits."],
            "hypothesis": ["An animal moves.", "It is late.", "A cat stands."],
            "label": [0, -1, 2]}
    monkeypatch.setattr(hub_data, "load_hub_split", lambda path: datasets.Dataset.from_dict(rows, features=features))
    instances = list(reader().read("hf:snli:validation"))
    assert [i["label"].label for i in instances] == ["entailment", "contradiction"]


def test_paper_elmo_model_adds_weight_l2_and_attention_dropout(task_env):
    """The paper's SNLI ELMo model (supplement A.3): lambda * sum(w^2) on the mix weights plus 1e-4 * sum(W^2) over
    every trainable recurrent and feed-forward weight matrix (not biases, embeddings, gamma), and 50 % dropout on the
    attention output before the projection. Only at SIZE paper with ELMo; the baseline and small sizes unchanged."""
    import torch
    from allennlp.common.plugins import import_plugins
    from allennlp.models import Model

    from tests.tasks.test_configs import config_params, sample_vocabulary

    import_plugins()
    vocab = sample_vocabulary("snli")

    def build(**knobs):
        task_env(**knobs)
        return Model.from_params(vocab=vocab, params=config_params("snli").pop("model"))

    model = build(SIZE="paper", ELMO="both", ELMO_LAMBDA="0.001")
    with torch.no_grad():
        for _, parameter in model.named_parameters():
            parameter.uniform_(-0.5, 0.5)  # mix weights start at 0: make every term count
    expected = 0.0
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if name.endswith("mix_weights"):
            expected += 0.001 * (parameter ** 2).sum().item()
        elif parameter.dim() == 2 and "token_embedder_tokens" not in name:  # LSTM and feed-forward matrices
            expected += 0.0001 * (parameter ** 2).sum().item()
    assert model.get_regularization_penalty().item() == pytest.approx(expected, rel=1e-5)
    dropouts = [m.p for m in model._projection_feedforward.modules() if isinstance(m, torch.nn.Dropout)]
    assert 0.5 in dropouts

    for knobs in ({"SIZE": "paper", "ELMO": "none"}, {"SIZE": "small", "ELMO": "both"}):
        model = build(**knobs)
        assert type(model._projection_feedforward).__name__ == "FeedForward"
        regexes = [regex for regex, _ in model._regularizer._regularizers] if model._regularizer else []
        assert regexes == (["mix_weights"] if knobs["ELMO"] != "none" else [])
