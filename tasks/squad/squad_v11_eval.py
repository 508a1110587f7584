"""The official SQuAD v1.1 evaluation (EM and F1), written out, and an AllenNLP metric that uses it.

Official v1.1 rules: normalise an answer by lowercasing, removing punctuation, removing the articles a/an/the and
collapsing whitespace; EM is normalised-string equality, F1 is the bag-of-tokens F1 of the normalised strings; each
question scores the max over its gold answers; the dataset score is the mean over questions (x100 in the script;
fractions here). Differs from allennlp-models' rc/tools/squad.py, which is the v2.0 script: there F1 of two answers
that both normalise to nothing is 1, in v1.1 it is 0.
"""
import re
import string
from collections import Counter
from typing import List, Sequence, Tuple

from allennlp.training.metrics import Metric

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    num_same = sum((Counter(prediction_tokens) & Counter(ground_truth_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_ground_truths(metric, prediction: str, ground_truths: Sequence[str]) -> float:
    return max(metric(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> Tuple[float, float]:
    """Mean EM and F1 (fractions) of predictions against each question's gold answers."""
    em = sum(max_over_ground_truths(exact_match_score, p, g) for p, g in zip(predictions, gold_answers))
    f1 = sum(max_over_ground_truths(f1_score, p, g) for p, g in zip(predictions, gold_answers))
    return em / len(predictions), f1 / len(predictions)


@Metric.register("squad_v11")
class SquadV11EmF1(Metric):
    def __init__(self) -> None:
        self.reset()

    def __call__(self, predictions: List[str], gold_answers: List[List[str]]) -> None:
        for prediction, answers in zip(predictions, gold_answers):
            self._em += max_over_ground_truths(exact_match_score, prediction, answers)
            self._f1 += max_over_ground_truths(f1_score, prediction, answers)
            self._count += 1

    def get_metric(self, reset: bool = False):
        em = self._em / self._count if self._count else 0.0
        f1 = self._f1 / self._count if self._count else 0.0
        if reset:
            self.reset()
        return {"em": em, "f1": f1}

    def reset(self) -> None:
        self._em = 0.0
        self._f1 = 0.0
        self._count = 0
