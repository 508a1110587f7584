"""Coreference (paper Sec. 4): MUC, B3 and CEAF-phi4 on a small clustering against hand-computed values, the checked
CoNLL-2012 document reader (sample tree, real format sample, bad input), and train -> evaluate -> save/load for the
baseline and each ELMo placement."""
import json
import os

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.commands.evaluate import evaluate_from_archive
from allennlp_models.coref.metrics.conll_coref_scores import ConllCorefScores

from tasks.coref.reader import CheckedCorefReader
from tasks.elmo_input_sized import elmo_output_dim
from tests.conftest import REPO_ROOT, allennlp_evaluate, predictions_after_reload, shared_data

SAMPLE = str(REPO_ROOT / "tasks" / "coref" / "sample_data")
TINY_OPTIONS = str(REPO_ROOT / "elmo_module" / "bundled" / "tiny_options.json")




# --- the metrics -------------------------------------------------------------------------------------------------

def test_muc_b3_ceaf_match_hand_computed_values():
    # Mentions (one-word spans): a=(0,0) b=(2,2) c=(4,4) d=(6,6) e=(8,8) f=(10,10).
    # Gold: G1 = {a, b, c}, G2 = {d, e}.  Predicted: P1 = {a, b, f}, P2 = {c, d, e} (f is not a gold mention).
    # The model's output encodes the prediction as antecedent links: b->a, f->b, d->c, e->d; a and c start clusters.
    top_spans = torch.tensor([[[0, 0], [2, 2], [4, 4], [6, 6], [8, 8], [10, 10]]])
    antecedent_indices = torch.arange(6).expand(1, 6, 6)  # candidate k of every span is span k
    predicted_antecedents = torch.tensor([[-1, 0, -1, 2, 3, 1]])
    gold = [[(0, 0), (2, 2), (4, 4)], [(6, 6), (8, 8)]]
    metric = ConllCorefScores()
    metric(top_spans, antecedent_indices, predicted_antecedents, [{"clusters": gold}])
    muc, b3, ceafe = (scorer.get_prf() for scorer in metric.scorers)

    # MUC (Vilain et al. 1995): R = sum_G (|G| - |partitions of G by P|) / sum_G (|G| - 1).
    #   G1 is split into {a,b} | {c} -> 3 - 2 = 1; G2 stays whole -> 2 - 1 = 1;  R = 2 / (2 + 1) = 2/3.
    #   P = the same with roles swapped, unmatched mentions are their own partition:
    #   P1 = {a,b} | {f} -> 3 - 2 = 1; P2 = {c} | {d,e} -> 3 - 2 = 1;  P = 2 / (2 + 2) = 1/2.
    #   F1 = 2 * 1/2 * 2/3 / (1/2 + 2/3) = 4/7.
    assert muc == pytest.approx((1 / 2, 2 / 3, 4 / 7))
    # B3 (Bagga & Baldwin 1998): per mention |P(m) & G(m)| / |G(m)| (recall, over gold mentions) and / |P(m)|
    # (precision, over predicted mentions).
    #   R = (2/3 [a] + 2/3 [b] + 1/3 [c] + 2/2 [d] + 2/2 [e]) / 5 = (11/3) / 5 = 11/15.
    #   P = (2/3 [a] + 2/3 [b] + 0 [f] + 1/3 [c] + 2/3 [d] + 2/3 [e]) / 6 = 3 / 6 = 1/2.
    #   F1 = 2 * 1/2 * 11/15 / (1/2 + 11/15) = 22/37.
    assert b3 == pytest.approx((1 / 2, 11 / 15, 22 / 37))
    # CEAF-phi4 (Luo 2005): phi4(G, P) = 2 |G & P| / (|G| + |P|); best one-to-one alignment of clusters.
    #   phi4(G1,P1) = 4/6 = 2/3, phi4(G1,P2) = 2/6, phi4(G2,P1) = 0, phi4(G2,P2) = 4/5.
    #   Best alignment G1-P1, G2-P2: similarity = 2/3 + 4/5 = 22/15 (the other one gives 1/3).
    #   R = 22/15 / 2 gold clusters = 11/15; P = 22/15 / 2 predicted clusters = 11/15; F1 = 11/15.
    assert ceafe == pytest.approx((11 / 15, 11 / 15, 11 / 15))
    # The paper's coref number is the mean of the three F1s (Table 1, "average F1").
    precision, recall, f1 = metric.get_metric()
    assert f1 == pytest.approx((4 / 7 + 22 / 37 + 11 / 15) / 3)  # = 0.63312
    assert f1 == pytest.approx(0.633119, abs=1e-6)


