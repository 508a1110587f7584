"""Every task reader under odd bytes and wrong paths: a UTF-8 byte-order mark is read as nothing, a byte
that is not UTF-8 and a missing path or a directory are one-line errors naming the file (and line); SQuAD questions
without answers and SNLI files without a usable label are errors instead of silently empty data.

Small files written here, one valid document per reader.
"""
import codecs
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from allennlp.common.checks import ConfigurationError

from runner.execution.training import child_pythonpath
from tasks import error_report
from tasks.coref.reader import CheckedCorefReader
from tasks.error_report import TRACEBACK_VARIABLE
from tasks.line_errors import InputError
from tasks.ner.conll2003_reader import CheckedConll2003Reader
from tasks.snli.snli_reader import CheckedSnliReader
from tasks.spacy_blank_tokenizer import BlankEnglishSpacyTokenizer
from tasks.squad.squad_reader import CheckedSquad1Reader
from tasks.srl.reader import CheckedSrlReader
from tasks.sst.sst_reader import CheckedSstReader
from tests.conftest import REPO_ROOT, assert_read_error

# the `allennlp` command a user types: setup's console script beside this Python; `python -m allennlp` where allennlp
# comes from PYTHONPATH and has no script (the lent GPU machine: tools/gpu_bundle.sh)
_SCRIPT = Path(sys.executable).parent / "allennlp"
ALLENNLP = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "allennlp"]

CONLL2012 = ("#begin document (x); part 000\n"
             "x 0 0 Ann NNP (TOP(S(NP*) - - - - * (ARG0*) (1)\n"
             "x 0 1 sold VBD (VP* sell 01 - - * (V*) -\n"
             "x 0 2 it PRP (NP*)) - - - - * (ARG1*) (1)\n"
             "x 0 3 . . *)) - - - - * * -\n"
             "\n#end document\n")
SQUAD = json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "Ann sold it.", "qas": [
    {"id": "q1", "question": "Who sold it?", "answers": [{"text": "Ann", "answer_start": 0}]}]}]}]}, indent=1)

# name -> (reader, a valid file of one instance (SRL: one predicate), file name, what the path error says)
READERS = {
    "ner": (lambda: CheckedConll2003Reader(), "-DOCSTART- -X- O O\n\nAnn NNP I-NP I-PER\nsold VBD I-VP O\n",
            "train.txt", "CoNLL-2003 sentences"),
    "sst": (lambda: CheckedSstReader(), "(3 (2 Ann) (3 (3 sold) (2 it)))\n", "train.txt", "PTB-format sentiment trees"),
    "snli": (lambda: CheckedSnliReader(tokenizer=BlankEnglishSpacyTokenizer()),
             '{"gold_label": "entailment", "sentence1": "Ann sold it .", "sentence2": "Ann sold ."}\n',
             "train.jsonl", "SNLI jsonl records"),
    "squad": (lambda: CheckedSquad1Reader(tokenizer=BlankEnglishSpacyTokenizer()), SQUAD, "train.json",
              "SQuAD 1.1 JSON"),
    "srl": (lambda: CheckedSrlReader(), CONLL2012, "x.gold_conll", None),
    "coref": (lambda: CheckedCorefReader(max_span_width=3), CONLL2012, "x.gold_conll", None),
}


def write(tmp_path, name, data: bytes):
    path = tmp_path / READERS[name][2]
    path.write_bytes(data)
    return path


def first_tokens(instances):
    instance = instances[0]
    field = next(instance[k] for k in ("tokens", "premise", "question", "text") if k in instance.fields)
    return [t.text for t in field.tokens]


@pytest.mark.parametrize("name", sorted(READERS))
def test_byte_order_mark_is_read_as_nothing(tmp_path, name):
    """Before the fix the NER reader made "\\ufeff-DOCSTART-" a sentence, SQuAD failed with a JSONDecodeError and
    the CoNLL-2012 readers turned "\\ufeff#begin document" into a row."""
    make, text, _, _ = READERS[name]
    plain = list(make().read(str(write(tmp_path, name, text.encode()))))
    marked = list(make().read(str(write(tmp_path, name, codecs.BOM_UTF8 + text.encode()))))
    assert len(marked) == len(plain) == 1
    assert first_tokens(marked) == first_tokens(plain)


@pytest.mark.parametrize("name", sorted(READERS))
def test_byte_that_is_not_utf8_names_file_and_line(tmp_path, name):
    make, text, _, _ = READERS[name]
    lines = text.encode().split(b"\n")
    index = next(i for i, line in enumerate(lines) if b"sold" in line)
    lines[index] = lines[index].replace(b"sold", b"s\xe9ld")  # latin-1
    path = write(tmp_path, name, b"\n".join(lines))
    line = index + 1
    with pytest.raises(ConfigurationError) as error:
        list(make().read(str(path)))
    message = str(error.value)
    assert "\n" not in message and str(path) in message and "0xe9" in message
    assert f"line {line}:" in message or f":{line}:" in message


