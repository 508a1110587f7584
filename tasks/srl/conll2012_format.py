"""Finding and checking OntoNotes 5.0 CoNLL-2012 ``*_gold_conll`` files (the SRL and coreference data, Sec. 4).

allennlp-models' ``Ontonotes`` reader indexes the columns of each line by position and keeps a stack of open
coreference spans: on a malformed line it fails with an ``IndexError`` deep inside the reader, or it silently drops or
misaligns annotations (a row with fewer columns shortens the label sequences, an unclosed span is forgotten). Both our
readers run :func:`check_conll2012_file` on every file first, so bad input gives one line naming the file, the line,
what was expected and what was found. ``conll2012_files`` keeps English files only (a standard tree also holds
chinese/ and arabic/) and tells the two releases apart (``RELEASES``): SRL expects v12, coreference v4.

Columns of a ``*_gold_conll`` line (CoNLL-2012 shared task): 1 document id, 2 part number, 3 word number, 4 word,
5 POS, 6 parse bit, 7 predicate lemma, 8 frameset id, 9 word sense, 10 speaker, 11 named entities, 12..N-1 one
column of predicate arguments per predicate of the sentence, N coreference.
"""
import logging
import os
import re
from typing import Dict, Iterator, List, Optional, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp_models.common.ontonotes import Ontonotes, OntonotesSentence

from tasks.line_errors import text_lines

logger = logging.getLogger(__name__)

GOLD_CONLL_SUFFIX = "gold_conll"
# 10 fixed columns + named entities + coreference; a sentence without predicates has no argument column.
MIN_COLUMNS = 12
FIRST_SPAN_COLUMN = 10  # named entities, then predicate arguments
FIRST_ARGUMENT_COLUMN = 11

# A cell of a bracketed span column: "*", "(LABEL*", "*)" or "(LABEL*)"; some named-entity cells of the
# released data drop the star of a one-word span ("(ORG)").
SPAN_CELL = re.compile(r"^(?:\((?P<label>[^()*\s]+)\*?|\*)(?P<close>\))?$")
# PropBank labels of the CoNLL-2012 data: numbered arguments, modifiers (ARGM-XXX), their continuation (C-) and
# reference (R-) forms, and the predicate itself (V).
PROPBANK_LABEL = re.compile(r"^(?:[CR]-)?(?:V|ARG[0-5A]|ARG[0-5]-[A-Z]{3}|ARGM-[A-Z]{3})$")
# One segment of a coreference cell: "(12)", "(12" or "12)"; segments are joined with "|", "-" means none.
COREF_SEGMENT = re.compile(r"^(?:\((?P<single>\d+)\)|\((?P<open>\d+)|(?P<close>\d+)\))$")


# The two releases of OntoNotes 5.0 in the CoNLL format, told apart by their file names:
# - "v4": the CoNLL-2012 shared task (Pradhan et al. 2012), conll-2012/v4/data/{train,development,test}/data/<language>/
#   annotations/<genre>/<source>/<nn>/<doc>.v4_gold_conll after conll-2012/v3/scripts/skeleton2conll.sh; Lee et al.
#   2017's coreference data (e2e-coref setup_training.sh:10-12 downloads conll-2012-{train,development}.v4 and the
#   test key, :25-34 concatenates conll-2012/v4/data/<split>/data/<language>/annotations/*/*/*/*.v4_*_conll).
# - "v12": the CoNLL-formatted OntoNotes 5.0 release v12 (Pradhan et al. 2013; github.com/ontonotes/
#   conll-formatted-ontonotes-5.0, tag v12), conll-formatted-ontonotes-5.0/data/{train,development,test,
#   conll-2012-test}/data/english/annotations/.../<doc>.gold_conll; He et al. 2017's SRL data (deep_srl
#   scripts/make_conll2012_data.sh:10-28 reads data/{train,development,conll-2012-test}/data/english/annotations),
#   and the layout allennlp-models' Ontonotes reader documents (allennlp_models/common/ontonotes.py:85-130).
RELEASES = {
    "v4": "the CoNLL-2012 shared-task release v4 (conll-2012/v4/data/..., files *.v4_gold_conll)",
    "v12": "the CoNLL-formatted OntoNotes 5.0 release v12 (conll-formatted-ontonotes-5.0/data/..., files *.gold_conll)",
}
_VERSIONED = re.compile(r"\.v(\d+)_gold_conll$")
# Both releases put each language under data/<language>/annotations/; only English is the paper's data.
LANGUAGES = ("english", "chinese", "arabic")


