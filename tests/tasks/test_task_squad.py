"""SQuAD 1.1: official v1.1 EM/F1, checked reader, span decoding (length <= 17), training, evaluate, save/load."""
import json

import pytest
import torch
from allennlp.common.checks import ConfigurationError

from tasks.spacy_blank_tokenizer import BlankEnglishSpacyTokenizer
from tasks.squad.bidaf_self_attention import best_span
from tasks.squad.squad_reader import CheckedSquad1Reader
from tasks.squad.squad_v11_eval import evaluate, exact_match_score, f1_score, normalize_answer
from tests.conftest import REPO_ROOT, allennlp_evaluate, predictions_after_reload, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

SAMPLE = REPO_ROOT / "tasks" / "squad" / "sample_data"


def reader():
    return CheckedSquad1Reader(tokenizer=BlankEnglishSpacyTokenizer())


def test_normalisation_lowercases_strips_punctuation_articles_and_whitespace():
    assert normalize_answer("  The Eiffel-Tower, in   PARIS! ") == "eiffeltower in paris"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a whole word


def test_em_and_f1_against_hand_computed_values():
    assert exact_match_score("the Denver Broncos", "Denver Broncos!") == 1.0
    # prediction "denver broncos won", gold "broncos": overlap 1, P = 1/3, R = 1, F1 = 0.5
    assert f1_score("Denver Broncos won", "the Broncos") == pytest.approx(0.5)
    # v1.1: answers that normalise to nothing score F1 0 (v2.0's script would give 1), EM 1
    assert f1_score("the", "a") == 0.0 and exact_match_score("the", "a") == 1.0
    # max over gold answers, mean over questions:
    # q1: "in 1931" vs ["1931", "in 1931"] -> EM 1, F1 1; q2: "maps" vs ["ships, maps and paintings"]
    # -> EM 0, F1 = 2 * (1/1) * (1/4) / (1 + 1/4) = 0.4
    em, f1 = evaluate(["in 1931", "maps"], [["1931", "in 1931"], ["ships, maps and paintings"]])
    assert em == pytest.approx(0.5)
    assert f1 == pytest.approx((1.0 + 0.4) / 2)


def test_best_span_respects_order_and_length_limit():
    start = torch.full((1, 30), -10.0)
    end = torch.full((1, 30), -10.0)
    start[0, 2], end[0, 25] = 5.0, 5.0  # best pair is 24 tokens long: not allowed
    end[0, 10] = 4.0                     # 9 tokens: allowed
    start[0, 28], end[0, 1] = 6.0, 6.0   # best pair ends before it starts: not allowed
    assert best_span(start, end, max_span_length=17).tolist() == [[2, 10]]
    assert best_span(start, end, max_span_length=30).tolist() == [[2, 25]]


def test_sample_reads_with_gold_spans():
    instances = list(reader().read(str(SAMPLE / "dev.json")))
    assert len(instances) == 5
    first = instances[0]
    passage = [t.text for t in first["passage"].tokens]
    start, end = first["span_start"].sequence_index, first["span_end"].sequence_index
    assert passage[start : end + 1] == ["Oslo"]
    assert first["metadata"].metadata["answer_texts"] == ["Oslo", "in Oslo"]


@pytest.mark.real_data
def test_real_format_sample_reads():
    instances = list(reader().read(str(shared_data("format_samples", "squad", "squad.json"))))
    assert instances


def write(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


GOOD_PARAGRAPH = {"context": "Oslo is cold.", "qas": [{"id": "q", "question": "What is cold?",
                                                       "answers": [{"text": "Oslo", "answer_start": 0}]}]}


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"data": [\n {"paragraphs": [}\n]}', "line 2: expected valid JSON"),
        (json.dumps({"version": "1.1"}), "top level: expected 'data'"),
        (json.dumps({"data": [{"paragraphs": [GOOD_PARAGRAPH, {"qas": []}]}]}),
         "data[0].paragraphs[1]: expected 'context'"),
        (json.dumps({"data": [{"paragraphs": [{"context": "Oslo is cold.", "qas": [
            {"id": "q", "question": "What is cold?", "answers": [{"text": "Oslo", "answer_start": 3}]}]}]}]}),
         "data[0].paragraphs[0].qas[0].answers[0]: expected the answer text 'Oslo' at answer_start 3"),
        ("", "found none (empty file)"),
        (json.dumps({"data": []}), "found none (empty file)"),
    ],
)
def test_bad_input_gives_one_line_error_naming_file_and_record(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigurationError) as error:
        list(reader().read(str(path)))
    assert message in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)