@pytest.mark.parametrize("name", ["ner", "sst", "snli", "squad"])
def test_missing_path_or_directory_is_a_one_line_error(tmp_path, name):
    make, _, file_name, expected = READERS[name]
    assert_read_error(make(), tmp_path / file_name, f"expected a file of {expected}, found no such file")
    (tmp_path / "data").mkdir()
    assert_read_error(make(), tmp_path / "data", f"expected a file of {expected}, found a directory")


def test_squad_question_without_answers_is_an_error(tmp_path):
    document = json.loads(SQUAD)
    document["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document))
    assert_read_error(READERS["squad"][0](), path,
                      "data[0].paragraphs[0].qas[0].answers: expected at least one answer (SQuAD 1.1), found []")


def test_snli_file_without_a_majority_label_is_an_error(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text('{"gold_label": "-", "sentence1": "A b .", "sentence2": "C d ."}\n' * 3)
    assert_read_error(READERS["snli"][0](), path, "expected pairs with a gold_label in")


# --- what the user of `allennlp train` sees ----------------------------------------------------------------------

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - (DEBUG|INFO|WARNING) - ")


@pytest.mark.slow
def test_allennlp_train_on_a_bad_file_prints_the_one_line_error_and_no_traceback(tmp_path):
    """A real ``allennlp train`` (the tasks package comes in through .allennlp_plugins, as for a user): after
    allennlp's own log lines and progress bars, the first line of the error report on stderr is the reader's
    one-line error, and it is the last line. Before the fix: a 40-line traceback ending in the UnicodeDecodeError."""
    data = tmp_path / "train.txt"
    data.write_bytes(b"Ann NNP I-NP I-PER\ns\xe9ld VBD I-VP O\n")
    env = {**os.environ, "TRAIN_PATH": str(data), "SIZE": "tiny", "PYTHONPATH": child_pythonpath()}
    env.pop(TRACEBACK_VARIABLE, None)
    result = subprocess.run([*ALLENNLP, "train", "jsonnet_configs/ner.jsonnet",
                             "-s", str(tmp_path / "model")], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    report = [line for line in result.stderr.splitlines()
              if line.strip() and not LOG_LINE.match(line) and "loading instances" not in line
              and "Warning" not in line and not line.startswith("  warnings.warn")]
    assert report == [f"error: {data}: line 2: expected UTF-8 text, found byte 0xe9 at column 2 "
                      f"(convert the file to UTF-8, e.g. with iconv)"], result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def test_the_traceback_is_printed_after_the_line_when_asked(monkeypatch, capsys):
    from elmo_module.errors import ElmoInputError

    seen = []
    hook = error_report._wrap(lambda *exc_info: seen.append(exc_info[0]))
    monkeypatch.delenv(TRACEBACK_VARIABLE, raising=False)
    hook(ElmoInputError, ElmoInputError("options.json: bad"), None)
    hook(KeyError, KeyError("x"), None)  # not an input error: the hook it replaced prints it
    assert capsys.readouterr().err == "error: options.json: bad\n" and seen == [KeyError]
    monkeypatch.setenv(TRACEBACK_VARIABLE, "1")
    hook(InputError, InputError("f: line 2: expected x, found y"), None)
    assert capsys.readouterr().err == "error: f: line 2: expected x, found y\n" and seen == [KeyError, InputError]


@pytest.mark.slow
@pytest.mark.parametrize("path, found", [
    ("hf:conll2003:train", "expected a dataset split of the Hugging Face hub, found none (Couldn't reach the Hugging "
                           "Face Hub for dataset 'conll2003': Offline mode is enabled.); offline, use the task's local "
                           "files"),
    ("hf:conll2003", "expected hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT"),
])
def test_allennlp_train_on_a_hub_path_offline_or_malformed_is_one_line(tmp_path, path, found):
    """This used to be a 28-line `datasets` traceback ending in "Offline mode is enabled" (and a bare ValueError)."""
    env = {**os.environ, "TRAIN_PATH": path, "SIZE": "tiny", "PYTHONPATH": child_pythonpath(),
           "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop(TRACEBACK_VARIABLE, None)
    result = subprocess.run([*ALLENNLP, "train", "jsonnet_configs/ner.jsonnet",
                             "-s", str(tmp_path / "model")], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors and errors[-1].startswith(f"error: {path}: {found}"), result.stderr[-3000:]