def test_perfect_prediction_scores_one():
    top_spans = torch.tensor([[[0, 0], [2, 2], [4, 4]]])
    metric = ConllCorefScores()
    metric(top_spans, torch.arange(3).expand(1, 3, 3), torch.tensor([[-1, 0, 1]]),
           [{"clusters": [[(0, 0), (2, 2), (4, 4)]]}])
    assert metric.get_metric() == pytest.approx((1.0, 1.0, 1.0))


# --- reader ------------------------------------------------------------------------------------------------------

def test_reader_reads_documents_of_the_sample_tree():
    instances = list(CheckedCorefReader(max_span_width=10).read(os.path.join(SAMPLE, "train")))
    assert len(instances) == 2  # one file with two document parts
    first = instances[0]
    words = first["metadata"]["original_text"]
    assert words[:4] == ["Anna", "met", "her", "brother"] and len(words) == 8 + 8 + 8 + 4
    # Sentence-relative spans become document offsets: "He" is word 0 of sentence 2 -> 8; "him" word 2 of
    # sentence 4 -> 8 + 8 + 8 + 2 = 26. Cluster 1 = her brother / He / him.
    clusters = sorted(sorted(cluster) for cluster in first["metadata"]["clusters"])
    assert [(2, 3), (8, 8), (26, 26)] in clusters
    assert [(0, 0), (2, 2), (10, 10), (24, 24)] in clusters  # Anna / her / her / Anna
    labelled = {(span.span_start, span.span_end): label
                for span, label in zip(first["spans"].field_list, first["span_labels"].labels)}
    assert labelled[(2, 3)] == labelled[(8, 8)] == labelled[(26, 26)] != -1
    assert labelled[(1, 1)] == -1  # "met" is in no cluster


def test_reader_reads_real_format_sample_like_allennlp_models():
    from allennlp_models.coref.dataset_readers.conll import ConllCorefReader

    format_sample = shared_data("format_samples", "coref_conll2012")
    path = str(format_sample / "coref.gold_conll")
    ours = list(CheckedCorefReader(max_span_width=10).read(str(format_sample)))  # the directory ...
    theirs = list(ConllCorefReader(max_span_width=10).read(path))  # ... and allennlp-models on its one file
    assert len(ours) == len(theirs) > 0
    for mine, reference in zip(ours, theirs):
        assert mine["metadata"]["original_text"] == reference["metadata"]["original_text"]
        assert sorted(map(sorted, mine["metadata"]["clusters"])) == sorted(
            map(sorted, reference["metadata"]["clusters"]))


def _document(tmp_path, coref_cells):
    words = ["Ann", "saw", "herself", "."]
    lines = [f"x 0 {i} {word} XX * - - - - * {cell}" for i, (word, cell) in enumerate(zip(words, coref_cells))]
    path = tmp_path / "doc.gold_conll"
    path.write_text("#begin document (x); part 000\n" + "\n".join(lines) + "\n\n#end document\n")
    return path


def test_reader_accepts_a_good_document(tmp_path):
    [instance] = CheckedCorefReader(max_span_width=3).read(str(_document(tmp_path, ["(1)", "-", "(1)", "-"])))
    assert [sorted(cluster) for cluster in instance["metadata"]["clusters"]] == [[(0, 0), (2, 2)]]


@pytest.mark.parametrize("cells, message", [
    (["(1", "-", "(1)", "-"], r"doc\.gold_conll:6: expected coreference span '\(1' to be closed"),
    (["(1)", "-", "1)", "-"], r"doc\.gold_conll:4: expected '1\)' .* to close a span .* found none open"),
    (["(1)", "-", "(a)", "-"], r"doc\.gold_conll:4: expected '-' or '\|'-joined .* found '\(a\)'"),
])
def test_bad_coreference_cells_name_file_and_line(tmp_path, cells, message):
    with pytest.raises(ConfigurationError, match=message):
        list(CheckedCorefReader(max_span_width=3).read(str(_document(tmp_path, cells))))


def test_wrong_column_count_and_empty_file_are_errors(tmp_path):
    path = _document(tmp_path, ["(1)", "-", "(1)", "-"])
    lines = path.read_text().split("\n")
    lines[2] = lines[2].rsplit(" ", 2)[0] + " -"  # drop the named-entity column of word 1 (line 3)
    path.write_text("\n".join(lines))
    with pytest.raises(ConfigurationError, match=r"doc\.gold_conll:3: expected at least 12 .* found 11"):
        list(CheckedCorefReader(max_span_width=3).read(str(path)))
    path.write_text("#begin document (x); part 000\n#end document\n")
    with pytest.raises(ConfigurationError, match=r"doc\.gold_conll: expected CoNLL-2012 sentences, found none"):
        list(CheckedCorefReader(max_span_width=3).read(str(path)))


