"""The coreference metric in two views: without gold singletons (``coref_f1``, Table 1) and with them (LitBank's).

OntoNotes' CoNLL-2012 data, on which the paper scored, annotates no singleton (a cluster of one mention); LitBank,
the small profile's data, annotates them (Bamman, Lewke and Mansoor 2020). Lee et al. (2017)'s model never predicts a
singleton: allennlp-models builds the predicted clusters from antecedent links only (conll_coref_scores.py:99-125).

- ``CorefScores`` (the model's ``_conll_coref_scores``): allennlp-models' ``ConllCorefScores`` (MUC, its B3, CEAF-e)
  fed the gold clusters of two or more mentions, as the OntoNotes key has; this view is ``coref_f1`` and the
  per-document counts of the paired bootstrap (tasks/predictions.py). On data without singletons it is allennlp-models'
  metric unchanged.
- ``CorefScores.with_singletons``: the same predictions against every gold cluster, LitBank's own convention (its
  evaluation runs the reference scorer on the full key: dbamman/lrec2020-coref README). allennlp-models' B3 (from
  deep-coref) skips singleton clusters on both sides (conll_coref_scores.py:190-191, 198), which leaves gold
  singletons out of B3 recall; this view uses B3 as Bagga and Baldwin (1998) and the reference scorer define it
  (``b_cubed``). MUC ignores singletons by definition; CEAF-e keeps gold singletons already (:245 drops predicted
  ones only).
"""
from collections import Counter
from typing import Dict, List

from allennlp_models.coref.metrics.conll_coref_scores import ConllCorefScores, Scorer

NAMES = ("muc", "b3", "ceafe")  # the order of the scorers in both views


def b_cubed(clusters, mention_to_other):
    """B3 (Bagga and Baldwin 1998) with every cluster counted, singletons included: for each cluster C of one side and
    each cluster D of the other, |C & D|^2 / |C|, summed (numerator), over the summed |C| (denominator). Called as
    allennlp-models' Scorer calls its b_cubed: (predicted, mention_to_gold) gives precision, (gold,
    mention_to_predicted) recall."""
    numerator, denominator = 0.0, 0
    for cluster in clusters:
        overlaps = Counter(mention_to_other[m] for m in cluster if m in mention_to_other)
        numerator += sum(n * n for n in overlaps.values()) / len(cluster)
        denominator += len(cluster)
    return numerator, denominator


def without_singletons(clusters: List) -> List:
    return [cluster for cluster in clusters if len(cluster) > 1]


class WithSingletonsScores(ConllCorefScores):
    """ConllCorefScores with the gold clusters as given and the B3 above."""

    def __init__(self, allow_singletons: bool = False) -> None:
        super().__init__(allow_singletons)
        self.reset()

    def reset(self) -> None:
        self.scorers = [Scorer(Scorer.muc), Scorer(b_cubed), Scorer(Scorer.ceafe)]


class CorefScores(ConllCorefScores):
    """The primary view (gold singletons dropped) in ``scorers``; the other in ``with_singletons``."""

    def __init__(self, allow_singletons: bool = False) -> None:
        super().__init__(allow_singletons)
        self.with_singletons = WithSingletonsScores(allow_singletons)

    def __call__(self, top_spans, antecedent_indices, predicted_antecedents, metadata_list):  # type: ignore
        primary = [dict(metadata, clusters=without_singletons(metadata["clusters"])) for metadata in metadata_list]
        super().__call__(top_spans, antecedent_indices, predicted_antecedents, primary)
        self.with_singletons(top_spans, antecedent_indices, predicted_antecedents, metadata_list)

    def reset(self) -> None:
        super().reset()  # called by get_metric(reset=True)
        self.with_singletons.reset()

    def f1s(self) -> Dict[str, float]:
        """MUC, B3 and CEAF-e F1 of both views and the with-singletons mean (``coref_f1`` comes from get_metric)."""
        f1s = {f"{name}_f1": scorer.get_f1() for name, scorer in zip(NAMES, self.scorers)}
        f1s.update({f"{name}_f1_with_singletons": scorer.get_f1()
                    for name, scorer in zip(NAMES, self.with_singletons.scorers)})
        f1s["coref_f1_with_singletons"] = self.with_singletons.get_metric()[2]
        return f1s
