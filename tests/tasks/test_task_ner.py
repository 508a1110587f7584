"""NER on CoNLL-2003: checked reader, conlleval span F1 on IOB1 input, training, evaluate, save/load."""
import json

import pytest
import torch
from allennlp.data import Vocabulary
from allennlp.data.dataset_readers.dataset_utils import to_bioul
from allennlp.training.metrics import SpanBasedF1Measure

from tasks.ner.conll2003_reader import CheckedConll2003Reader
from tests.conftest import REPO_ROOT, allennlp_evaluate, assert_read_error, predictions_after_reload, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

SAMPLE = REPO_ROOT / "tasks" / "ner" / "sample_data"


def reader():
    return CheckedConll2003Reader(tag_label="ner", convert_to_coding_scheme="BIOUL")


def test_sample_reads_sentences_without_docstart_and_converts_iob1_to_bioul():
    instances = list(reader().read(str(SAMPLE / "train.txt")))
    assert len(instances) == 6  # 6 sentences; the two -DOCSTART- lines are not sentences
    first = instances[0]
    assert [t.text for t in first["tokens"].tokens][:2] == ["Maria", "Keller"]
    assert first["tags"].labels == ["B-PER", "L-PER", "O", "O", "U-LOC", "O", "O", "O"]
    # "Paris Madrid": I-LOC then B-LOC (IOB1: B- separates two adjacent chunks of one type) -> two chunks.
    assert instances[4]["tags"].labels[:2] == ["U-LOC", "U-LOC"]


def span_f1(gold_iob1, predicted_iob1):
    """conlleval-style span P/R/F1 as crf_tagger computes it: IOB1 -> BIOUL (reader), then span matching."""
    gold = [to_bioul(tags, encoding="IOB1") for tags in gold_iob1]
    predicted = [to_bioul(tags, encoding="IOB1") for tags in predicted_iob1]
    vocab = Vocabulary()
    for tag in sorted({t for sentence in gold + predicted for t in sentence}):
        vocab.add_token_to_namespace(tag, "labels")
    length = max(len(s) for s in gold)
    num_tags = vocab.get_vocab_size("labels")
    logits = torch.zeros(len(gold), length, num_tags)
    gold_ids = torch.zeros(len(gold), length, dtype=torch.long)
    mask = torch.zeros(len(gold), length, dtype=torch.bool)
    for i, (g, p) in enumerate(zip(gold, predicted)):
        for j, (gt, pt) in enumerate(zip(g, p)):
            gold_ids[i, j] = vocab.get_token_index(gt, "labels")
            logits[i, j, vocab.get_token_index(pt, "labels")] = 1.0
            mask[i, j] = True
    metric = SpanBasedF1Measure(vocab, tag_namespace="labels", label_encoding="BIOUL")
    metric(logits, gold_ids, mask)
    return metric.get_metric()


def test_span_f1_follows_conlleval_chunk_rules_on_iob1():
    gold = [
        # chunks: PER[0-1], LOC[3], LOC[4] (B- starts a new one), ORG[6], MISC[7] (type change starts one)
        ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "O", "I-ORG", "I-MISC"],
        # I- after O starts a chunk: LOC[1]
        ["O", "I-LOC", "O"],
    ]
    predicted = [
        # PER[0-1] right, LOC[3-4] wrong (one chunk for two), ORG[6] right, MISC[7] right
        ["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "O", "I-ORG", "I-MISC"],
        ["O", "I-LOC", "O"],  # right
    ]
    metrics = span_f1(gold, predicted)
    # 5 predicted chunks, 6 gold chunks, 4 correct.
    assert metrics["precision-overall"] == pytest.approx(4 / 5)
    assert metrics["recall-overall"] == pytest.approx(4 / 6)
    assert metrics["f1-measure-overall"] == pytest.approx(2 * (4 / 5) * (4 / 6) / (4 / 5 + 4 / 6))
    # LOC: gold 3, predicted 2, correct 1.
    assert metrics["precision-LOC"] == pytest.approx(1 / 2)
    assert metrics["recall-LOC"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "content, message",
    [
        ("EU NNP I-NP I-ORG\nrejects VBZ I-VP\n", "line 2: expected 4 columns"),
        ("EU NNP I-NP I-ORG\nrejects VBZ I-VP I-VERB\n", "line 2: expected an IOB1 NER tag"),
        ("EU NNP I-NP I-ORG\nrejects VBZ I-VP U-PER\n", "found 'U-PER'"),
        ("EU NNP I-NP I-ORG\nrejects VBZ VP O\n", "line 2: expected an IOB1 chunk tag"),
        ("", "found none (empty file)"),
        ("-DOCSTART- -X- -X- O\n\n", "found none (empty file)"),
    ],
)
def test_bad_input_gives_one_line_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    assert_read_error(reader(), path, message)


@pytest.mark.real_data
@pytest.mark.parametrize("name, sentences", [("eng.train", 14041), ("eng.testa", 3250), ("eng.testb", 3453)])
def test_real_conll2003_sentence_counts(name, sentences):
    path = shared_data("conll2003", name)
    assert sum(1 for _ in reader().read(str(path))) == sentences


def test_baseline_trains_evaluates_and_reloads(train_task, tmp_path):
    # A higher learning rate than the paper's so that 15 epochs of the 6-sentence sample show learning.
    model, run = train_task("ner", overrides={"trainer.optimizer.lr": 0.02}, SIZE="small", NUM_EPOCHS=15)
    epochs = [json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 14)]
    assert epochs[1]["training_loss"] < 0.5 * epochs[0]["training_loss"]  # it learns the sample
    assert epochs[1]["training_f1-measure-overall"] > epochs[0]["training_f1-measure-overall"]

    metrics = allennlp_evaluate(run / "model.tar.gz", "tasks/ner/sample_data/test.txt", tmp_path / "eval.json")
    assert 0.0 <= metrics["f1-measure-overall"] <= 1.0 and "precision-overall" in metrics

    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.txt"), ["tags", "logits"])
    for b, a in zip(before, after):
        assert b[0] == a[0]
        assert b[1] == pytest.approx(a[1], abs=1e-5)


