"""CoNLL-2003 NER reader with checked input (paper Sec. 4, NER; data: eng.train / eng.testa / eng.testb).

allennlp's ``conll2003`` reader does the work (IOB1 in, BIOUL out as in allennlp-models' ner_elmo config); this
subclass first checks every line -- four whitespace-separated columns, an NER tag that is ``O`` or ``I-``/``B-`` of
PER, LOC, ORG, MISC -- and that the file holds at least one sentence, and raises a one-line error naming the file
and line otherwise (the parent would fail deep inside zip/unpacking, or silently read nothing). A path
``hf:conll2003:train`` reads the hub's copy instead (IOB2 tags, converted to IOB1; see tasks/hub_data.py).
"""
import itertools
import re
from typing import Iterable, List

from allennlp.data import DatasetReader, Instance
from allennlp.data.dataset_readers.conll2003 import Conll2003DatasetReader
from allennlp.data.tokenizers import Token

from tasks import hub_data
from tasks.hub_data import is_hub_path
from tasks.line_errors import empty_file_error, input_error, text_lines

NER_TAG = re.compile(r"^(O|[IB]-(PER|LOC|ORG|MISC))$")
CHUNK_TAG = re.compile(r"^(O|[IB]-[A-Z]+)$")  # converted to BIOUL too, so it must be IOB1-shaped


def check_columns(file_path, where, columns) -> None:
    if len(columns) != 4:
        raise input_error(file_path, where, "4 columns (token POS chunk NER)", f"{len(columns)}: {' '.join(columns)!r}")
    if not CHUNK_TAG.match(columns[2]):
        raise input_error(file_path, where, "an IOB1 chunk tag (O, I-X, B-X)", repr(columns[2]))
    if not NER_TAG.match(columns[3]):
        raise input_error(file_path, where, "an IOB1 NER tag (O, I-/B- of PER LOC ORG MISC)", repr(columns[3]))


def read_conll2003_sentences(file_path: str):
    """Yields (first line number, rows) per sentence; rows are [token, pos, chunk, ner]; -DOCSTART- is skipped."""
    if is_hub_path(file_path):
        yield from hub_sentences(file_path)
        return
    numbered = text_lines(file_path, "CoNLL-2003 sentences")  # BOM dropped, bad bytes named by line
    is_divider = lambda item: item[1].strip() == "" or item[1].startswith("-DOCSTART-")  # noqa: E731
    found_any = False
    for divider, group in itertools.groupby(numbered, is_divider):
        if divider:
            continue
        rows = []
        group = list(group)
        for line_number, line in group:
            columns = line.split()
            check_columns(file_path, line_number, columns)
            rows.append(columns)
        found_any = True
        yield group[0][0], rows
    if not found_any:
        raise empty_file_error(file_path, "CoNLL-2003 sentences")


def iob2_to_iob1(tags: List[str]) -> List[str]:
    """IOB2 (every chunk starts with B-) to IOB1 (B- only where a chunk follows one of the same type)."""
    iob1 = []
    for i, tag in enumerate(tags):
        follows_same_type = i > 0 and tags[i - 1] != "O" and tags[i - 1][2:] == tag[2:]
        iob1.append("I-" + tag[2:] if tag.startswith("B-") and not follows_same_type else tag)
    return iob1


def hub_sentences(path: str):
    """Sentences of a hub CoNLL-2003 split (hf:conll2003:train): tags are ClassLabel ids; NER and chunk tags
    there are IOB2 and are converted to the files' IOB1."""
    dataset = hub_data.load_hub_split(path)
    names = {column: hub_data.label_names(dataset, column) for column in ("pos_tags", "chunk_tags", "ner_tags")}
    found_any = False
    for index, record in enumerate(dataset):
        if record["tokens"] in ([], ["-DOCSTART-"]):
            continue
        tags = {c: [names[c][t] if names[c] else str(t) for t in record[c]] for c in names}
        rows = [list(row) for row in zip(record["tokens"], tags["pos_tags"], iob2_to_iob1(tags["chunk_tags"]),
                                         iob2_to_iob1(tags["ner_tags"]))]
        for row in rows:
            check_columns(path, f"record {index}", row)
        found_any = True
        yield index, rows
    if not found_any:
        raise empty_file_error(path, "CoNLL-2003 sentences")


@DatasetReader.register("conll2003_checked")
class CheckedConll2003Reader(Conll2003DatasetReader):
    def _read(self, file_path) -> Iterable[Instance]:
        for _, rows in self.shard_iterable(read_conll2003_sentences(file_path)):
            tokens, pos_tags, chunk_tags, ner_tags = (list(column) for column in zip(*rows))
            yield self.text_to_instance([Token(token) for token in tokens], pos_tags, chunk_tags, ner_tags)