def test_baseline_trains_evaluates_and_reloads(train_task, tmp_path):
    model, run = train_task("squad", overrides={"trainer.patience": None}, NUM_EPOCHS=8)
    first, last = (json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 7))
    assert last["training_loss"] < first["training_loss"]

    metrics = allennlp_evaluate(run / "model.tar.gz", "tasks/squad/sample_data/dev.json", tmp_path / "eval.json")
    assert 0.0 <= metrics["em"] <= metrics["f1"] <= 1.0

    keys = ["best_span", "span_start_logits"]
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.json"), keys)
    for b, a in zip(before, after):
        assert b[0].tolist() == a[0].tolist()
        assert b[1] == pytest.approx(a[1], abs=1e-5)


@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placement_trains_and_reloads(train_task, placement):
    model, run = train_task("squad", ELMO=placement, NUM_EPOCHS=1)
    assert (run / "elmo_mix_weights.json").exists()
    assert (type(model.phrase_encoder).__name__ == "ElmoOutputEncoder") == (placement in ("output", "both"))
    keys = ["best_span", "span_start_logits"]
    before, after = predictions_after_reload(model, run / "model.tar.gz", str(SAMPLE / "dev.json"), keys)
    for b, a in zip(before, after):
        assert b[0].tolist() == a[0].tolist()
        assert b[1] == pytest.approx(a[1], abs=1e-5)


def test_hub_split_is_regrouped_into_paragraphs_and_checked(monkeypatch):
    """hf:squad:SPLIT (online use): one record per question, regrouped by title and context."""
    import datasets

    from tasks import hub_data

    context = "Oslo is cold in winter."
    rows = {
        "id": ["a", "b"],
        "title": ["Oslo", "Oslo"],
        "context": [context, context],
        "question": ["What is cold?", "When is Oslo cold?"],
        "answers": [{"text": ["Oslo"], "answer_start": [0]},
                    {"text": ["in winter", "winter"], "answer_start": [13, 16]}],
    }
    monkeypatch.setattr(hub_data, "load_hub_split", lambda path: datasets.Dataset.from_dict(rows))
    instances = list(reader().read("hf:squad:validation"))
    assert [i["metadata"].metadata["answer_texts"] for i in instances] == [["Oslo"], ["in winter", "winter"]]
    rows["answers"][1]["answer_start"] = [12, 16]
    with pytest.raises(ConfigurationError, match="data\\[0\\].paragraphs\\[0\\].qas\\[1\\].answers\\[0\\]"):
        list(reader().read("hf:squad:validation"))


def _glove_line(word, value, dim):
    return word + " " + " ".join([str(value)] * dim) + "\n"


def test_glove_cased_with_lowercase_fallback_as_document_qa(tmp_path):
    """docqa/nn/embedder.py:206-219, 264-277: the cased word's vector, else its lowercase form's, else zero (fixed)."""
    from allennlp.data import Vocabulary

    from tasks.squad.glove_fallback import GloveCasedFallbackEmbedding

    glove = tmp_path / "glove.txt"
    glove.write_text("".join(_glove_line(w, v, 4) for w, v in
                             [("The", 1.0), ("the", 2.0), ("paris", 3.0), ("Berlin", 4.0), ("unused", 5.0)]))
    vocab = Vocabulary()
    for word in ["The", "the", "Paris", "Berlin", "berlin", "Zzyzx"]:
        vocab.add_token_to_namespace(word, "tokens")
    embedding = GloveCasedFallbackEmbedding(embedding_dim=4, vocab=vocab, pretrained_file=str(glove))

    def row(word):
        return embedding.weight[vocab.get_token_index(word, "tokens")].tolist()

    assert row("The") == [1.0] * 4 and row("the") == [2.0] * 4  # cased first: "The" is not "the"
    assert row("Paris") == [3.0] * 4  # missing cased -> lowercase vector
    assert row("Berlin") == [4.0] * 4 and row("berlin") == [0.0] * 4  # no upward fallback
    assert row("Zzyzx") == [0.0] * 4 and embedding.weight[0].tolist() == [0.0] * 4  # unknown and padding: zero
    assert not embedding.weight.requires_grad