@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placement_trains_and_reloads(train_task, placement):
    model, run = train_task("ner", ELMO=placement, NUM_EPOCHS=1)
    assert (run / "elmo_mix_weights.json").exists()
    assert (type(model.encoder).__name__ == "ElmoOutputEncoder") == (placement in ("output", "both"))
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.txt"), ["tags", "logits"])
    for b, a in zip(before, after):
        assert b[0] == a[0]
        assert b[1] == pytest.approx(a[1], abs=1e-5)


def test_lambda_penalty_from_the_config_pulls_mix_weights_to_uniform(train_task):
    """Sec. 3.2: lambda * sum(w^2) enters the training loss (the config's regularizer). Starting from clearly
    non-uniform mix weights, a large lambda pulls the softmax weights to uniform; lambda = 0 leaves them apart.
    Weights are read from the last epoch's checkpoint (the archived model is the best epoch's)."""
    overrides = {
        "trainer.optimizer.lr": 0.1,
        "model.initializer": {"regexes": [["mix_weights", {"type": "normal", "std": 2.0}]]},
    }

    def train(lam):
        _, run = train_task("ner", overrides=overrides, ELMO="input", ELMO_LAMBDA=lam, NUM_EPOCHS=20)
        last_checkpoint = max(run.glob("model_state_e*.th"), key=lambda path: int(path.name.split("_")[2][1:]))
        (raw,) = [w for name, w in torch.load(last_checkpoint).items() if name.endswith("mix_weights")]
        epochs = [json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 19)]
        reg_losses = [epoch.get("training_reg_loss") for epoch in epochs]  # absent when there is no penalty
        return torch.softmax(raw, dim=0).tolist(), reg_losses

    free, no_penalty = train(0)
    assert no_penalty == [None, None]
    pulled, reg_losses = train(100)
    free_deviation = max(abs(w - 1 / 3) for w in free)
    pulled_deviation = max(abs(w - 1 / 3) for w in pulled)
    assert free_deviation > 0.1
    assert pulled_deviation < 0.04 and pulled_deviation < 0.25 * free_deviation
    assert reg_losses[0] > 10 * reg_losses[1] > 0  # the penalty is in the loss and is driven down


def test_hub_split_is_read_through_the_same_checks_with_iob2_converted(monkeypatch):
    """hf:conll2003:SPLIT (online use): the hub's ClassLabel IOB2 tags become the IOB1 the reader expects."""
    import datasets

    from tasks import hub_data

    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    tag = {name: i for i, name in enumerate(names)}
    features = datasets.Features({
        "tokens": datasets.Sequence(datasets.Value("string")),
        "pos_tags": datasets.Sequence(datasets.ClassLabel(names=["NNP", "CC"])),
        "chunk_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-NP", "I-NP"])),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names)),
    })
    rows = {
        "tokens": [["-DOCSTART-"], ["Paris", "Madrid", "and", "Ann", "Lee"]],
        "pos_tags": [[0], [0, 0, 1, 0, 0]],
        "chunk_tags": [[0], [1, 1, 0, 1, 2]],
        "ner_tags": [[0], [tag["B-LOC"], tag["B-LOC"], tag["O"], tag["B-PER"], tag["I-PER"]]],
    }
    monkeypatch.setattr(hub_data, "load_hub_split", lambda path: datasets.Dataset.from_dict(rows, features=features))
    (instance,) = reader().read("hf:conll2003:train")
    # IOB2 B-LOC B-LOC O B-PER I-PER -> IOB1 I-LOC B-LOC O I-PER I-PER -> BIOUL
    assert instance["tags"].labels == ["U-LOC", "U-LOC", "O", "B-PER", "L-PER"]
