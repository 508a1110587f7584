"""SNLI 1.0 reader with checked input (paper Sec. 4, textual entailment).

allennlp-models' ``snli`` reader drops pairs whose gold label is "-" (no annotator majority), as the standard SNLI
setup does; it would fail with a bare JSONDecodeError/KeyError on a malformed record, accept any label string, and
read an empty file silently. This subclass checks each jsonl record and raises a one-line error naming the file and
line, then hands the record to the parent's ``text_to_instance``.
"""
import json
from typing import Iterable

from allennlp.common.file_utils import cached_path
from allennlp.data import DatasetReader, Instance
from allennlp_models.pair_classification.dataset_readers.snli import SnliReader

from tasks.line_errors import empty_file_error, input_error

SNLI_LABELS = ("entailment", "neutral", "contradiction")
NO_MAJORITY = "-"


@DatasetReader.register("snli_checked")
class CheckedSnliReader(SnliReader):
    def _read(self, file_path) -> Iterable[Instance]:
        def records():
            found_any = False
            with open(cached_path(file_path), encoding="utf-8") as snli_file:
                for line_number, line in enumerate(snli_file, start=1):
                    if not line.strip():
                        continue
                    found_any = True
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise input_error(file_path, line_number, "a JSON object", f"invalid JSON ({error.msg})")
                    if not isinstance(record, dict):
                        raise input_error(file_path, line_number, "a JSON object", type(record).__name__)
                    for key in ("gold_label", "sentence1", "sentence2"):
                        if not isinstance(record.get(key), str):
                            raise input_error(file_path, line_number, f"a string '{key}'", record.get(key))
                    label = record["gold_label"]
                    if label == NO_MAJORITY:
                        continue
                    if label not in SNLI_LABELS:
                        raise input_error(file_path, line_number, f"gold_label in {SNLI_LABELS} or '-'", label)
                    yield record
            if not found_any:
                raise empty_file_error(file_path, "SNLI jsonl records")

        for record in self.shard_iterable(records()):
            yield self.text_to_instance(record["sentence1"], record["sentence2"], record["gold_label"])
