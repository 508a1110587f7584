"""Nearest neighbours of a polysemous word (Sec. 5.3, Table 4; the paper used "play").

- Context-free: the word's nearest words by cosine of a context-free vector: the biLM's token layer (the first half
  of layer 0, [x; x]) over the distinct words of the corpus, and GloVe when the user gives a GloVe text file.
- In context: for each source sentence, the SemCor sentences whose occurrence of the word has the top layer's vector
  nearest (cosine) to the word's vector in the source sentence; with the occurrence's SemCor sense key when it is an
  annotated instance, so the table shows whether the neighbour has the source's sense.
"""
import time
from collections import Counter
from typing import Dict, List, Optional

import numpy as np

from elmo_module.errors import ElmoInputError
from probes.readers import read_wsd_set

# Table 4's two source sentences, as far as the paper prints them (it elides their ends with "{...}")
PAPER_SOURCES = ["Chico Ruiz made a spectacular play on Alusik 's grounder",
                 "Olivia De Havilland signed to do a Broadway play for Garson"]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _contains(sentence: List[str], part: List[str]) -> bool:
    """True if ``part`` occurs in ``sentence`` as a contiguous run of tokens."""
    return any(sentence[i:i + len(part)] == part for i in range(len(sentence) - len(part) + 1))


def nearest_words(word: str, vocabulary: List[str], vectors: np.ndarray, top: int) -> List[list]:
    """The ``top`` words by cosine with ``word`` (which must be in ``vocabulary``), the word itself left out."""
    unit = _unit(vectors)
    similarity = unit @ unit[vocabulary.index(word)]
    order = [int(j) for j in np.argsort(-similarity, kind="stable") if vocabulary[j] != word][:top]
    return [[vocabulary[j], round(float(similarity[j]), 4)] for j in order]


def read_glove(path, wanted: set) -> Dict[str, np.ndarray]:
    """The vectors of ``wanted`` words from a GloVe text file (``word v1 v2 ...`` per line)."""
    vectors, dim = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if word not in wanted:
                continue
            values = rest.split(" ")
            try:
                vector = np.array(values, dtype=np.float32)
            except ValueError:
                raise ElmoInputError(f"{path}:{number}: expected 'word' and numbers, found {line[:60]!r}") from None
            if dim is not None and vector.size != dim:
                raise ElmoInputError(f"{path}:{number}: expected {dim} numbers, found {vector.size}")
            dim = vector.size
            vectors[word] = vector
    return vectors


def run_neighbours(bilm, semcor_xml: str, word: str = "play", sources: Optional[List[str]] = None, top: int = 10,
                   nearest: int = 1, min_count: int = 2, glove: str = "") -> dict:
    started = time.time()
    sources = sources or PAPER_SOURCES
    sentences, keys = read_wsd_set(semcor_xml)
    words = [s.words() for s in sentences]
    counts = Counter(w for ws in words for w in ws)
    vocabulary = sorted(w for w, c in counts.items() if c >= min_count or w == word)
    if word not in vocabulary:
        raise ElmoInputError(f"{semcor_xml}: expected the word {word!r} in the corpus, found no occurrence")

    token_vectors = np.zeros((len(vocabulary), bilm.dim // 2), dtype=np.float32)
    for i, layers in bilm.layers([[w] for w in vocabulary]):
        token_vectors[i] = layers[0, 0, :bilm.dim // 2]  # layer 0 is [x; x]: x is the context-free vector
    result = {"probe": "neighbours", "word": word, "vocabulary": len(vocabulary), "min_count": min_count,
              "context_free": {"biLM token layer": nearest_words(word, vocabulary, token_vectors, top)}}
    if glove:
        found = read_glove(glove, set(vocabulary))
        if word not in found:
            raise ElmoInputError(f"{glove}: expected a vector for {word!r}, found none")
        glove_vocab = sorted(found)
        result["context_free"]["GloVe"] = nearest_words(word, glove_vocab, np.stack([found[w] for w in glove_vocab]),
                                                        top)

    # every occurrence of the word in SemCor, with the sense key of the instance that covers it (if any)
    occurrences = []  # (sentence index, word position, sense keys)
    for i, sentence in enumerate(sentences):
        for token, (start, end) in zip(sentence.tokens, sentence.spans()):
            for position in range(start, end):
                if words[i][position] == word:
                    occurrences.append((i, position, keys.get(token.instance_id, []) if token.instance_id else []))
    wanted = sorted({i for i, _, _ in occurrences})
    top_layer = {}
    for j, layers in bilm.layers([words[i] for i in wanted]):
        top_layer[wanted[j]] = layers[-1]
    candidates = _unit(np.stack([top_layer[i][p] for i, p, _ in occurrences]))

    contextual = []
    for text in sources:
        tokens = text.split()
        if word not in tokens:
            raise ElmoInputError(f"source sentence {text!r}: expected the word {word!r} in it, found none")
        _, layers = next(bilm.layers([tokens]))
        similarity = candidates @ _unit(layers[-1][tokens.index(word)])
        # the paper's source sentences are (cut-down) SemCor sentences: a SemCor sentence that contains the source
        # is the source itself, not a neighbour of it
        similarity[[_contains(words[i], tokens) for i, _, _ in occurrences]] = -np.inf
        order = [j for j in np.argsort(-similarity, kind="stable")[:nearest] if np.isfinite(similarity[j])]
        contextual.append({"source": text, "nearest": [
            {"sentence": " ".join(words[occurrences[j][0]]), "sentence_id": sentences[occurrences[j][0]].sentence_id,
             "cosine": round(float(similarity[j]), 4), "sense_keys": occurrences[j][2]} for j in order]})
    result.update({"contextual": contextual, "layer": "top", "semcor_occurrences": len(occurrences),
                   "semcor": str(semcor_xml), "glove": glove or None, "biLM": bilm.describe(),
                   "timing_s": {"total": round(time.time() - started, 1)}})
    return result
