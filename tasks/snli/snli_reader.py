"""SNLI 1.0 reader with checked input (paper Sec. 4, textual entailment).

allennlp-models' ``snli`` reader drops pairs whose gold label is "-" (no annotator majority), as the standard SNLI
setup does; it would fail with a bare JSONDecodeError/KeyError on a malformed record, accept any label string, and
read an empty file silently. This subclass checks each jsonl record and raises a one-line error naming the file and
line, then hands the record to the parent's ``text_to_instance``. A path ``hf:snli:train`` reads the hub's copy
instead (tasks/hub_data.py).
"""
import json
from typing import Iterable

from allennlp.data import DatasetReader, Instance
from allennlp_models.pair_classification.dataset_readers.snli import SnliReader

from tasks import hub_data
from tasks.hub_data import is_hub_path
from tasks.line_errors import InputError, empty_file_error, input_error, json_error, text_lines

SNLI_LABELS = ("entailment", "neutral", "contradiction")
NO_MAJORITY = "-"


def file_records(file_path):
    """(line number, JSON object) per non-blank line of a jsonl file."""
    for line_number, line in text_lines(file_path, "SNLI jsonl records"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise json_error(file_path, line_number, "a JSON object", error, line) from None
        if not isinstance(record, dict):
            raise input_error(file_path, line_number, "a JSON object", type(record).__name__)
        yield line_number, record


def hub_records(path):
    """Records of a hub SNLI split (hf:snli:train): premise, hypothesis, ClassLabel label (-1 = no majority)."""
    dataset = hub_data.load_hub_split(path)
    names = hub_data.label_names(dataset, "label") or list(SNLI_LABELS)
    for index, record in enumerate(dataset):
        label = NO_MAJORITY if record["label"] < 0 else names[record["label"]]
        yield f"record {index}", {"gold_label": label, "sentence1": record["premise"],
                                  "sentence2": record["hypothesis"]}


def checked_records(file_path):
    """SNLI records with a string premise, hypothesis and known label; "-" (no majority) pairs dropped."""
    found_any = found_labelled = False
    records = hub_records(file_path) if is_hub_path(file_path) else file_records(file_path)
    for where, record in records:
        found_any = True
        for key in ("gold_label", "sentence1", "sentence2"):
            if not isinstance(record.get(key), str):
                raise input_error(file_path, where, f"a string '{key}'", record.get(key))
        label = record["gold_label"]
        if label == NO_MAJORITY:
            continue
        if label not in SNLI_LABELS:
            raise input_error(file_path, where, f"gold_label in {SNLI_LABELS} or '-'", label)
        found_labelled = True
        yield record
    if not found_any:
        raise empty_file_error(file_path, "SNLI jsonl records")
    if not found_labelled:  # else training or evaluating on it would silently use no data
        raise InputError(f"{file_path}: expected pairs with a gold_label in {SNLI_LABELS}, found only "
                         f"'{NO_MAJORITY}' (no annotator majority; these pairs are dropped)")


@DatasetReader.register("snli_checked")
class CheckedSnliReader(SnliReader):
    def _read(self, file_path) -> Iterable[Instance]:
        for record in self.shard_iterable(checked_records(file_path)):
            yield self.text_to_instance(record["sentence1"], record["sentence2"], record["gold_label"])