def release_of(path: str) -> str:
    """"v4" for ``*.v4_gold_conll``, "v12" for an unversioned ``*.gold_conll``, else "v<N>"."""
    match = _VERSIONED.search(os.path.basename(path))
    return f"v{match.group(1)}" if match else "v12"


def language_of(path: str) -> Optional[str]:
    """The <language> of a path .../data/<language>/annotations/...; None outside that layout (e.g. sample data)."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(1, len(parts) - 1):
        if parts[i - 1] == "data" and parts[i + 1] == "annotations" and parts[i] in LANGUAGES:
            return parts[i]
    return None


def scan_conll2012(path: str) -> Tuple[List[str], Dict[str, int]]:
    """(the English ``*gold_conll`` files of a tree, or the one file ``path`` names; the number of files skipped
    per other language). Raises ``ConfigurationError`` for a missing path, a tree without such files, and a path
    that holds only other languages."""
    if os.path.isfile(path):
        files = [path]
    elif not os.path.isdir(path):
        raise ConfigurationError(
            f"{path}: no such file or directory (expected a CoNLL-2012 *_{GOLD_CONLL_SUFFIX} file or a "
            f"directory tree of them)"
        )
    else:
        files = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(path)
            for name in names
            if name.endswith(GOLD_CONLL_SUFFIX)
        )
    if not files:
        skeletons = sum(name.endswith("_skel") for _, _, names in os.walk(path) for name in names)
        hint = (f", but {skeletons} *_skel file(s): the words are not filled in yet; run skeleton2conll.sh "
                f"(conll-2012/v3/scripts/) with the OntoNotes 5.0 release, LDC2013T19" if skeletons else "")
        raise ConfigurationError(
            f"{path}: expected *{GOLD_CONLL_SUFFIX} files in this directory tree, found none{hint}"
        )
    skipped: Dict[str, int] = {}
    english = []
    for name in files:
        language = language_of(name)
        if language in (None, "english"):
            english.append(name)
        else:
            skipped[language] = skipped.get(language, 0) + 1
    if not english:
        found = ", ".join(f"{n} {language}" for language, n in sorted(skipped.items()))
        in_language = set(os.path.abspath(path).split(os.sep)) & set(LANGUAGES)  # .../data/chinese given
        raise ConfigurationError(
            f"{path}: expected English *{GOLD_CONLL_SUFFIX} files (under data/english/annotations/), found only "
            f"non-English ones ({found}); " + (
                "point the path at the split's directory (e.g. .../data/train), not at one language's"
                if in_language else "the English part of the release is missing here")
        )
    return english, skipped


def release_problem(files: List[str], expected: str, task: str) -> Optional[str]:
    """None if every file is of the ``expected`` release, else one line saying what was found."""
    found: Dict[str, int] = {}
    for name in files:
        found[release_of(name)] = found.get(release_of(name), 0) + 1
    other = {release: n for release, n in found.items() if release != expected}
    if not other:
        return None
    example = next(name for name in files if release_of(name) in other)
    return (f"{task} expects {RELEASES[expected]}, found {sum(other.values())} file(s) of release "
            f"{', '.join(sorted(other))} (e.g. {example})")


def conll2012_files(path: str, expected_release: Optional[str] = None, task: str = "this task") -> List[str]:
    """The English ``*gold_conll`` files of a CoNLL-2012 directory tree (sorted, so reading order is
    reproducible), or the one file ``path`` names. Files of other languages are skipped (logged); files of another
    release than ``expected_release`` give a warning (their annotation differs; see RELEASES)."""
    files, skipped = scan_conll2012(path)
    if skipped:
        logger.info("%s: skipped %s non-English *%s file(s) (%s); English only (paper Sec. 4)", path,
                    sum(skipped.values()), GOLD_CONLL_SUFFIX,
                    ", ".join(f"{language} {n}" for language, n in sorted(skipped.items())))
    problem = release_problem(files, expected_release, task) if expected_release else None
    if problem:
        logger.warning("%s: %s", path, problem)
    return files


def conll2012_documents(path: str) -> Iterator[List[OntonotesSentence]]:
    """The documents of one checked file, as allennlp-models' ``Ontonotes.dataset_document_iterator``
    (allennlp_models/common/ontonotes.py:205-230) gives them, but read through ``text_lines``: that one opens the
    file itself, and a byte-order mark (not whitespace to ``str.strip``) would turn "#begin document" into a row."""
    ontonotes, rows, document = Ontonotes(), [], []
    for _, line in text_lines(path, "CoNLL-2012 sentences"):
        line = line.strip()
        if line and not line.startswith("#"):
            rows.append(line)
            continue
        if rows:
            document.append(ontonotes._conll_rows_to_sentence(rows))
            rows = []
        if line.startswith("#end document"):
            yield document
            document = []
    if rows:
        document.append(ontonotes._conll_rows_to_sentence(rows))
    if document:
        yield document


class _SentenceState:
    """What must hold across the lines of one sentence: the column count, the word numbers, open spans."""

    def __init__(self, first_line_number: int, num_columns: int) -> None:
        self.first_line_number = first_line_number
        self.num_columns = num_columns
        self.num_words = 0
        self.open_span: List[Optional[str]] = [None] * (num_columns - 1 - FIRST_SPAN_COLUMN)
        self.verbs_per_column = [0] * (num_columns - 1 - FIRST_ARGUMENT_COLUMN)
        self.open_coref: dict = {}
        self.parse_depth = 0
        self.has_parse = True  # False once a row has word or POS "XX" (no parse information; the reader skips it)


def check_conll2012_file(path: str, check_srl_labels: bool = False) -> int:
    """Checks every line of one ``*_gold_conll`` file; returns the number of sentences.

    Raises ``ConfigurationError`` ("<file>:<line>: expected ..., found ...") on the first problem, and on a file
    without any sentence. With ``check_srl_labels`` the predicate-argument labels must be PropBank labels.
    """
    num_sentences = 0
    sentence: Optional[_SentenceState] = None

    def fail(line_number: int, message: str) -> None:
        raise ConfigurationError(f"{path}:{line_number}: {message}")

    def end_sentence(line_number: int) -> None:
        nonlocal sentence, num_sentences
        if sentence is None:
            return
        for column, label in enumerate(sentence.open_span):
            if label is not None:
                fail(line_number, f"expected span '({label}*' of column {column + FIRST_SPAN_COLUMN + 1} to be "
                                  f"closed with '*)' before the sentence ends, found the end of the sentence")
        for cluster, starts in sentence.open_coref.items():
            if starts:
                fail(line_number, f"expected coreference span '({cluster}' to be closed with '{cluster})' before "
                                  f"the sentence ends, found the end of the sentence")
        for column, count in enumerate(sentence.verbs_per_column):
            if count != 1:
                fail(line_number, f"expected one '(V*' predicate in argument column "
                                  f"{column + FIRST_ARGUMENT_COLUMN + 1} of the sentence starting at line "
                                  f"{sentence.first_line_number}, found {count}")
        if sentence.has_parse and sentence.parse_depth != 0:
            fail(line_number, f"expected the parse bits of the sentence starting at line "
                              f"{sentence.first_line_number} to have balanced brackets, found "
                              f"{sentence.parse_depth:+d} unclosed")
        num_sentences += 1
        sentence = None

    line_number = 0
    for line_number, line in text_lines(path, "CoNLL-2012 sentences"):  # BOM dropped, bad bytes named
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            end_sentence(line_number)
            continue
        columns = stripped.split()
        if len(columns) < MIN_COLUMNS:
            fail(line_number, f"expected at least {MIN_COLUMNS} whitespace-separated columns (CoNLL-2012 "
                              f"*_gold_conll), found {len(columns)}")
        if sentence is None:
            sentence = _SentenceState(line_number, len(columns))
        elif len(columns) != sentence.num_columns:
            fail(line_number, f"expected {sentence.num_columns} columns like the sentence's first line "
                              f"(line {sentence.first_line_number}), found {len(columns)}")
        # B023: _check_line calls the closure before it returns, within this iteration
        _check_line(columns, sentence, check_srl_labels, lambda message: fail(line_number, message))  # noqa: B023
    end_sentence(line_number + 1)
    if num_sentences == 0:
        raise ConfigurationError(f"{path}: expected CoNLL-2012 sentences, found none (empty file?)")
    return num_sentences


def _check_line(columns: List[str], sentence: _SentenceState, check_srl_labels: bool, fail) -> None:
    if not columns[1].isdigit():
        fail(f"expected an integer part number in column 2, found '{columns[1]}'")
    if not columns[2].isdigit():
        fail(f"expected an integer word number in column 3, found '{columns[2]}'")
    sentence.num_words += 1

    parse_bit = columns[5]
    if "XX" in (columns[3], columns[4]):
        sentence.has_parse = False
    elif parse_bit.count("*") != 1:
        fail(f"expected a parse bit with exactly one '*' in column 6, found '{parse_bit}'")
    sentence.parse_depth += parse_bit.count("(") - parse_bit.count(")")

    for column in range(FIRST_SPAN_COLUMN, len(columns) - 1):
        cell = columns[column]
        match = SPAN_CELL.match(cell)
        if match is None:
            fail(f"expected '*', '(LABEL*', '*)', '(LABEL*)' or '(LABEL)' in column {column + 1}, found '{cell}'")
        slot = column - FIRST_SPAN_COLUMN
        label = match.group("label")
        if label is not None:
            if sentence.open_span[slot] is not None:
                fail(f"expected span '({sentence.open_span[slot]}*' of column {column + 1} to be closed before "
                     f"a new one opens, found '{cell}'")
            is_argument_column = column >= FIRST_ARGUMENT_COLUMN
            if is_argument_column and check_srl_labels and not PROPBANK_LABEL.match(label):
                fail(f"expected a PropBank label (ARG0-5, ARGA, ARGM-XXX, their C-/R- forms, or V) in column "
                     f"{column + 1}, found unknown label '{label}'")
            if is_argument_column and label == "V":
                sentence.verbs_per_column[column - FIRST_ARGUMENT_COLUMN] += 1
            sentence.open_span[slot] = label
        if match.group("close"):
            if sentence.open_span[slot] is None:
                fail(f"expected '*)' in column {column + 1} to close an open span, found no open span")
            sentence.open_span[slot] = None

    coref_cell = columns[-1]
    if coref_cell != "-":
        for segment in coref_cell.split("|"):
            match = COREF_SEGMENT.match(segment)
            if match is None:
                fail(f"expected '-' or '|'-joined '(N)', '(N', 'N)' in the last (coreference) column, "
                     f"found '{coref_cell}'")
            if match.group("open"):
                sentence.open_coref.setdefault(match.group("open"), []).append(sentence.num_words)
            elif match.group("close"):
                starts = sentence.open_coref.get(match.group("close"))
                if not starts:
                    fail(f"expected '{segment}' in the coreference column to close a span opened earlier in the "
                         f"sentence with '({match.group('close')}', found none open")
                starts.pop()
