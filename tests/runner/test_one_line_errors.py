"""Input that used to be taken silently, or to end in a traceback, is one line naming the file or key, what was expected
and what was found: profiles and sweeps with a key given twice, a UTF-8 byte-order mark (read, not refused), knob
values with spaces around them, one directory given for both the runs and the results, and a result.json holding
NaN, Infinity or bytes that are not UTF-8."""
import json

import pytest

import runner.__main__ as runner_main
from runner.profile import SpecError, load_json, load_profile
from runner.records import load_result
from tests.runner.fakes import ONE_COLUMN, runner_args, write_profile

PROFILE = {"sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1"},
           "sweep_overrides": ONE_COLUMN}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# ---- profiles and sweep files ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, key, found", [
    # json.loads keeps the last: this profile trained SIZE=small runs without a word
    ('{"sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1", "SIZE": "small"}}',
     "knobs.SIZE", "'tiny' and 'small'"),
    ('{"sweeps": ["table1"], "tasks": ["ner"], "tasks": ["snli"]}', "tasks", "['ner'] and ['snli']"),
    ('{"sweeps": ["table1"], "tasks": ["ner"], "sweep_overrides": {"table1": {"columns": [{"label": "a", "knobs": '
     '{"ELMO": "none"}}, {"label": "b", "label": "c", "knobs": {}}]}}}', "sweep_overrides.table1.columns[1].label",
     "'b' and 'c'"),
])
def test_a_key_given_twice_in_a_profile_is_one_line_naming_the_file_and_the_key(text, key, found, tmp_path, capsys,
                                                                                 fake_training):
    path = tmp_path / "p.json"
    path.write_text(text)
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    error = one_error_line(capsys)
    assert error.startswith(f"error: profile '{path}': key '{key}' given twice: expected each key once"), error
    assert error.endswith(f"found {found}"), error
    assert not fake_training and not (tmp_path / "runs").exists()


def test_a_key_given_twice_in_a_sweep_file_names_the_file_and_the_key(tmp_path):
    sweep = tmp_path / "table9.json"
    sweep.write_text('{"name": "table9", "kind": "table",\n "split": "test",\n "split": "dev"}\n')
    with pytest.raises(SpecError) as error:
        load_json(sweep, "sweep")
    assert str(error.value) == (f"sweep '{sweep}': key 'split' given twice: expected each key once (JSON would keep "
                                f"only the last), found 'test' and 'dev'")


def test_a_profile_with_a_utf8_byte_order_mark_is_read(tmp_path):
    """docs/runner.md: 'A UTF-8 byte-order mark is ignored'; a profile saved by a Windows editor was refused."""
    path = tmp_path / "p.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(PROFILE).encode())
    profile, _ = load_profile(str(path))
    assert profile.knobs == PROFILE["knobs"] and profile.name == "p"


def test_a_profile_that_is_not_utf8_is_one_line(tmp_path, capsys, fake_training):
    path = tmp_path / "p.json"
    path.write_bytes(b'{"sweeps": ["table1"],\n "description": "caf\xe9"}')
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    error = one_error_line(capsys)
    assert error.startswith(f"error: profile '{path}': expected UTF-8 text, found byte 0xe9 at line 2"), error


@pytest.mark.parametrize("change, key", [
    ({"knobs": {"SIZE": "tiny", "NUM_EPOCHS": " 1"}}, "knobs.NUM_EPOCHS"),
    ({"task_knobs": {"ner": {"TRAIN_FRACTION": "0.5 "}}}, "task_knobs.ner.TRAIN_FRACTION"),
    ({"sweep_overrides": {"table1": {**ONE_COLUMN["table1"], "columns": [
        {"label": "baseline", "knobs": {"ELMO": "none", "SIZE": "tiny\t"}}]}}}, "columns[0].knobs.SIZE"),
])
def test_a_knob_value_with_spaces_around_it_is_one_line(change, key, tmp_path, capsys, fake_training):
    """NUM_EPOCHS " 1" trained as 1 epoch under another run id than "1": the same run twice, never matched with the
    archive."""
    path = write_profile(tmp_path, **change)
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    error = one_error_line(capsys)
    assert f"key '{key}': expected a value without spaces around it" in error, error
    assert not fake_training and not (tmp_path / "runs").exists()


