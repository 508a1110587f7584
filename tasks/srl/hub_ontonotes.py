"""OntoNotes CoNLL-2012 from the Hugging Face hub, for users who are online, as an alternative to a local tree.

The hub dataset ``ontonotes/conll2012_ontonotesv5`` (config ``english_v4``: the CoNLL-2012 shared-task train/dev and
test data that the paper's SRL and coref numbers use) stores each document as pre-parsed sentences: ``words``,
``srl_frames`` = [{"verb", "frames": BIO tags, one per word}], ``coref_spans`` = [[cluster id, first word, last word]]
(inclusive, sentence-relative). Our SRL and coreference readers take ``hf:<dataset>:<config>:<split>`` wherever they
take a path, e.g. ``TRAIN_PATH=hf:ontonotes/conll2012_ontonotesv5:english_v4:train`` (splits: train, validation,
test), and see the same per-sentence fields as from a ``*_gold_conll`` file.
"""
import itertools
from typing import Iterator, List, Set, Tuple

from allennlp.common.checks import ConfigurationError

from tasks.srl.conll2012_format import PROPBANK_LABEL

HUB_PREFIX = "hf:"


class HubSentence:
    """The fields of allennlp-models' ``OntonotesSentence`` that our readers use."""

    def __init__(self, words: List[str], srl_frames: List[Tuple[str, List[str]]],
                 coref_spans: Set[Tuple[int, Tuple[int, int]]]) -> None:
        self.words = words
        self.srl_frames = srl_frames
        self.coref_spans = coref_spans


def is_hub_path(path) -> bool:
    return str(path).startswith(HUB_PREFIX)


def hub_documents(path: str) -> Iterator[List[HubSentence]]:
    """The documents (one per document part, as the ``#begin document ...; part N`` blocks of the files)."""
    fields = str(path)[len(HUB_PREFIX):].split(":")
    if len(fields) != 3 or not all(fields):
        raise ConfigurationError(
            f"{path}: expected hf:<dataset>:<config>:<split>, e.g. "
            f"hf:ontonotes/conll2012_ontonotesv5:english_v4:train"
        )
    import datasets

    name, config, split = fields
    for record in datasets.load_dataset(name, config, split=split):
        document_id = record["document_id"]
        for _, part in itertools.groupby(enumerate(record["sentences"]), key=lambda item: item[1]["part_id"]):
            yield [_sentence(path, document_id, index, sentence) for index, sentence in part]


def _sentence(path: str, document_id: str, index: int, sentence: dict) -> HubSentence:
    where = f"{path}: document {document_id} sentence {index}"
    words = sentence["words"]
    frames = []
    for frame in sentence["srl_frames"]:
        tags = frame["frames"]
        if len(tags) != len(words):
            raise ConfigurationError(f"{where}: expected {len(words)} SRL tags (one per word) for verb "
                                     f"'{frame['verb']}', found {len(tags)}")
        for tag in tags:
            if tag != "O" and not (tag[:2] in ("B-", "I-") and PROPBANK_LABEL.match(tag[2:])):
                raise ConfigurationError(f"{where}: expected 'O' or B-/I- and a PropBank label, found "
                                         f"unknown label '{tag}'")
        frames.append((frame["verb"], list(tags)))
    spans = set()
    for cluster_id, start, end in sentence["coref_spans"]:
        if not 0 <= start <= end < len(words):
            raise ConfigurationError(f"{where}: expected a coreference span inside the {len(words)} words, "
                                     f"found ({start}, {end})")
        spans.add((cluster_id, (start, end)))
    return HubSentence(list(words), frames, spans)
