"""OntoNotes CoNLL-2012 from the Hugging Face hub, for users who are online, as an alternative to a local tree.

The hub dataset ``ontonotes/conll2012_ontonotesv5`` (configs ``english_v4``: the CoNLL-2012 shared-task data, used by
the paper's coreference numbers; ``english_v12``: the CoNLL-formatted OntoNotes 5.0 release of Pradhan et al. 2013,
used for SRL) stores each document as pre-parsed sentences: ``words``, ``srl_frames`` = [{"verb", "frames": BIO
tags, one per word}], ``coref_spans`` = [[cluster id, first word, last word]] (inclusive, sentence-relative). Our SRL
and coreference readers take ``hf:<dataset>:<config>:<split>`` wherever they take a path, e.g.
``TRAIN_PATH=hf:ontonotes/conll2012_ontonotesv5:english_v12:train`` (splits: train, validation, test), and see the
same per-sentence fields as from a ``*_gold_conll`` file.

The hub repository no longer has a loading script, only parquet files, one directory per config. ``datasets``
2.10.1 predates the ``configs:`` metadata that tells newer versions which files form a config, so
``load_dataset(name, config)`` would mix all configs; we list the repository's files, keep the config's split
(``<config>/<split>-00000-of-0000N.parquet`` on the main branch, ``<config>/<split>/0000.parquet`` in the hub's
automatic conversion) and load those with the ``parquet`` builder. ``ELMO_HF_MIRROR=<dir>`` reads a local copy in the
same layout (``<dir>/<dataset>/<config>/...``) instead: the tests do, and so can a user with a downloaded copy.
"""
import fnmatch
import glob
import itertools
import os
from typing import Iterator, List, Set, Tuple

from allennlp.common.checks import ConfigurationError

from tasks.srl.conll2012_format import PROPBANK_LABEL

HUB_PREFIX = "hf:"
MIRROR_VARIABLE = "ELMO_HF_MIRROR"
SPLIT_PATTERNS = ("{config}/{split}-*.parquet", "{config}/{split}/*.parquet")


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
            f"hf:ontonotes/conll2012_ontonotesv5:english_v12:train"
        )
    import datasets

    name, config, split = fields
    files = parquet_files(path, name, config, split)
    for record in datasets.load_dataset("parquet", data_files={split: files}, split=split):
        document_id = record["document_id"]
        for _, part in itertools.groupby(enumerate(record["sentences"]), key=lambda item: item[1]["part_id"]):
            yield [_sentence(path, document_id, index, sentence) for index, sentence in part]


def parquet_files(path: str, name: str, config: str, split: str) -> List[str]:
    """The parquet files of one config's split: local paths under ``$ELMO_HF_MIRROR/<name>``, else hub URLs."""
    mirror = os.environ.get(MIRROR_VARIABLE)
    if mirror:
        root = os.path.join(mirror, name)
        names = sorted(os.path.relpath(f, root) for f in glob.glob(os.path.join(root, "**", "*.parquet"),
                                                                   recursive=True))
    else:
        from huggingface_hub import HfApi

        names = sorted(HfApi().list_repo_files(name, repo_type="dataset"))
    for pattern in SPLIT_PATTERNS:
        chosen = [n for n in names if fnmatch.fnmatch(n, pattern.format(config=config, split=split))]
        if chosen:
            break
    else:
        configs = sorted({n.split("/")[0] for n in names if n.endswith(".parquet") and "/" in n})
        wanted = SPLIT_PATTERNS[0].format(config=config, split=split)
        raise ConfigurationError(f"{path}: expected parquet files {wanted} in {mirror or 'the hub repository'} "
                                 f"{name}, found none (configs there: {', '.join(configs) or 'none'})")
    if mirror:
        return [os.path.join(mirror, name, n) for n in chosen]
    from huggingface_hub import hf_hub_url

    return [hf_hub_url(name, n, repo_type="dataset") for n in chosen]


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
