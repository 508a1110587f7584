"""The runner under mistakes, changed inputs, broken files, a full disk, Ctrl-C and a second runner.

Most tests run the runner in this process with a stand-in for ``allennlp train``
(``runner.execution.training.train_command`` points at a few lines of Python that write what a training writes), so the
runner's own logic is what is tested, in seconds. The interrupt and the two-runner tests start real runner processes
with real trainings and real signals. """
import builtins
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner.__main__ as runner_main
import runner.execution.jobs as jobs
import runner.execution.training as execute
import runner.plan as plan_module
from runner.execution.training import child_pythonpath
from runner.pipeline import plan_from
from runner.profile import Profile
from runner.settings import Settings
from tasks.knobs import knob_problems
from tests.runner.fakes import FAKE_TRAINING, NER_TRAIN, ONE_COLUMN, runner_args, start_runner, write_profile

REPO = Path(__file__).resolve().parents[2]


def result_paths(tmp_path):
    return sorted((tmp_path / "runs").glob("*/*/result.json"))


# ---- knob values and the profile schema -------------------------------------------------------------------------

def test_knob_rules():
    assert knob_problems({"TRAIN_FRACTION": "0.001", "NUM_EPOCHS": "", "SEED": "3", "ELMO_LAMBDA": "0"}) == []
    assert knob_problems({"TRAIN_FRACTION": "1.5"}) == ["knob TRAIN_FRACTION = '1.5': expected a number in (0, 1]"]
    assert knob_problems({"TRAIN_FRACTION": "abc"}) == ["knob TRAIN_FRACTION = 'abc': expected a number in (0, 1]"]
    assert knob_problems({"TRAIN_FRACTION": "0"}) and knob_problems({"TRAIN_FRACTION": "nan"})
    assert knob_problems({"NUM_EPOCHS": "0"}) == ["knob NUM_EPOCHS = '0': expected empty or a positive integer"]
    assert knob_problems({"NUM_EPOCHS": "2.5"}) and knob_problems({"ELMO": "inptu"})
    assert knob_problems({"CUDA_DEVICE": "-2"}) and not knob_problems({"CUDA_DEVICE": "-1"})


def test_an_elmo_lambda_out_of_range_is_one_line_naming_the_range():
    """ELMO_LAMBDA=1e30 passed the rule (a finite number >= 0) and ended the training in an OverflowError."""
    assert knob_problems({"ELMO_LAMBDA": "1e30"}) == ["knob ELMO_LAMBDA = '1e30': expected a number in [0, 1000]"]
    assert knob_problems({"ELMO_LAMBDA": "-1"}) and not knob_problems({"ELMO_LAMBDA": "1"})


