"""Word sense disambiguation with the biLM's layers (Sec. 5.3, Table 5).

As the paper: every SemCor instance gets each layer's vector, averaged per sense key into a centroid; a test
instance takes the nearest centroid (cosine; the paper does not name its distance) among the senses that SemCor has
for its lemma and POS, and WordNet's first sense when SemCor has none. A multiword instance ("took place") is the
mean of its words' vectors. An instance with several gold keys adds its vector to each key's centroid.

Scoring follows the framework's Scorer.java (Raganato et al. 2017; HSLCY/GlossBERT
Evaluation_Datasets/Scorer.java, ``score``): an answered instance scores the fraction of its answers that are gold
keys; answers for ids not in the gold file are skipped; P = ok / answered, R = ok / gold instances, F1 their harmonic
mean.
"""
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from probes.layers import layer_names
from probes.readers import WsdSentence
from probes.wordnet import WordNet


def score(gold: Dict[str, Sequence[str]], answers: Dict[str, Sequence[str]]) -> Dict[str, float]:
    """P, R, F1 (in %) of ``answers`` against ``gold`` (id -> keys), by the framework's rules."""
    ok = notok = 0.0
    for instance_id, keys in answers.items():
        if instance_id not in gold or not keys:
            continue
        good = sum(k in set(gold[instance_id]) for k in keys)
        ok += good / len(keys)
        notok += (len(keys) - good) / len(keys)
    p = ok / (ok + notok) if ok + notok else 0.0
    r = ok / len(gold) if gold else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"P": 100 * p, "R": 100 * r, "F1": 100 * f1, "instances": len(gold),
            "answered": sum(1 for i in answers if i in gold and answers[i])}


def unit_counts(gold: Dict[str, Sequence[str]], answers: Dict[str, Sequence[str]], ids: Sequence[str]) -> List[list]:
    """Per instance [ok, answered, 1], which summed give ``score``'s P = ok / answered and R = ok / instances: the
    units of the paired bootstrap (runner/analysis/stats.py metric wsd_f1)."""
    counts = []
    for instance_id in ids:
        keys = answers.get(instance_id) or []
        ok = sum(k in set(gold[instance_id]) for k in keys) / len(keys) if keys else 0.0
        counts.append([ok, 1 if keys else 0, 1])
    return counts


def instance_vectors(sentence: WsdSentence, layers: np.ndarray) -> List[Tuple[int, np.ndarray]]:
    """(token position, (n_layers, dim) vector) of each instance of a sentence; ``layers`` is (L, n_words, D)."""
    out = []
    for position, (token, (start, end)) in enumerate(zip(sentence.tokens, sentence.spans())):
        if token.instance_id:
            out.append((position, layers[:, start:end].mean(axis=1)))
    return out


class SenseCentroids:
    """Per layer, the mean vector of every SemCor sense key, and the keys seen per (lemma, POS)."""

    def __init__(self, n_layers: int, dim: int):
        self.sums: Dict[str, np.ndarray] = {}
        self.counts: Dict[str, int] = defaultdict(int)
        self.candidates: Dict[Tuple[str, str], List[str]] = defaultdict(list)
        self.shape = (n_layers, dim)

    def add(self, lemma: str, pos: str, keys: Sequence[str], vector: np.ndarray) -> None:
        for key in keys:
            if key not in self.sums:
                self.sums[key] = np.zeros(self.shape, dtype=np.float64)
                self.candidates[(lemma.lower(), pos)].append(key)
            self.sums[key] += vector
            self.counts[key] += 1

    def matrices(self, lemma: str, pos: str) -> Tuple[List[str], Optional[np.ndarray]]:
        """The candidate keys of (lemma, POS) and their unit-length centroids (n_layers, n_keys, dim)."""
        keys = self.candidates.get((lemma.lower(), pos), [])
        if not keys:
            return [], None
        centroids = np.stack([self.sums[k] / self.counts[k] for k in keys], axis=1)
        return keys, _unit(centroids)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def nearest_sense(keys: List[str], unit_centroids: np.ndarray, vector: np.ndarray) -> List[str]:
    """Per layer, the key whose centroid has the largest cosine with ``vector`` (L, D); ties: the first key."""
    similarity = np.einsum("lkd,ld->lk", unit_centroids, _unit(vector))
    return [keys[int(j)] for j in similarity.argmax(axis=1)]