def test_an_x_value_with_spaces_around_it_is_one_line(tmp_path, capsys, fake_training):
    curve = {"tasks": ["ner"], "seeds": {"default": 1}, "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}],
             "x": {"knob": "TRAIN_FRACTION", "values": ["0.5", " 1.0"]}}
    path = write_profile(tmp_path, sweeps=["figure1"], sweep_overrides={"figure1": curve})
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    assert "key 'x.values[1]': expected a value without spaces around it" in one_error_line(capsys)


# ---- the command line ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [["--build-only"], []])
def test_one_directory_for_runs_and_results_is_one_line(extra, tmp_path, capsys, fake_training):
    """--build-only said the directory was 'in use by another runner': itself, holding the runs directory's lock."""
    path = write_profile(tmp_path)
    both = tmp_path / "both"
    args = runner_args(tmp_path, path) + ["--runs-dir", str(both), "--results-dir", f"{both}/."] + extra
    assert runner_main.main(args) == 2
    error = one_error_line(capsys)
    assert error == (f"error: --runs-dir '{both}' and --results-dir '{both}/.': expected two directories, found "
                     f"one ({both}): the runs and the tables each need their own"), error
    assert not fake_training and not both.exists()


# ---- result.json ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, found", [
    (b'{"run_id": "ner-1", "dev": NaN, "test": 0.25}', "NaN at line 1"),
    (b'{"run_id": "ner-1", "dev": 0.5,\n "test": Infinity}', "Infinity at line 2"),
    (b'{"run_id": "ner-1", "dev": 0.5, "test": -Infinity}', "-Infinity at line 1"),
    (b'{"run_id": "ner-1", "dev": 0.5, "test": 0.25, "log": "\xff\xfe"}', "byte 0xff at line 1"),
])
def test_a_result_with_nan_infinity_or_bad_bytes_is_unfinished_with_one_problem_line(content, found, tmp_path):
    """Python's json reads NaN and Infinity: a run at dev NaN counted as finished and its table cell said 'nan'; a
    result.json of bytes that are not UTF-8 stopped the runner with a 30-line traceback."""
    path = tmp_path / "result.json"
    path.write_bytes(content)
    result, problem = load_result(path)
    assert result is None and problem.startswith(f"{path}: expected a complete JSON result, found "), problem
    assert found in problem and "\n" not in problem, problem


@pytest.mark.slow  # the runner with a stand-in training, twice
def test_a_result_with_nan_is_named_in_one_warning_and_trained_again(tmp_path, capsys, fake_training):
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = sorted((tmp_path / "runs").glob("*/*/result.json"))
    result = json.loads(result_path.read_text())
    result_path.write_text(json.dumps({**result, "dev": float("nan")}))
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if str(result_path) in line]
    assert line.startswith(f"warning: {result_path}: expected a complete JSON result, found NaN at line 1"), line
    assert "| missing |" in (tmp_path / "results" / "table1.md").read_text()
    result_path.write_bytes(result_path.read_bytes().replace(b"NaN", b'"\xff"'))
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"warning: {result_path}: expected a complete JSON result, found byte 0xff" \
        in err, err
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    assert "0 already finished, 1 to do" in capsys.readouterr().out and len(fake_training) == 2
    assert json.loads(result_path.read_text())["dev"] == 0.5


def test_a_cut_archived_result_is_named_not_dropped_silently(tmp_path, capsys, fake_training):
    """The audit's case: a cut copy in a multi-session profile's archive counted as missing and would have been
    trained again without a word."""
    import shutil

    path = write_profile(tmp_path, archive_runs=True)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [copy] = (tmp_path / "results" / "runs" / "ner").glob("*.json")
    copy.write_text(copy.read_text()[:40])
    shutil.rmtree(tmp_path / "runs")  # a fresh clone: the runs come back from the archive
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "archived result" in line]
    assert len(err) == 1 and err[0].startswith(f"warning: archived result not restored: {copy}: expected a complete "
                                               f"JSON result") and err[0].endswith(f"(git checkout -- {copy})"), err


@pytest.mark.parametrize("flag, value, expected", [
    ("--threads", "100000", "--threads: expected at most this machine's"),  # accepted: each run ~6x slower
    ("--only", "", "--only: expected comma-separated sweep names, found ''"),  # taken as no --only
    ("--only", ",", "--only: expected comma-separated sweep names, found ','"),
])
def test_flags_that_were_taken_silently_are_one_line(flag, value, expected, tmp_path, capsys, fake_training):
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path, flag, value)) == 2
    assert one_error_line(capsys).startswith(f"error: {expected}")
    assert not fake_training and not (tmp_path / "runs").exists()
