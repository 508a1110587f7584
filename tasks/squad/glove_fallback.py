"""Fixed GloVe word vectors looked up as document-qa did: the cased word, else its lowercase form, else zeros.

document-qa (the code behind the paper's SQuAD numbers) keeps words cased and, for a word missing from
glove.840B.300d, falls back to the vector of its lowercase form; a word with neither gets the unknown vector, which
is zero and not trained (docqa/nn/embedder.py:206-219 lookup, 264-277 matrix; docqa/elmo/ablate_elmo_model.py:55
``FixedWordEmbedder(word_vec_init_scale=0, learn_unk=False)``). allennlp's ``embedding`` looks each vocabulary
token up exactly and gives a missing one a random vector, so with cased tokens "Paris" would miss "paris", and with
lowercased tokens (our earlier setting) "US" and "us" share one vector. This embedder builds one fixed row per
vocabulary token (cased indexer) with document-qa's rule. ``pretrained_file`` and ``embedding_dim`` keep
``embedding``'s names (the preflight reads them); with no file (a model loaded from its archive, where allennlp
removes ``pretrained_file``) the rows come from the saved weights.
"""
import gzip
import os
from typing import Dict, Optional

import numpy
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.modules.token_embedders import Embedding, TokenEmbedder

from tasks.line_errors import empty_file_error, input_error


def read_cased_with_lowercase_fallback(path: str, embedding_dim: int, tokens: Dict[int, str]) -> torch.Tensor:
    """(len(tokens) rows) index -> the vector of the token, else of its lowercase form, else zeros.
    ``path``: a GloVe text file, plain or .gz; only lines whose word's lowercase form is wanted are parsed."""
    if not os.path.isfile(path):
        raise ConfigurationError(f"{path}: GloVe file not found (GLOVE_PATH)")
    wanted = {token.lower() for token in tokens.values()}
    vectors = {}
    line_number = 0
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        for line_number, line in enumerate(lines, start=1):
            word, _, rest = line.rstrip().partition(" ")
            if line_number == 1:  # a wrong file (6B-50d for 840B-300d, a word2vec header) shows on line 1
                found = len(rest.split(" "))
                if found != embedding_dim:
                    raise input_error(path, 1, f"a word and {embedding_dim} numbers (GloVe text format)",
                                      f"{found} numbers after {word!r}")
            if word.lower() in wanted and word not in vectors:
                values = rest.split(" ")
                if len(values) != embedding_dim:
                    raise input_error(path, line_number, f"{embedding_dim} numbers after {word!r}",
                                      f"{len(values)}")
                vectors[word] = numpy.asarray(values, dtype="float32")
    if line_number == 0:
        raise empty_file_error(path, f"GloVe lines of a word and {embedding_dim} numbers")
    weight = torch.zeros(max(tokens) + 1, embedding_dim)
    for index, token in tokens.items():
        vector = vectors.get(token, vectors.get(token.lower()))
        if vector is not None:
            weight[index] = torch.from_numpy(vector)
    return weight


@TokenEmbedder.register("glove_cased_fallback")
class GloveCasedFallbackEmbedding(Embedding):
    """A fixed word embedding from a GloVe text file with document-qa's cased-then-lowercase lookup (see module)."""

    def __init__(self, embedding_dim: int, vocab: Vocabulary, pretrained_file: Optional[str] = None,
                 vocab_namespace: str = "tokens") -> None:
        tokens = vocab.get_index_to_token_vocabulary(vocab_namespace)
        if pretrained_file:
            weight = read_cased_with_lowercase_fallback(pretrained_file, embedding_dim, tokens)
        else:
            weight = torch.zeros(len(tokens), embedding_dim)
        super().__init__(embedding_dim=embedding_dim, weight=weight, trainable=False,
                         vocab_namespace=vocab_namespace, vocab=vocab)
