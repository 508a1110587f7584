"""The coreference reader: one instance per CoNLL-2012 document (paper Sec. 4, Coref; Lee et al. 2017).

allennlp-models' ``coref`` reader reads one file (the shared task's concatenated split); OntoNotes as distributed is a
directory tree of ``*_gold_conll`` files (one per source document, with its parts). This reader takes either a file
or a directory tree (files in sorted order), checks every file first (``tasks.srl.conll2012_format``: one-line errors
naming file and line instead of an IndexError from an unbalanced coreference bracket), and turns each document part
into allennlp-models' instance: the document's words, every candidate span up to ``max_span_width`` words inside a
sentence, and the gold cluster id of each span (-1 outside any cluster). ``hf:<dataset>:<config>:<split>`` reads the
Hugging Face hub copy instead (``tasks.srl.hub_ontonotes``).

``random_offset``: a document longer than ``max_sentences`` is cut to a run of ``max_sentences`` sentences starting at
a random sentence, drawn anew each time the file is read (e2e-coref, coref_model.py:122-132 at commit 53c4116, the
code of Lee et al. 2017; allennlp-models keeps the first ``max_sentences``). A new run each epoch needs a data loader
that re-reads the file every epoch (``max_instances_in_memory``).

``speaker_genre``: add e2e-coref's metadata inputs (``use_metadata``, experiments.conf:55 at 53c4116) for the model's
same-speaker and genre features: ``speaker_ids`` (per word, equal ids = same speaker, from the speaker column) and
``genre`` (index of the document id's first two letters in ``GENRES``, experiments.conf:72 and coref_model.py:118;
an id outside the list, or a hub record, gets ``len(GENRES)``).
"""
import collections
import logging
import random
from typing import DefaultDict, Iterable, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Instance
from allennlp.data.fields import LabelField, TensorField
from allennlp_models.coref.dataset_readers.conll import ConllCorefReader

from tasks.srl.conll2012_format import check_conll2012_file, conll2012_documents, conll2012_files
from tasks.srl.hub_ontonotes import hub_documents, is_hub_path

logger = logging.getLogger(__name__)
EXPECTED_RELEASE = "v4"

GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")  # OntoNotes genres, e2e-coref experiments.conf:72


@DatasetReader.register("coref_conll2012")
class CheckedCorefReader(ConllCorefReader):
    def __init__(self, random_offset: bool = False, seed: Optional[int] = None, speaker_genre: bool = False,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self._random_offset = random_offset
        self._speaker_genre = speaker_genre
        self._rng = random.Random(seed)

    def _read(self, file_path: str) -> Iterable[Instance]:
        num_documents = 0
        for sentences in _documents(str(file_path)):
            num_documents += 1
            if self._max_sentences and len(sentences) > self._max_sentences:
                # Mentions never cross sentences, so a cut at sentence boundaries keeps whole mentions.
                offset = self._rng.randint(0, len(sentences) - self._max_sentences) if self._random_offset else 0
                sentences = sentences[offset:offset + self._max_sentences]
            instance = self.text_to_instance([s.words for s in sentences], _document_clusters(sentences))
            # each word's sentence number, from 1: the ELMo indexer's `sentences` runs the biLM per sentence
            # (e2e-coref cache_elmo.py), other indexers ignore it
            numbers = (i + 1 for i, s in enumerate(sentences) for _ in s.words)
            for token, number in zip(instance["text"].tokens, numbers):
                token.type_id = number
            if self._speaker_genre:
                speaker_ids, genre = _speakers_and_genre(sentences)
                instance.add_field("speaker_ids", TensorField(torch.tensor(speaker_ids, dtype=torch.long)))
                instance.add_field("genre", LabelField(genre, skip_indexing=True))
            yield instance
        if num_documents == 0:
            raise ConfigurationError(f"{file_path}: expected CoNLL-2012 documents, found none")
        logger.info("Read %d coreference documents from %s", num_documents, file_path)


def _documents(path: str):
    if is_hub_path(path):
        yield from hub_documents(path)
        return
    # English only; Lee et al. 2017 used the CoNLL-2012 shared-task release v4 (conll2012_format.RELEASES)
    for conll_file in conll2012_files(path, expected_release=EXPECTED_RELEASE, task="coreference"):
        check_conll2012_file(conll_file)
        yield from conll2012_documents(conll_file)


def _document_clusters(sentences) -> List[List[Tuple[int, int]]]:
    """Gold clusters with inclusive word indices into the whole document (the files index words per sentence)."""
    clusters: DefaultDict[int, List[Tuple[int, int]]] = collections.defaultdict(list)
    sentence_start = 0
    for sentence in sentences:
        for cluster_id, (start, end) in sentence.coref_spans:
            clusters[cluster_id].append((sentence_start + start, sentence_start + end))
        sentence_start += len(sentence.words)
    return [sorted(spans) for _, spans in sorted(clusters.items())]


def _speakers_and_genre(sentences) -> Tuple[List[int], int]:
    """Per-word speaker ids (numbered by first appearance in the document; '-' is a speaker like any other, as in
    e2e-coref's minimize.py) and the genre index. Hub sentences carry neither: one speaker, unknown genre."""
    numbers: dict = {}
    speaker_ids = []
    for sentence in sentences:
        for speaker in getattr(sentence, "speakers", None) or [None] * len(sentence.words):
            speaker_ids.append(numbers.setdefault(speaker, len(numbers)))
    document_id = getattr(sentences[0], "document_id", None) or ""
    genre = GENRES.index(document_id[:2]) if document_id[:2] in GENRES else len(GENRES)
    return speaker_ids, genre