def test_reader_reads_hub_records_one_document_per_part(monkeypatch, tmp_path):
    from tests.test_task_srl import HUB_RECORD, fake_hub

    fake_hub(monkeypatch, tmp_path, [HUB_RECORD], config="english_v4")
    first, second = CheckedCorefReader(max_span_width=3).read("hf:ontonotes/conll2012_ontonotesv5:english_v4:test")
    assert first["metadata"]["original_text"] == ["Ann", "sold", "it", ".", "She", "left", "."]
    assert [sorted(c) for c in first["metadata"]["clusters"]] == [[(0, 0), (4, 4)]]  # "She" = word 0 of sentence 2
    assert second["metadata"]["original_text"] == ["Bob", "ran", "."]  # part 1 is its own document
    assert second["metadata"]["clusters"] == []


# --- train, evaluate, save/load ----------------------------------------------------------------------------------

def _check_reload_and_metrics(model, run_dir):
    """Save -> load gives the same predictions; returns the end-of-training metrics."""
    keys = ["top_spans", "antecedent_indices", "predicted_antecedents", "clusters"]
    before, after = predictions_after_reload(model, run_dir / "model.tar.gz", os.path.join(SAMPLE, "test"), keys)
    for trained, reloaded in zip(before, after):
        for key, value, reloaded_value in zip(keys, trained, reloaded):
            if key == "clusters":
                assert value == reloaded_value
            else:
                assert (torch.as_tensor(value) == torch.as_tensor(reloaded_value)).all(), key
    return json.loads((run_dir / "metrics.json").read_text())


def test_baseline_loss_falls_and_evaluate_reports_average_f1(train_task, tmp_path):
    # lr 0.01 (paper: 0.001) so the tiny model moves within seconds; no early stopping or lr decay on 2 documents.
    overrides = {"trainer.optimizer.lr": 0.01, "trainer.patience": None, "trainer.learning_rate_scheduler": None}
    model, run_dir = train_task("coref", overrides=overrides, NUM_EPOCHS=20)
    metrics = _check_reload_and_metrics(model, run_dir)
    first_epoch = json.loads((run_dir / "metrics_epoch_0.json").read_text())
    assert metrics["training_loss"] < 0.2 * first_epoch["training_loss"]
    evaluated = allennlp_evaluate(run_dir / "model.tar.gz", os.path.join(SAMPLE, "test"), tmp_path / "eval.json")
    for name in ("coref_f1", "muc_f1", "b3_f1", "ceafe_f1", "coref_precision", "coref_recall", "mention_recall"):
        assert 0.0 <= evaluated[name] <= 1.0, name
    assert evaluated["coref_f1"] == pytest.approx(
        (evaluated["muc_f1"] + evaluated["b3_f1"] + evaluated["ceafe_f1"]) / 3)
    assert evaluated["coref_f1"] == pytest.approx(metrics["test_coref_f1"])


@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_elmo_placements_train_evaluate_and_reload(train_task, placement):
    model, run_dir = train_task("coref", ELMO=placement)
    _check_reload_and_metrics(model, run_dir)
    evaluated = evaluate_from_archive(str(run_dir / "model.tar.gz"), os.path.join(SAMPLE, "test"))
    assert 0.0 <= evaluated["coref_f1"] <= 1.0
    elmo_dim = elmo_output_dim(TINY_OPTIONS)
    hidden, word_dim, char_dim, feature_size = 8, 8, 3 * 4, 4  # SIZE=tiny in coref.jsonnet
    token_dim = model._text_field_embedder.get_output_dim()
    assert token_dim == word_dim + char_dim + (elmo_dim if placement in ("input", "both") else 0)
    assert model._context_layer.get_input_dim() == token_dim
    # Output ELMo on the context layer: the span endpoints see [h; ELMo'] (Sec. 3.3).
    context_dim = model._context_layer.get_output_dim()
    assert context_dim == 2 * hidden + (elmo_dim if placement in ("output", "both") else 0)
    span_dim = 2 * context_dim + feature_size + token_dim
    assert model._mention_feedforward._module.get_input_dim() == span_dim
    assert model._antecedent_feedforward._module.get_input_dim() == 3 * span_dim + feature_size
    assert (run_dir / "elmo_mix_weights.json").exists()