def disambiguate(centroids: SenseCentroids, wordnet: WordNet, sentences: List[WsdSentence],
                 vectors: Dict[str, np.ndarray]) -> Tuple[List[Dict[str, List[str]]], Dict[str, List[str]], dict]:
    """Answers per layer (id -> [key]) by 1-NN with first-sense fallback, the first-sense baseline's answers, and
    counts (instances, how many fell back, how many WordNet cannot answer)."""
    n_layers = centroids.shape[0]
    per_layer: List[Dict[str, List[str]]] = [{} for _ in range(n_layers)]
    first: Dict[str, List[str]] = {}
    counts = {"instances": 0, "fallback": 0, "unanswerable": 0}
    for sentence in sentences:
        for token in sentence.tokens:
            if not token.instance_id:
                continue
            counts["instances"] += 1
            first_key = wordnet.first_sense(token.lemma, token.pos)
            if first_key:
                first[token.instance_id] = [first_key]
            keys, unit = centroids.matrices(token.lemma, token.pos)
            if keys:
                answers = nearest_sense(keys, unit, vectors[token.instance_id])
            else:
                counts["fallback"] += 1
                counts["unanswerable"] += first_key is None
                answers = [first_key] * n_layers
            for layer, key in enumerate(answers):
                if key:
                    per_layer[layer][token.instance_id] = [key]
    return per_layer, first, counts


def split_by_set(ids, default: str) -> Dict[str, List[str]]:
    """Instance ids of the framework's ALL file carry their set as a prefix (``senseval2.d000.s000.t000``)."""
    groups = defaultdict(list)
    for instance_id in ids:
        parts = instance_id.split(".")
        groups[parts[0] if len(parts) > 3 else default].append(instance_id)
    return dict(groups)


PAPER_SETS = ["senseval2", "senseval3", "semeval2013", "semeval2015"]  # Table 5: the four test sets (SE07 is dev)
PAPER_SET_NAME = "SE2+SE3+SE13+SE15"


def run_wsd(bilm, train_xml: str, eval_xmls: List[str], wordnet_dir: str, progress: bool = True) -> dict:
    """Centroids from ``train_xml`` (SemCor), answers and scores for every eval set, per layer."""
    import time
    from pathlib import Path

    from probes.readers import read_wsd_set

    started = time.time()
    wordnet = WordNet(wordnet_dir)
    train, train_keys = read_wsd_set(train_xml)
    tests = [(Path(x).name[:-len(".data.xml")], *read_wsd_set(x)) for x in eval_xmls]
    read_s = time.time() - started

    centroids = SenseCentroids(bilm.n_layers, bilm.dim)
    with_instances = [s for s in train if any(t.instance_id for t in s.tokens)]  # brownv: most have none
    for i, layers in bilm.layers([s.words() for s in with_instances], progress=progress):
        sentence = with_instances[i]
        for position, vector in instance_vectors(sentence, layers):
            token = sentence.tokens[position]
            centroids.add(token.lemma, token.pos, train_keys[token.instance_id], vector)
    train_s = time.time() - started - read_s

    sets, counts, units = {}, {}, {}
    for name, sentences, gold in tests:
        vectors = {}
        for i, layers in bilm.layers([s.words() for s in sentences]):
            for position, vector in instance_vectors(sentences[i], layers):
                vectors[sentences[i].tokens[position].instance_id] = vector
        per_layer, first, counts[name] = disambiguate(centroids, wordnet, sentences, vectors)
        groups = {name: list(gold)}
        parts = split_by_set(gold, name)
        if len(parts) > 1:
            groups.update(parts)
            if all(p in parts for p in PAPER_SETS):
                groups[PAPER_SET_NAME] = [i for p in PAPER_SETS for i in parts[p]]
        for group, ids in groups.items():
            gold_part = {i: gold[i] for i in ids}
            sets[group] = {"first_sense": score(gold_part, first),
                           "layers": [score(gold_part, answers) for answers in per_layer]}
        # the units of the set the paper reports (runner/analysis/claims.py probe_claim picks the same one)
        main = PAPER_SET_NAME if PAPER_SET_NAME in groups else name
        if not units:
            units = {"ids": groups[main], "metric": "wsd_f1", "set": main, "counts": {
                layer: unit_counts(gold, answers, groups[main])
                for layer, answers in zip(layer_names(bilm.n_layers), per_layer)}}
    return {"probe": "wsd", "layer_names": layer_names(bilm.n_layers), "sets": sets, "counts": counts,
            "units": {"test": units},
            "train": {"file": str(train_xml), "sentences": len(train), "instances": len(train_keys),
                      "senses": len(centroids.sums), "lemma_pos": len(centroids.candidates)},
            "eval": [str(x) for x in eval_xmls], "wordnet": str(wordnet_dir), "biLM": bilm.describe(),
            "timing_s": {"read": round(read_s, 1), "semcor_centroids": round(train_s, 1),
                         "total": round(time.time() - started, 1)}}