@pytest.mark.slow
def test_allennlp_train_stops_on_a_bad_knob_with_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "TRAIN_FRACTION": "1.5", "SIZE": "tiny", "NUM_EPOCHS": "1",
           "ALLENNLP_CACHE_ROOT": str(tmp_path / "allennlp"), "WANDB": "false"}
    done = subprocess.run([sys.executable, "-m", "allennlp", "train", "jsonnet_configs/ner.jsonnet", "-s",
                           str(tmp_path / "model"), "--include-package", "tasks"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: knob TRAIN_FRACTION = '1.5': expected a number in (0, 1] (environment variable; see "
                      "tasks/knobs.py)"]
    assert not (tmp_path / "model").exists()  # nothing trained


COLUMN = {"label": "baseline", "knobs": {"ELMO": "none"}}


# a Figure 1 sweep (more knobs per point)
def _curve(point_knobs, values=("0.5", "1.0"), columns=(COLUMN,), tasks=None):
    x = {"knob": "TRAIN_FRACTION", "values": list(values), "knobs": point_knobs, **({"tasks": tasks} if tasks else {})}
    return {"sweeps": ["figure1"], "sweep_overrides": {"figure1": {"tasks": ["ner"], "columns": list(columns), "x": x}}}


BAD_PROFILES = {
    "misspelt key": ({"knobz": {"SIZE": "tiny"}}, ["key 'knobz'", "did you mean 'knobs'", "expected one of"]),
    "task for tasks": ({"task": ["ner"]}, ["key 'task'", "did you mean 'tasks'"]),
    "misspelt sweep override": ({"sweep_overrides": {"tabel1": {}}}, ["key 'sweep_overrides.tabel1'",
                                                                       "did you mean 'table1'"]),
    "unknown sweep field": ({"sweep_overrides": {"table1": {"seed": {"default": 2}}}},
                            ["key 'seed'", "did you mean 'seeds'", "field of a 'table' sweep"]),
    "unknown column field": ({"sweep_overrides": {"table1": {"columns": [{**COLUMN, "knob": {}}]}}},
                             ["key 'columns[0].knob'", "did you mean 'knobs'"]),
    "unknown task": ({"tasks": ["nerr"]}, ["key 'tasks['nerr']'", "did you mean 'ner'"]),
    "no run selected": ({"tasks": ["coref"], "sweep_overrides": {"table1": {"tasks": ["ner"]}}},
                        ["key 'tasks'", "found ['coref']", "no run to do"]),
    "fraction 1.5": ({"knobs": {"TRAIN_FRACTION": "1.5"}},
                     ["key 'knobs'", "TRAIN_FRACTION = '1.5'", "expected a number in (0, 1]"]),
    "fraction abc": ({"task_knobs": {"ner": {"TRAIN_FRACTION": "abc"}}},
                     ["key 'task_knobs.ner'", "TRAIN_FRACTION = 'abc'", "expected a number in (0, 1]"]),
    "zero epochs": ({"knobs": {"NUM_EPOCHS": 0}}, ["NUM_EPOCHS = '0'", "expected empty or a positive integer"]),
    "same label twice": ({"sweep_overrides": {"table1": {"columns": [COLUMN, {**COLUMN, "knobs": {"ELMO": "input"}}]}}},
                         ["key 'columns[1].label'", "labels that differ", "'baseline'"]),
    "column seed": ({"sweep_overrides": {"table1": {"columns": [{**COLUMN, "knobs": {"ELMO": "none", "SEED": "7"}}]}}},
                    ["key 'columns[0].knobs.SEED'", "the runner sets SEED", "'7'"]),
    "bad device": ({"device": "gpu"}, ["key 'device'", "cpu or cuda", "'gpu'"]),
    "bad run order": ({"run_order": "random"}, ["key 'run_order'", "tasks or sweeps", "'random'"]),
    "x knobs at no x value": (_curve({"0.25": {"BATCHES_PER_EPOCH": "3"}}), ["key 'x.knobs.0.25'", "one of x.values"]),
    "x knobs set the x knob": (_curve({"0.5": {"TRAIN_FRACTION": "0.1"}}),
                               ["key 'x.knobs.0.5'", "knobs other than TRAIN_FRACTION"]),
    "x knobs bad value": (_curve({"0.5": {"BATCHES_PER_EPOCH": "0"}}),
                          ["BATCHES_PER_EPOCH = '0'", "expected empty or a positive integer"]),
    "jobs as text": ({"jobs": "2"}, ["key 'jobs'", "an integer", "'2'"]),
    # sweep shapes that used to train and report silently wrong cells
    "task twice in a sweep": ({"sweep_overrides": {"table1": {**ONE_COLUMN["table1"], "tasks": ["ner", "ner"]}}},
                              ["key 'tasks'", "expected each task once", "'ner'"]),
    "x value twice": (_curve({}, values=("0.5", "1.0", "1")), ["key 'x.values[2]'", "values that differ", "'1'"]),
    "x knobs set a column's knob": (_curve({"1.0": {"ELMO": "input"}}),
                                    ["key 'x.knobs.1.0.ELMO'", "column 'baseline' sets ELMO", "'input'"]),
    "x for an unknown task": (_curve({}, tasks={"nerr": {"values": ["0.5"]}}),
                              ["key 'x.tasks.nerr'", "did you mean 'ner'"]),
    "x of a task sets the knob": (_curve({}, tasks={"ner": {"knob": "SEED"}}),
                                  ["key 'x.tasks.ner.knob'", "key of x.tasks.ner"]),
    "x of a task, value twice": (_curve({}, tasks={"ner": {"values": ["0.2", "0.20"]}}),
                                 ["key 'x.tasks.ner.values[1]'", "values that differ"]),
    "x of a task, knobs at no value": (_curve({"0.5": {"BATCHES_PER_EPOCH": "3"}}, tasks={"ner": {"values": ["0.2"]}}),
                                       ["key 'x.tasks.ner.knobs.0.5'", "one of x.tasks.ner.values (0.2)"]),
    "column sets the x knob": (_curve({}, columns=[{**COLUMN, "knobs": {"ELMO": "none", "TRAIN_FRACTION": "0.1"}}]),
                               ["key 'columns[0].knobs.TRAIN_FRACTION'", "no TRAIN_FRACTION in a column", "'0.1'"]),
}


@pytest.mark.parametrize("case", list(BAD_PROFILES))
def test_profile_mistakes_are_one_line_errors(case, tmp_path, capsys, fake_training):
    change, expected = BAD_PROFILES[case]
    profile = {"sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny"}, "sweep_overrides": ONE_COLUMN}
    for key, value in change.items():
        profile.pop({"knobz": "knobs", "task": "tasks"}.get(key), None)  # the misspelt key replaces the right one
        profile[key] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for text in expected:
        assert text in err, err
    assert not fake_training and not (tmp_path / "runs").exists()


def test_only_with_a_misspelt_sweep_changes_nothing(tmp_path, capsys, fake_training):
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    summary = (tmp_path / "results" / "summary.json").read_text()
    assert json.loads(summary)["sweeps"]["table1"]["cells"]
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--only", "tabel1")) == 2
    err = capsys.readouterr().err
    assert "--only: 'tabel1' is not a sweep" in err and "did you mean 'table1'" in err
    assert (tmp_path / "results" / "summary.json").read_text() == summary


def test_device_cpu_overrides_a_gpu_profile_for_the_runs(tmp_path, capsys, monkeypatch):
    """--device cpu used to be ignored by the preflight and by the runs (a profile's CUDA_DEVICE knob 0 still
    reached `allennlp train`). The training stand-in records the CUDA_DEVICE it was given."""
    seen = tmp_path / "cuda_device.txt"

    def command(task, model_dir):
        record = f"open({str(seen)!r}, 'a').write(os.environ['CUDA_DEVICE'] + '\\n')\n"
        return [sys.executable, "-c", FAKE_TRAINING + record, str(model_dir)]

    monkeypatch.setattr(execute, "train_command", command)
    monkeypatch.setenv("WANDB_MODE", "offline")
    path = write_profile(tmp_path, device="cuda", knobs={"SIZE": "tiny", "NUM_EPOCHS": "1", "CUDA_DEVICE": "0"})
    assert runner_main.main(runner_args(tmp_path, path, "--device", "cpu")) == 0, capsys.readouterr().err
    assert seen.read_text() == "-1\n"
    assert "runner: device cpu" in capsys.readouterr().out


def test_progress_is_one_short_line_per_run_and_the_missing_estimate_said_once(tmp_path, capsys, fake_training):
    """Each line was `[  1/2] ner elmo=none mix=weighted frac=1.0 seed=1: dev=0.5 test=0.25 (1.2s) | to do: ~0.0 h of
    runs, ~0.0 h of wall time at 1 at a time (...); not estimated, no finished run of their task yet: ner x1`."""
    path = write_profile(tmp_path, sweep_overrides={"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 2}}})
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) == 2, out
    for line in lines:  # the stand-in's F1 0.5 and 0.25 as Table 1 shows NER; it records no epochs: no estimate
        assert re.fullmatch(r"\[[12]/2\] ner baseline seed [12]: dev 50\.00, test 25\.00 \(\d+ s\)", line), line
    assert out.count("not estimated, no finished run of their task yet") == 1
    assert "to do: not estimated, no finished run of their task yet: ner x2" in out


# ---- what a finished run read --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_changed_data_makes_a_finished_run_stale(tmp_path, capsys, fake_training):
    data = tmp_path / "train.txt"
    shutil.copy(NER_TRAIN, data)
    path = write_profile(tmp_path, task_knobs={"ner": {"TRAIN_PATH": str(data)}})
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = result_paths(tmp_path)
    recorded = json.loads(result_path.read_text()).get("reads")

    os.utime(data)  # touched, same bytes: still finished
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    assert "1 already finished, 0 to do" in capsys.readouterr().out and len(fake_training) == 1

    data.write_text(data.read_text().replace("Maria", "Mario"))  # other data at the same path
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    err = capsys.readouterr().err
    assert "1 finished runs read files that have changed since" in err
    assert f"{result_path.parent}: {data}" in err and "--redo-stale" in err
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 2  # no table from stale results
    assert recorded[str(data)] and recorded["tasks/ner/sample_data/dev.txt"]  # empty knob: the bundled file too
    assert len(fake_training) == 1

    assert runner_main.main(runner_args(tmp_path, path, "--redo-stale")) == 0
    assert len(fake_training) == 2 and (result_path.parent / "result.stale.json").is_file()
    assert json.loads(result_path.read_text())["reads"][str(data)] != recorded[str(data)]
    assert runner_main.main(runner_args(tmp_path, path)) == 0 and len(fake_training) == 2


def test_a_changed_bundled_sample_makes_a_finished_run_stale(tmp_path, capsys, fake_training):
    """The bundled sample data and biLM (empty path knobs, the default profile) used to carry no checksum, so a
    run stayed "finished" after they were edited. The edit is simulated on the run's record (a test must not write
    into the repository): the recorded checksum of the bundled dev file is not today's."""
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = result_paths(tmp_path)
    result = json.loads(result_path.read_text())
    result["reads"] = {**result["reads"], "tasks/ner/sample_data/dev.txt": "0" * 64}
    result_path.write_text(json.dumps(result))
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    err = capsys.readouterr().err
    assert f"{result_path.parent}: tasks/ner/sample_data/dev.txt" in err and len(fake_training) == 1


def test_runs_that_read_other_bytes_at_one_path_share_no_table(tmp_path, capsys, fake_training):
    """A fresh clone's --build-only has none of the profile's own vectors and biLM (out of git), so no run can be
    stale there; yet runs remade after a move to another machine read other bytes at the same paths (its CPU trains
    other vectors from the same recipe). Before the check the tables mixed them silently."""
    data = tmp_path / "artifacts" / "train.txt"
    data.parent.mkdir()
    shutil.copy(NER_TRAIN, data)
    overrides = {"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 2}}}
    path = write_profile(tmp_path, sweep_overrides=overrides, task_knobs={"ner": {"TRAIN_PATH": str(data)}})
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    first, second = result_paths(tmp_path)
    result = json.loads(second.read_text())
    result["reads"][str(data)] = "f" * 64  # what the other machine's file hashed to
    second.write_text(json.dumps(result))
    shutil.rmtree(data.parent)  # a fresh clone: the artifacts are not here
    table = tmp_path / "results" / "table1.md"
    table.unlink()
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: finished runs read different files at the same path"), err
    assert f"{data}: 1 run(s) read sha256 " in err and "1 run(s) read sha256 ffffffffffff" in err
    assert not table.exists()
    result["reads"][str(data)] = json.loads(first.read_text())["reads"][str(data)]  # the same bytes: fine
    second.write_text(json.dumps(result))
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0 and table.is_file()


@pytest.mark.slow
def test_build_only_with_redo_stale_leaves_the_stale_runs_out(tmp_path, capsys, fake_training):
    """A profile partly remade on another machine (small, 2026-11-26): --build-only --redo-stale sets the stale runs
    aside and builds the tables from the others, naming how many were left out; the archived copy of a run set aside
    is not restored over it (it was, so the next --build-only found the stale result again: the fault seen beside a
    --redo-stale runner). The stale run's recorded dev-file checksum stands for files changed since."""
    overrides = {"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 2}}}
    path = write_profile(tmp_path, sweep_overrides=overrides, archive_runs=True)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    stale = result_paths(tmp_path)[1]
    archived = tmp_path / "results" / "runs" / "ner" / f"{stale.parent.name}.json"
    for record in (stale, archived):
        result = json.loads(record.read_text())
        dev = "tasks/ner/sample_data/dev.txt"
        record.write_text(json.dumps({**result, "reads": {**result["reads"], dev: "0" * 64}}))
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 2  # stale: listed, nothing built

    assert runner_main.main(runner_args(tmp_path, path, "--build-only", "--redo-stale")) == 0
    out = capsys.readouterr().out
    assert f"stale, left out of the tables until trained again: {stale.parent} (tasks/ner/sample_data/dev.txt" in out
    assert not stale.exists() and (stale.parent / "result.stale.json").is_file()
    table = (tmp_path / "results" / "table1.md").read_text()
    assert "- **stale_runs_set_aside**: 1 (their inputs changed since they ran" in table
    assert "| ner | 25.00 (n=1) |" in table  # one seed of two
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0  # the archive's copy stays out
    assert not stale.exists() and len(fake_training) == 2

    assert runner_main.main(runner_args(tmp_path, path)) == 0  # the next training run trains it again
    assert len(fake_training) == 3 and stale.is_file()
    assert "stale_runs_set_aside" not in (tmp_path / "results" / "table1.md").read_text()


def test_checksums_are_cached_by_size_and_mtime(tmp_path):
    from runner.execution.freshness import Checksums

    data = tmp_path / "glove.txt"
    data.write_bytes(b"the 0.1 0.2\n")
    assert Checksums(tmp_path / "sums.json").of(data) and not Checksums(tmp_path / "sums.json").known  # too new
    old = time.time_ns() - 60 * 10**9
    os.utime(data, ns=(old, old))
    first = Checksums(tmp_path / "sums.json")
    digest = first.of(data)
    first.save()
    stat = data.stat()
    data.write_bytes(b"the 0.3 0.4\n")  # same size; mtime put back: taken from the cache, the file is not read
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert Checksums(tmp_path / "sums.json").of(data) == digest
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert Checksums(tmp_path / "sums.json").of(data) != digest


# ---- broken files ------------------------------------------------------------------------------------------------

def test_result_wins_over_a_failed_json_beside_it(tmp_path, capsys, fake_training):
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = result_paths(tmp_path)
    (result_path.parent / "failed.json").write_text(json.dumps({"log": "elsewhere", "returncode": 1}))
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    assert runner_main.main(runner_args(tmp_path, path)) == 0 and len(fake_training) == 1
    assert "| 25.00 |" in (tmp_path / "results" / "table1.md").read_text()


TRUNCATED = "expected a complete JSON result"
NO_METRIC = "expected a run's result with 'dev' and 'test' numbers (or one null)"  # was a traceback


@pytest.mark.slow
@pytest.mark.parametrize("content, expected", [("", TRUNCATED), ('{"run_id": "ner-1", "dev": 0.5, "te', TRUNCATED),
                                               ('{"run_id": "ner-1", "dev": "high", "test": null}', NO_METRIC),
                                               ('{"run_id": "ner-1"}', NO_METRIC)])
def test_a_broken_result_counts_as_missing_and_is_redone(content, expected, tmp_path, capsys, fake_training):
    """A result.json cut short, or valid JSON without a numeric metric: a warning naming it, a missing cell, and the
    run trained again."""
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = result_paths(tmp_path)
    result_path.write_text(content)
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    err = capsys.readouterr().err
    assert f"warning: {result_path}: {expected}" in err and "Traceback" not in err
    assert "| missing |" in (tmp_path / "results" / "table1.md").read_text()

    assert runner_main.main(runner_args(tmp_path, path)) == 0
    assert "0 already finished, 1 to do" in capsys.readouterr().out and len(fake_training) == 2
    assert json.loads(result_path.read_text())["test"] == 0.25


def test_full_disk_is_one_line_and_leaves_no_half_written_result(tmp_path, capsys, fake_training, monkeypatch):
    real_open = builtins.open

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if "w" in mode and str(file).endswith("result.json.partial"):
            def write(text):  # half of it fits
                real_write(text[:len(text) // 2])
                raise OSError(errno.ENOSPC, "No space left on device", str(file))
            real_write, f.write = f.write, write
        return f

    monkeypatch.setattr(builtins, "open", open_on_a_full_disk)  # (only result.json.partial is affected)
    real_write_text = Path.write_text

    def write_text_on_a_full_disk(self, text, *args, **kwargs):  # (as the runner once wrote results)
        if self.name.endswith("result.json.partial"):
            real_write_text(self, text[:len(text) // 2])
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_text(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text_on_a_full_disk)
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no space left on device writing ") and err.count("\n") == 1, err
    assert "result.json.partial" in err
    run_dir = next((tmp_path / "runs").glob("ner/*"))
    assert not (run_dir / "result.json").exists() and not (run_dir / "result.json.partial").exists()

    monkeypatch.undo()  # space again: the run is unfinished and is done
    monkeypatch.setattr(execute, "train_command", lambda task, model: [sys.executable, "-c", FAKE_TRAINING, str(model)])
    assert runner_main.main(runner_args(tmp_path, path)) == 0 and (run_dir / "result.json").is_file()


def test_runs_and_stages_keep_the_callers_pythonpath(tmp_path, monkeypatch):
    """On the lent GPU machine allennlp came from a `pip install --target` folder on PYTHONPATH: the runner replaced
    PYTHONPATH with the repository, and every run crashed with "No module named allennlp". The stand-in training
    imports a module that only the caller's PYTHONPATH reaches."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "only_on_the_callers_path.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(execute, "train_command", lambda task, model: [
        sys.executable, "-c", "import only_on_the_callers_path\n" + FAKE_TRAINING, str(model)])
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    assert next((tmp_path / "runs").glob("ner/*/result.json")).is_file()
    from runner.stages.bilm_stages import call_stage  # the stages (biLM, word vectors) too
    call_stage([sys.executable, "-c", "import only_on_the_callers_path"], tmp_path / "stage", tmp_path / "stage.log",
          "a stage", show=False)


# ---- real processes: Ctrl-C and a second runner ---------------------------------------------------------------------

def _children(pid: int) -> list:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return children


@pytest.fixture(scope="module")
def interrupted_sweep(tmp_path_factory):
    """Runner A trains the first of two long runs; runner B is started on the same runs directory; then A gets a
    SIGINT (sent to A alone: A must stop the training itself). Returns what was seen."""
    tmp_path = tmp_path_factory.mktemp("interrupt")
    long_data = tmp_path / "train.txt"  # long epochs: early stopping (patience 25) must not end the run first
    long_data.write_text(NER_TRAIN.read_text() * 500)
    path = write_profile(tmp_path, knobs={"SIZE": "tiny", "NUM_EPOCHS": "100000"},
                         task_knobs={"ner": {"TRAIN_PATH": str(long_data)}},
                         sweep_overrides={"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 2}}})
    env, command, a = start_runner(tmp_path, path)
    try:
        deadline = time.time() + 240
        while not [p for p in (tmp_path / "runs").glob("ner/*/log.txt") if "Epoch" in p.read_text(errors="replace")]:
            assert a.poll() is None and time.time() < deadline, "runner A ended or did not start training"
            time.sleep(0.5)
        trainings = _children(a.pid)
        b = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        other_runs_dir = [str(tmp_path / "runs_c") if arg == str(tmp_path / "runs") else arg for arg in command]
        c = subprocess.run(other_runs_dir, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        files_before_d = sorted(str(p) for p in tmp_path.rglob("*") if p.is_file())
        d = subprocess.run([*command, "--build-only"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        files_after_d = sorted(str(p) for p in tmp_path.rglob("*") if p.is_file())
        logs_after_b = sorted((tmp_path / "runs").glob("ner/*/log.txt"))
        sent = time.time()
        a.send_signal(signal.SIGINT)
        out, err = a.communicate(timeout=60)
        stopped_after = time.time() - sent
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
            a.wait()
    return {"tmp": tmp_path, "a": a, "a_out": out, "a_err": err, "b": b, "c": c, "d": d, "trainings": trainings,
            "logs_after_b": logs_after_b, "stopped_after": stopped_after, "files_before_d": files_before_d,
            "files_after_d": files_after_d}


def _refusal(process) -> str:
    """The one error line of a runner that refused to start (exit 2); imports may warn before it."""
    assert process.returncode == 2, process.stdout[-1000:] + process.stderr[-1000:]
    [error] = [line for line in process.stderr.splitlines() if line.startswith("error")]
    return error


@pytest.mark.slow
def test_second_runner_on_the_same_runs_dir_is_refused(interrupted_sweep):
    seen = interrupted_sweep
    b = seen["b"]
    error = _refusal(b)
    assert error.startswith("error: runs directory ") and "Traceback" not in b.stderr
    assert f"in use by another runner (pid {seen['a'].pid}," in error
    assert len(seen["logs_after_b"]) == 1  # B started no training


@pytest.mark.slow
def test_second_runner_on_the_same_results_dir_is_refused(interrupted_sweep):
    """Runner C has its own runs directory but A's results directory: it used to train everything again
    and the tables and archive kept whichever finished last."""
    seen = interrupted_sweep
    c = seen["c"]
    error = _refusal(c)
    assert error.startswith(f"error: results directory {seen['tmp'] / 'results'} is in use by another runner (pid "
                            f"{seen['a'].pid},") and error.endswith("or give this one another --results-dir")
    assert not (seen["tmp"] / "runs_c" / "ner").exists()  # C trained nothing


@pytest.mark.slow
def test_build_only_beside_a_runner_is_refused(interrupted_sweep):
    """--build-only took no lock: beside a runner with --redo-stale it restored the archived results of the stale runs
    that runner had just moved aside, so they would have counted as finished (seen on the small profile)."""
    seen = interrupted_sweep
    d = seen["d"]
    error = _refusal(d)
    assert error.startswith(f"error: runs directory {seen['tmp'] / 'runs'} is in use by another runner (pid "
                            f"{seen['a'].pid},") and error.endswith("(it builds the tables itself when its runs end)")
    written = set(seen["files_after_d"]) - set(seen["files_before_d"])  # (A's training writes on under runs/)
    assert not [f for f in written if f.startswith(str(seen["tmp"] / "results"))], written  # no table built


@pytest.mark.slow
def test_ctrl_c_stops_the_sweep(interrupted_sweep):
    seen = interrupted_sweep
    assert seen["a"].returncode == 130, seen["a_err"][-2000:]
    assert seen["stopped_after"] < 30
    assert "interrupted:" in seen["a_err"] and "Traceback" not in seen["a_err"]
    assert seen["trainings"] and not any(Path(f"/proc/{pid}").exists() for pid in seen["trainings"])
    runs = seen["tmp"] / "runs"
    assert len(list(runs.glob("ner/*/log.txt"))) == 1  # the queued run never started
    assert not list(runs.glob("ner/*/failed.json")) and not list(runs.glob("ner/*/result.json"))


@pytest.mark.parametrize("flags, message", [
    (["--jobs", "-1"], "error: --jobs: expected a number >= 1, found -1"),
    (["--threads", "-2"], "error: --threads: expected a number >= 1, found -2"),
    (["--cpus-per-run", "0"], "error: --cpus-per-run: expected a number > 0, found 0"),
    (["--results-dir", "{tmp}/p.json"], "error: --results-dir '{tmp}/p.json': expected a directory (or a path to "
                                        "make one), found a file"),
    (["--results-dir", "/proc/elmo-results"], "error: --results-dir '/proc/elmo-results': expected a directory the "
                                              "runner can write in, found No such file or directory writing "
                                              "in /proc"),
])
def test_bad_runner_flags_are_one_line_before_any_work(tmp_path, capsys, fake_training, flags, message):
    """--jobs -1 used to be a traceback, --threads -2 quietly accepted, a --results-dir that is a file a
    traceback after every training."""
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path) + [f.format(tmp=tmp_path) for f in flags]) == 2
    assert capsys.readouterr().err == message.format(tmp=tmp_path) + "\n"
    assert not fake_training


def test_a_knob_in_the_environment_is_said_to_be_ignored(tmp_path, capsys, fake_training, monkeypatch):
    """NUM_EPOCHS=1 in the environment steers `allennlp train`, but not the runner's runs (their knobs
    are the profile's: the runs' identity); it was ignored without a word."""
    monkeypatch.setenv("NUM_EPOCHS", "1")
    assert runner_main.main(runner_args(tmp_path, write_profile(tmp_path))) == 0
    assert "warning: environment variable(s) NUM_EPOCHS=1 ignored: the runner takes every knob from the profile " \
           "'p'" in capsys.readouterr().err


def test_a_full_disk_that_names_no_file_names_the_directories(tmp_path, capsys, fake_training, monkeypatch):
    """A write() on a full disk names no file; the line used to say 'writing a file'."""
    import runner.analysis.build

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner.analysis.build, "build_results", full)  # as the build step calls it
    assert runner_main.main(runner_args(tmp_path, write_profile(tmp_path))) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: no space left on device writing under {tmp_path / 'runs'} (") and \
        f"{tmp_path / 'results'} (" in err and "MB free)" in err and err.count("\n") == 1, err


def test_result_that_is_a_directory_is_one_line(tmp_path, capsys, fake_training):
    path = write_profile(tmp_path)
    assert runner_main.main(runner_args(tmp_path, path)) == 0
    [result_path] = result_paths(tmp_path)
    result_path.unlink()
    result_path.mkdir()
    capsys.readouterr()
    assert runner_main.main(runner_args(tmp_path, path, "--build-only")) == 0
    assert f"warning: {result_path}: expected a result file, found a directory" in capsys.readouterr().err
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    assert capsys.readouterr().err == (f"error: {result_path}: expected a result file, found a directory: remove it, "
                                       f"and the run is trained again\n")


def test_a_hub_path_is_refused_by_the_runner_with_why(tmp_path, capsys, fake_training):
    """An hf: data path used to get "the bundled sample" in the plan, then "does not exist"."""
    path = write_profile(tmp_path, task_knobs={"ner": {"TRAIN_PATH": "hf:conll2003:train"}})
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    err = capsys.readouterr().err
    assert "1. hf:conll2003:train: expected the ner TRAIN_PATH (data files or directories); found a Hugging Face hub " \
           "split, which only `allennlp train` run by hand reads (tasks/hub_data.py). The runner reads local " \
           "files" in err
    assert not fake_training


@pytest.mark.parametrize("run_order", ["tasks", "sweeps"])
def test_run_order_trains_whole_tasks_or_whole_sweeps_first(run_order):
    """The small profile: by task, SRL's 36 runs come first; by sweep, Table 1's 36 runs (six tasks, baseline and
    ELMo, 3 seeds) come first, in the profile's task order, a run shared with a later sweep going with Table 1."""
    from dataclasses import replace

    plan = plan_from(runner_main.parse_args(["--profile", "small"]))[1]
    plan = replace(plan, profile=replace(plan.profile, run_order=run_order))
    runs = plan_module.wanted_runs(plan, baselines_only=False)
    assert len(runs) == len(set(runs)) == 125
    first, table1 = runs[:36], {c.run for c in plan.cells if c.sweep == "table1"}
    if run_order == "sweeps":
        assert set(first) == table1
        assert [r.task for r in first] == sorted((r.task for r in first), key=plan.profile.tasks.index)
    else:
        assert {r.task for r in first} == {"srl"} and set(first) != table1


def test_no_wandb_turns_the_wandb_knob_off_for_every_run():
    """Where wandb's service cannot start (the lent H100 machine, 2026-11-27: every run stopped at its start), the
    runs go on without it; WANDB_MODE=disabled is no way out (allennlp's callback fails on a disabled run)."""
    class Run:
        task, run_id, cache_key, uses_elmo = "ner", "x", "k", False
        knob_dict = {"ELMO": "none", "ELMO_MIX": "weighted", "ELMO_LAMBDA": "0", "TRAIN_FRACTION": "1", "SEED": "1"}

    class Cell:
        run, sweep, column, x, seed = Run, "table1", "baseline", None, 1

    def wandb(*argv):
        settings = Settings.build(runner_main.parse_args(list(argv)), Profile(name="t", sweeps=("table1",)))
        return jobs.job_for(Run, "d", {}, Profile(name="t", sweeps=("table1",)), [Cell], settings)["extra_env"]["WANDB"]

    assert (wandb(), wandb("--no-wandb")) == ("true", "false")


@pytest.mark.slow
def test_wandb_logs_a_run_beside_a_tensorboard_built_for_a_newer_protobuf(tmp_path):
    """The lent H100 machine (2026-11-27): every run stopped at wandb.init with "MailboxError: transport failed".
    Its image's tensorboard has protobuf >= 5.26 gencode (summary_pb2 imports google.protobuf.runtime_version),
    which wandb's service loads; beside the lock's protobuf 3.20.3 that import fails and wandb 0.17.9's service died.
    Stand-in: a tensorboard package whose summary_pb2 imports what protobuf 3 lacks. wandb 0.19.11 logs on."""
    proto = tmp_path / "site" / "tensorboard" / "compat" / "proto"
    proto.mkdir(parents=True)
    for folder in (proto, proto.parent, proto.parent.parent):
        (folder / "__init__.py").write_text("")
    (proto / "summary_pb2.py").write_text("from google.protobuf import runtime_version as _runtime_version\n")
    script = ("import wandb\nrun = wandb.init(project='check', name='t')\nrun.log({'loss': 1.0})\nrun.finish()\n"
              "print('logged')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), child_pythonpath()]),
           "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true",
           "WANDB_ERROR_REPORTING": "false"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "logged" in done.stdout, done.stderr[-2000:]
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))


NAN_TRAINING = """
import json, os, sys
model, dev = sys.argv[1], float(sys.argv[2])
os.makedirs(model, exist_ok=True)
json.dump({"trainer": {"validation_metric": "+f1-measure-overall"}}, open(os.path.join(model, "config.json"), "w"))
json.dump({"best_validation_f1-measure-overall": dev, "test_f1-measure-overall": 0.25,
           "training_loss": float("nan")}, open(os.path.join(model, "metrics.json"), "w"))
"""


@pytest.mark.parametrize("dev", ["0.5", "nan"])
def test_a_nan_in_allennlp_metrics_is_null_or_a_named_failure(tmp_path, capsys, monkeypatch, dev):
    """allennlp writes NaN into metrics.json (a diverged loss); result.json took it, load_result refused it, and the
    run counted as unfinished on every invocation, trained again each time without a word."""
    trained = []
    monkeypatch.setattr(execute, "train_command", lambda task, model_dir: trained.append(model_dir) or
                        [sys.executable, "-c", NAN_TRAINING, str(model_dir), dev])
    monkeypatch.setenv("WANDB_MODE", "offline")
    path = write_profile(tmp_path)
    status = runner_main.main(runner_args(tmp_path, path, "--no-wandb"))
    err = "".join(capsys.readouterr())
    if dev == "nan":  # the run's own number: a crash named with its file, the sweep's exit status says so
        assert status == 1 and "metrics.json: best_validation_f1-measure-overall nan: expected a number" in err
        assert not result_paths(tmp_path)
    else:  # another metric: null in the record, and the run is finished
        assert status == 0
        [result] = result_paths(tmp_path)
        assert json.loads(result.read_text())["metrics"]["training_loss"] is None
        assert runner_main.main(runner_args(tmp_path, path, "--no-wandb")) == 0
        assert len(trained) == 1 and "1 already finished, 0 to do" in capsys.readouterr().out
