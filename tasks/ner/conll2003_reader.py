"""CoNLL-2003 NER reader with checked input (paper Sec. 4, NER; data: eng.train / eng.testa / eng.testb).

allennlp's ``conll2003`` reader does the work (IOB1 in, BIOUL out as in allennlp-models' ner_elmo config); this
subclass first checks every line -- four whitespace-separated columns, an NER tag that is ``O`` or ``I-``/``B-`` of
PER, LOC, ORG, MISC -- and that the file holds at least one sentence, and raises a one-line error naming the file
and line otherwise (the parent would fail deep inside zip/unpacking, or silently read nothing).
"""
import itertools
import re
from typing import Iterable

from allennlp.common.file_utils import cached_path
from allennlp.data import DatasetReader, Instance
from allennlp.data.dataset_readers.conll2003 import Conll2003DatasetReader
from allennlp.data.tokenizers import Token

from tasks.line_errors import empty_file_error, input_error

NER_TAG = re.compile(r"^(O|[IB]-(PER|LOC|ORG|MISC))$")


def read_conll2003_sentences(file_path: str):
    """Yields (first line number, rows) per sentence; rows are [token, pos, chunk, ner]; -DOCSTART- is skipped."""
    with open(cached_path(file_path), encoding="utf-8") as data_file:
        numbered = enumerate(data_file, start=1)
        is_divider = lambda item: item[1].strip() == "" or item[1].startswith("-DOCSTART-")  # noqa: E731
        found_any = False
        for divider, group in itertools.groupby(numbered, is_divider):
            if divider:
                continue
            rows = []
            group = list(group)
            for line_number, line in group:
                columns = line.split()
                if len(columns) != 4:
                    raise input_error(
                        file_path, line_number, "4 columns (token POS chunk NER)", f"{len(columns)}: {line.strip()!r}"
                    )
                if not NER_TAG.match(columns[3]):
                    raise input_error(
                        file_path, line_number, "an IOB1 NER tag (O, I-/B- of PER LOC ORG MISC)", repr(columns[3])
                    )
                rows.append(columns)
            found_any = True
            yield group[0][0], rows
    if not found_any:
        raise empty_file_error(file_path, "CoNLL-2003 sentences")


@DatasetReader.register("conll2003_checked")
class CheckedConll2003Reader(Conll2003DatasetReader):
    def _read(self, file_path) -> Iterable[Instance]:
        for _, rows in self.shard_iterable(read_conll2003_sentences(file_path)):
            tokens, pos_tags, chunk_tags, ner_tags = (list(column) for column in zip(*rows))
            yield self.text_to_instance([Token(token) for token in tokens], pos_tags, chunk_tags, ner_tags)
