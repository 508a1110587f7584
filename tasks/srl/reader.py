"""The SRL reader: allennlp-models' ``srl`` reader over a checked CoNLL-2012 directory tree (paper Sec. 4, SRL).

One instance per (sentence, predicate): the words, a 0/1 verb indicator and the BIO tags of that predicate's
arguments (He et al. 2017); a sentence without predicates gives one instance with all-"O" tags, as in allennlp-models.
What we add to allennlp-models' ``SrlReader``: every file is checked first (``conll2012_format``), files are read in
sorted order, a path that yields no instance is an error instead of an empty dataset, and ``hf:<dataset>:<config>:
<split>`` reads the Hugging Face hub copy instead of a local tree (``hub_ontonotes``).
"""
import logging
from typing import Iterable

from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Instance
from allennlp.data.tokenizers import Token
from allennlp_models.structured_prediction.dataset_readers.srl import SrlReader

from tasks.srl.conll2012_format import check_conll2012_file, conll2012_documents, conll2012_files
from tasks.srl.hub_ontonotes import hub_documents, is_hub_path

logger = logging.getLogger(__name__)
EXPECTED_RELEASE = "v12"


@DatasetReader.register("srl_conll2012")
class CheckedSrlReader(SrlReader):
    def _read(self, file_path: str) -> Iterable[Instance]:
        num_instances = 0
        for sentence in self._sentences(str(file_path)):
            tokens = [Token(word) for word in sentence.words]
            if not sentence.srl_frames:
                num_instances += 1
                yield self.text_to_instance(tokens, [0] * len(tokens), ["O"] * len(tokens))
            for _, tags in sentence.srl_frames:
                num_instances += 1
                verb_indicator = [1 if tag[-2:] == "-V" else 0 for tag in tags]
                yield self.text_to_instance(tokens, verb_indicator, tags)
        if num_instances == 0:
            raise ConfigurationError(f"{file_path}: expected SRL sentences, found none")
        logger.info("Read %d SRL instances from %s", num_instances, file_path)

    def _sentences(self, path: str):
        if is_hub_path(path):
            for document in hub_documents(path):
                yield from document
            return
        # English only; He et al. 2017 (and allennlp-models' srl) used release v12 (conll2012_format.RELEASES)
        for conll_file in conll2012_files(path, expected_release=EXPECTED_RELEASE, task="SRL"):
            if self._domain_identifier is not None and f"/{self._domain_identifier}/" not in conll_file:
                continue
            check_conll2012_file(conll_file, check_srl_labels=True)
            for document in conll2012_documents(conll_file):
                yield from document
