"""Stanford Sentiment Treebank reader with checked input (paper Sec. 4, SST-5).

allennlp-models' ``sst_tokens`` reader parses each PTB-format tree with nltk; a malformed tree fails with nltk's
ValueError (no file or line), a label outside 0-4 is read as a new class, an empty file is read silently. This
subclass checks each line and raises a one-line error naming the file and line. A path ``hf:sst:ptb:train``
reads the hub's PTB trees instead (tasks/hub_data.py).
"""
import re
from typing import Iterable

from allennlp.data import DatasetReader, Instance
from allennlp_models.classification.dataset_readers.stanford_sentiment_tree_bank import (
    StanfordSentimentTreeBankDatasetReader,
)
from nltk.tree import Tree

from tasks import hub_data
from tasks.hub_data import is_hub_path
from tasks.line_errors import InputError, empty_file_error, input_error, text_lines

SST_LABELS = ("0", "1", "2", "3", "4")  # very negative .. very positive


def tree_lines(file_path: str):
    """(line number, tree string) per line of a file, or (record index, ptb_tree) of a hub split (hf:sst:ptb:train)."""
    if is_hub_path(file_path):
        dataset = hub_data.load_hub_split(file_path)
        if "ptb_tree" not in dataset.column_names:  # e.g. hf:sst:train (default config), hf:SetFit/sst5:train
            raise InputError(f"{file_path}: expected records with a 'ptb_tree' (PTB-format trees with a label on "
                             f"every phrase, as in hf:sst:ptb:<split>), found columns "
                             f"{', '.join(dataset.column_names)}")
        for index, record in enumerate(dataset):
            yield f"record {index}", record["ptb_tree"]
        return
    yield from text_lines(file_path, "PTB-format sentiment trees")


def read_sst_trees(file_path: str):
    """Yields (line number, tree) for every non-blank line, checking the tree and all its node labels."""
    found_any = False
    for where, line in tree_lines(file_path):
        line = line.strip()
        if not line:
            continue
        try:
            tree = Tree.fromstring(line)
        except ValueError as error:
            # nltk's message spans lines ("expected ')' but got 'end-of-string'\n at index 95.\n ..."): its first
            # line and the column
            what = str(error).splitlines()[0].removeprefix("Tree.read(): ")
            index = re.search(r"at index (\d+)", str(error))
            column = f" at column {int(index.group(1)) + 1}" if index else ""
            location = f"line {where}" if isinstance(where, int) else where
            raise InputError(f"{file_path}: {location}: expected a PTB-format tree, found an unparseable one "
                             f"({what}{column})") from None
        for subtree in tree.subtrees():
            if subtree.label() not in SST_LABELS:
                raise input_error(file_path, where, f"node labels in {SST_LABELS}", subtree.label())
        if not tree.leaves() or any(not isinstance(leaf, str) for leaf in tree.leaves()):
            raise input_error(file_path, where, "a tree with words at its leaves", line)
        found_any = True
        yield where, tree
    if not found_any:
        raise empty_file_error(file_path, "sentiment trees")


@DatasetReader.register("sst_checked")
class CheckedSstReader(StanfordSentimentTreeBankDatasetReader):
    def _read(self, file_path) -> Iterable[Instance]:
        for _, tree in read_sst_trees(file_path):
            trees = tree.subtrees() if self._use_subtrees else [tree]
            for subtree in trees:
                instance = self.text_to_instance(subtree.leaves(), subtree.label())
                if instance is not None:
                    yield instance