def test_glove_of_the_wrong_dimension_is_a_one_line_error(tmp_path):
    from allennlp.data import Vocabulary

    from tasks.squad.glove_fallback import GloveCasedFallbackEmbedding

    vocab = Vocabulary()
    vocab.add_token_to_namespace("the", "tokens")
    glove = tmp_path / "glove.6B.50d.txt"
    glove.write_text(_glove_line("the", 0.5, 50))
    expected = r"glove.6B.50d.txt: line 1: expected a word and 300 numbers .*found 50"
    with pytest.raises(ConfigurationError, match=expected):
        GloveCasedFallbackEmbedding(embedding_dim=300, vocab=vocab, pretrained_file=str(glove))
    with pytest.raises(ConfigurationError, match="GloVe file not found"):
        GloveCasedFallbackEmbedding(embedding_dim=300, vocab=vocab, pretrained_file=str(tmp_path / "missing.txt"))


def test_paper_size_with_glove_indexes_cased_words_and_uses_the_fallback(task_env, tmp_path):
    """SIZE paper as document-qa: cased indexer, the fallback embedder on 300-d GloVe; GRU 100 baseline, 90 with
    ELMo."""
    from allennlp.common import Params
    from allennlp.common.plugins import import_plugins

    import_plugins()
    glove = tmp_path / "glove.840B.300d.txt"
    glove.write_text(_glove_line("What", 1.0, 300) + _glove_line("what", 2.0, 300))
    task_env(SIZE="paper", GLOVE_PATH=str(glove), NUM_EPOCHS="")
    params = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / "squad.jsonnet")).as_dict()
    assert params["dataset_reader"]["token_indexers"]["tokens"] == {"type": "single_id", "lowercase_tokens": False}
    words = params["model"]["text_field_embedder"]["token_embedders"]["tokens"]
    assert words == {"type": "glove_cased_fallback", "embedding_dim": 300, "pretrained_file": str(glove)}
    assert params["model"]["phrase_encoder"]["hidden_size"] == 100 and params["model"]["linear_dim"] == 200
    assert params["trainer"]["optimizer"] == {"type": "adadelta", "lr": 1.0, "rho": 0.95, "eps": 1e-8}
    assert params["trainer"]["num_epochs"] == 26 and params["trainer"]["patience"] is None
    task_env(ELMO="both")
    params = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / "squad.jsonnet")).as_dict()
    assert params["model"]["linear_dim"] == 180 and params["trainer"]["num_epochs"] == 24


@pytest.mark.parametrize("kind", ["exponential", "exponential_resumable"])
def test_the_moving_average_follows_the_model_after_a_checkpoint_is_loaded(kind, tmp_path):
    """allennlp's exponential average, loaded from a checkpoint (allennlp train --recover), takes the checkpoint's
    copies of the parameters for the live ones: the average stops following the model and validation runs on the raw
    weights. The one SQuAD's config names keeps following the model."""
    from allennlp.training.moving_average import MovingAverage

    import tasks.squad  # noqa: F401  (registers exponential_resumable)

    def fresh():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        return model, MovingAverage.by_name(kind)(list(model.named_parameters()), decay=0.5)

    model, average = fresh()
    average.apply()
    torch.save(average.state_dict(), tmp_path / "training_state.th")
    model, average = fresh()  # a new process: a new model, the checkpoint loaded into it
    start = model.weight.detach().clone()  # = the average in the checkpoint
    average.load_state_dict(torch.load(tmp_path / "training_state.th", weights_only=False))
    with torch.no_grad():
        model.weight.fill_(1.0)  # training goes on
    average.apply()  # shadow = 0.5 * old shadow + 0.5 * 1.0
    before = model.weight.detach().clone()
    average.assign_average_value()  # validation: the model takes the averages
    followed = not torch.equal(model.weight, before)
    assert followed == (kind == "exponential_resumable")
    if followed:
        assert torch.allclose(model.weight, 0.5 * start + 0.5)
