"""Each task's metric and how it is shown, the ground floor every job reads: the metric of summed per-example
counts (what the predictions files hold; the paired bootstrap recomputes it on every resample), a split's metric
from a predictions file, the unit allennlp reports it in, and its text in the tables and progress lines."""
from typing import Optional

import numpy as np

DECIMALS = {"ner": 2}  # Table 1 reports NER F1 with 2 decimals, every other task with 1
# shown beside the task's metric (SQuAD: F1, and EM beside it, official v1.1 script; coref: the CoNLL average without
# gold singletons, and with them beside it, tasks/coref/metric.py), with the label of SECOND_LABEL (else upper case)
SECOND_METRIC = {"squad": "em", "coref": "coref_f1_with_singletons"}
SECOND_LABEL = {"coref_f1_with_singletons": "with singletons"}


def _f1(p_num, p_den, r_num, r_den):
    precision = np.divide(p_num, p_den, out=np.zeros_like(p_num, dtype=float), where=p_den > 0)
    recall = np.divide(r_num, r_den, out=np.zeros_like(r_num, dtype=float), where=r_den > 0)
    total = precision + recall
    return np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)


def _ratio(num, den):
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)


# metric -> (the per-unit counts it is computed from, the metric in % of summed counts (last axis = the counts))
METRICS = {
    "accuracy": (("correct", "total"), lambda s: 100 * _ratio(s[..., 0], s[..., 1])),
    # conlleval / srl-eval.pl: F1 of the summed true positives, false positives and false negatives
    "span_f1": (("tp", "fp", "fn"), lambda s: 100 * _ratio(2 * s[..., 0], 2 * s[..., 0] + s[..., 1] + s[..., 2])),
    # SQuAD v1.1's evaluate script: the mean over questions of each question's best F1 (or EM) over its answers
    "mean": (("score", "n"), lambda s: 100 * _ratio(s[..., 0], s[..., 1])),
    # CoNLL-2012: mean of the MUC, B3 and CEAF-e F1, each from precision/recall numerators and denominators summed
    # over documents (allennlp-models ConllCorefScores, reference-coreference-scorers); counted without gold
    # singletons, as coref_f1 (tasks/coref/metric.py)
    "conll_coref": (tuple(f"{m}_{part}" for m in ("muc", "b3", "ceafe")
                          for part in ("p_num", "p_den", "r_num", "r_den")),
                    lambda s: 100 * sum(_f1(*(s[..., 4 * j + i] for i in range(4))) for j in range(3)) / 3),
    # the WSD framework's Scorer.java: P = correct / answered, R = correct / instances
    "wsd_f1": (("correct", "answered", "instances"),
               lambda s: 100 * _f1(s[..., 0], s[..., 1], s[..., 0], s[..., 2])),
}


def metric_value(metric: str, counts) -> np.ndarray:
    """The metric (in %) of summed counts; counts' last axis holds METRICS[metric][0]'s fields."""
    return METRICS[metric][1](np.asarray(counts, dtype=float))


def split_metric(data: dict, split: str) -> float:
    """The task's metric (in %) of one split of a predictions file, from its per-unit counts."""
    counts = data["splits"][split]["counts"]
    return float(metric_value(data["metric"], [sum(c) for c in zip(*counts)]))


def percent(value: float) -> float:
    """A metric in % (allennlp reports this project's metrics as fractions; the tables and tests use points)."""
    return 100.0 * value if value <= 1.0 else float(value)


def in_units_of(percent: float, like: float) -> float:
    """``percent`` in the unit allennlp reported ``like`` in (a fraction for every task metric of this project)."""
    return percent / 100.0 if like <= 1.0 else percent


def mean_std_text(mean: float, std: Optional[float], decimals: int) -> str:
    return f"{mean:.{decimals}f}" + (f" ± {std:.{decimals}f}" if std is not None else "")


def metric_text(task: str, value: float) -> str:
    """One run's metric as its task's tables show it (the runner's progress lines): in %, with DECIMALS."""
    return mean_std_text(percent(value), None, DECIMALS.get(task, 1))
