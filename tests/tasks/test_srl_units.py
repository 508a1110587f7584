"""The SRL per-predicate units (tasks/predictions.py ``srl_eval_counts``) against the real srl-eval.pl, run by
allennlp-models' SrlEvalScorer as the SRL model runs it: same correct / excess / missed totals, hence the same F1."""
import random
import shutil

import pytest
from allennlp_models.structured_prediction.metrics.srl_eval_scorer import SrlEvalScorer
from allennlp_models.structured_prediction.models.srl import convert_bio_tags_to_conll_format

from tasks.predictions import srl_eval_counts

needs_perl = pytest.mark.skipif(shutil.which("perl") is None, reason="perl is needed for srl-eval.pl")

LABELS = ["ARG0", "ARG1", "ARG2", "ARGM-TMP", "ARGM-LOC", "C-ARG1", "C-ARG0", "R-ARG0", "C-V"]
TAGS = ["O"] + [f"{bio}-{label}" for label in LABELS + ["V"] for bio in "BI"]


def _perl_totals(predicates):
    """[correct, excess, missed] summed over the predicates (words, verb index, pred tags, gold tags), as the SRL
    model feeds them to SrlEvalScorer (one call: one srl-eval.pl run)."""
    scorer = SrlEvalScorer(ignore_classes=["V"])
    verbs, sentences, pred, gold = zip(*predicates)
    scorer(list(verbs), list(sentences), [convert_bio_tags_to_conll_format(t) for t in pred],
           [convert_bio_tags_to_conll_format(t) for t in gold])
    counts = [sum(c.values()) for c in (scorer._true_positives, scorer._false_positives, scorer._false_negatives)]
    return counts, scorer.get_metric()["f1-measure-overall"]


def _ours(predicates):
    units = [srl_eval_counts(pred, gold, None if v is None else words[v]) for v, words, pred, gold in predicates]
    return [sum(column) for column in zip(*units)]


def _f1(counts):
    tp, fp, fn = counts
    precision, recall = tp / (tp + fp + 1e-13), tp / (tp + fn + 1e-13)  # SrlEvalScorer._compute_metrics
    return 2.0 * precision * recall / (precision + recall + 1e-13)


def _random_tags(rng, n, verb):
    """Well-formed BIO: segments of random labels, B-V at the verb."""
    tags, i = ["O"] * n, 0
    while i < n:
        length = rng.randint(1, 4)
        if rng.random() < 0.5:
            label = rng.choice(LABELS)
            tags[i:i + length] = [f"B-{label}"] + [f"I-{label}"] * (length - 1)
        i += length
    tags = tags[:n]
    if verb is not None:
        tags[verb] = "B-V"
        if verb + 1 < n and tags[verb + 1].startswith("I-"):
            tags[verb + 1] = "B" + tags[verb + 1][1:]
    return tags


def _mutate(rng, tags, edits):
    """Any tag anywhere: I- without its B-, I-X after B-Y, a C- before its head, a second V, ..."""
    tags = list(tags)
    for _ in range(edits):
        tags[rng.randrange(len(tags))] = rng.choice(TAGS)
    return tags


def _generated_predicates(count=3000, seed=0):
    rng = random.Random(seed)
    predicates = []
    for _ in range(count):
        n = rng.randint(1, 14)
        verb = None if rng.random() < 0.05 else rng.randrange(n)  # None: a sentence without predicate
        words = [f"w{i}" for i in range(n)]
        if verb is not None and rng.random() < 0.03:
            words[verb] = "-"  # srl-eval.pl reads a target column of "-" as no predicate
        gold = _random_tags(rng, n, verb)
        gold = _mutate(rng, gold, rng.choice([0, 0, 0, 1]))  # mostly well-formed, as the reader's
        if rng.random() < 0.3:
            pred = _mutate(rng, gold, rng.randint(0, 3))  # near the gold: many correct arguments
        else:
            pred = _mutate(rng, _random_tags(rng, n, verb if rng.random() < 0.9 else None), rng.randint(0, 2))
        predicates.append((verb, words, pred, gold))
    return predicates


@needs_perl
def test_counts_match_srl_eval_pl_on_generated_predicates():
    predicates = _generated_predicates()
    ours = _ours(predicates)
    perl, perl_f1 = _perl_totals(predicates)
    assert ours == perl
    assert _f1(ours) == pytest.approx(perl_f1, abs=1e-12)
    assert min(ours) > 500  # every kind of count is well exercised


S = ["w0", "w1", "w2", "w3", "w4", "w5"]
CASES = {  # (verb index, words, pred, gold): srl-eval.pl's [correct, excess, missed] for the one predicate
    "discontinuous argument, every piece right": (
        (1, S, ["B-ARG1", "B-V", "B-C-ARG1", "O", "O", "O"], ["B-ARG1", "B-V", "B-C-ARG1", "O", "O", "O"]), [1, 0, 0]),
    "discontinuous argument, a piece missing": (
        (1, S, ["B-ARG1", "B-V", "O", "O", "O", "O"], ["B-ARG1", "B-V", "B-C-ARG1", "O", "O", "O"]), [0, 1, 1]),
    "C- without its head is a plain argument": (
        (1, S, ["B-C-ARG1", "B-V", "O", "O", "O", "O"], ["B-ARG1", "B-V", "O", "O", "O", "O"]), [1, 0, 0]),
    "the verb particle C-V is part of V, not scored": (
        (1, S, ["O", "B-V", "B-C-V", "O", "O", "O"], ["O", "B-V", "O", "B-C-V", "O", "O"]), [0, 0, 0]),
    "R- is an argument of its own": (
        (1, S, ["B-R-ARG0", "B-V", "O", "O", "O", "O"], ["B-ARG0", "B-V", "O", "O", "O", "O"]), [0, 1, 1]),
    "no predicate: nothing scored": ((None, S, ["B-ARG0", "O", "O", "O", "O", "O"], ["O"] * 6), [0, 0, 0]),
    "I- without B- starts an argument": (
        (1, S, ["I-ARG0", "B-V", "I-ARG1", "I-ARG1", "O", "O"], ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "O", "O"]),
        [2, 0, 0]),
    "I-X after B-Y starts an X": (
        (1, S, ["O", "B-V", "B-ARG1", "I-ARG2", "O", "O"], ["O", "B-V", "B-ARG1", "B-ARG2", "O", "O"]), [2, 0, 0]),
}


@needs_perl
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_of_srl_eval_pl(name):
    predicate, expected = CASES[name]
    assert _perl_totals([predicate])[0] == expected
    assert _ours([predicate]) == expected


def test_counts_without_perl():
    """The rules above, for a checkout without perl."""
    for predicate, expected in CASES.values():
        assert _ours([predicate]) == expected
