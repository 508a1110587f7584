"""The coreference reader: one instance per CoNLL-2012 document (paper Sec. 4, Coref; Lee et al. 2017).

allennlp-models' ``coref`` reader reads one file (the shared task's concatenated split); OntoNotes as distributed is a
directory tree of ``*_gold_conll`` files (one per source document, with its parts). This reader takes either a file
or a directory tree (files in sorted order), checks every file first (``tasks.srl.conll2012_format``: one-line errors
naming file and line instead of an IndexError from an unbalanced coreference bracket), and turns each document part
into allennlp-models' instance: the document's words, every candidate span up to ``max_span_width`` words inside a
sentence, and the gold cluster id of each span (-1 outside any cluster). ``hf:<dataset>:<config>:<split>`` reads the
Hugging Face hub copy instead (``tasks.srl.hub_ontonotes``).
"""
import collections
import logging
from typing import DefaultDict, Iterable, List, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Instance
from allennlp_models.coref.dataset_readers.conll import ConllCorefReader

from tasks.srl.conll2012_format import check_conll2012_file, conll2012_documents, conll2012_files
from tasks.srl.hub_ontonotes import hub_documents, is_hub_path

logger = logging.getLogger(__name__)
EXPECTED_RELEASE = "v4"


@DatasetReader.register("coref_conll2012")
class CheckedCorefReader(ConllCorefReader):
    def _read(self, file_path: str) -> Iterable[Instance]:
        num_documents = 0
        for sentences in _documents(str(file_path)):
            num_documents += 1
            yield self.text_to_instance([s.words for s in sentences], _document_clusters(sentences))
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
