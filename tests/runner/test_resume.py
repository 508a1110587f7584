"""An unfinished run goes on from its last checkpoint (runner/execution/resume.py) and ends as the run never stopped
would have, or starts over saying why: checks with a stand-in training, and real runners stopped by real signals."""
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner.__main__ as runner_main
import runner.execution.resume as resume
import runner.execution.training as execute
from runner.pipeline import plan_from
from tests.runner.fakes import FAKE_TRAINING, NER_TRAIN, ONE_COLUMN, runner_args, start_runner, write_profile

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

# ---- an unfinished run goes on from its last checkpoint ----------------------------------------------------------

def test_training_code_compared_between_commits(tmp_path):
    """Committing results between sessions leaves a run resumable; a change to the code a training reads does not."""
    git = lambda *a: subprocess.check_output(["git", *a], cwd=tmp_path, text=True).strip()  # noqa: E731
    git("init", "-q"), git("config", "user.email", "t@t"), git("config", "user.name", "t")
    (tmp_path / "tasks").mkdir(), (tmp_path / "results").mkdir()
    (tmp_path / "tasks" / "a.py").write_text("x = 1\n")
    git("add", "."), git("commit", "-qm", "a")
    a = git("rev-parse", "--short", "HEAD")
    (tmp_path / "results" / "r.json").write_text("{}")
    git("add", "."), git("commit", "-qm", "results")
    b = git("rev-parse", "--short", "HEAD")
    (tmp_path / "tasks" / "a.py").write_text("x = 2\n")
    git("add", "."), git("commit", "-qm", "code")
    c = git("rev-parse", "--short", "HEAD")
    assert resume._same_training_code(a, b, tmp_path)
    assert not resume._same_training_code(a, c, tmp_path)
    assert not resume._same_training_code(a, b + "+changes", tmp_path)


def test_an_edit_outside_the_training_code_leaves_a_run_resumable(tmp_path, monkeypatch):
    """An uncommitted README edit made git_commit() "+changes", and a SQuAD run cut off after 29 epochs started over
    (2026-11-28); only a change to the code a training reads (TRAINING_CODE) may, committed or not."""
    git = lambda *a: subprocess.check_output(["git", *a], cwd=tmp_path, text=True).strip()  # noqa: E731
    git("init", "-q"), git("config", "user.email", "t@t"), git("config", "user.name", "t")
    (tmp_path / "tasks" / "ner").mkdir(parents=True)
    (tmp_path / "tasks" / "a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# r\n")
    (tmp_path / "tasks" / "ner" / "README.md").write_text("# ner\n")
    git("add", "."), git("commit", "-qm", "a")
    a = git("rev-parse", "--short", "HEAD")

    def attempt():
        return {"commit": execute.git_commit(tmp_path),
                "training_code_changed": execute.training_code_changed(tmp_path)}

    first = attempt()
    (tmp_path / "README.md").write_text("# r, edited\n")
    docs_edited = attempt()
    assert docs_edited["commit"] == a + "+changes" and not docs_edited["training_code_changed"]
    real = resume._same_training_code
    monkeypatch.setattr(resume, "_same_training_code", lambda x, y: real(x, y, tmp_path))
    assert resume._same_code_between(first, docs_edited)
    # a task's README is in a training code folder but no training reads it: edited, new or committed (2026-11-29:
    # a run restarted from epoch 0 with no word)
    (tmp_path / "tasks" / "ner" / "README.md").write_text("# ner, edited\n")
    (tmp_path / "tasks" / "NOTES.md").write_text("notes\n")
    assert not execute.training_code_changed(tmp_path) and resume._same_code_between(first, attempt())
    git("add", "."), git("commit", "-qm", "docs")
    assert resume._same_code_between(first, attempt())
    (tmp_path / "tasks" / "b.py").write_text("y = 1\n")  # a module git does not know yet
    assert execute.training_code_changed(tmp_path)
    assert not resume._same_code_between(first, attempt())
    (tmp_path / "tasks" / "b.py").unlink()
    (tmp_path / "tasks" / "a.py").write_text("x = 2\n")
    assert not resume._same_code_between(first, attempt())
    git("add", "."), git("commit", "-qm", "code")
    assert not resume._same_code_between(first, attempt())
    # an attempt recorded before training_code_changed was kept: any "+changes" still counts against it
    assert not resume._same_code_between({"commit": a + "+changes"}, first)


def _checkpointed_run(tmp_path, knobs, epochs=2, average=None):
    """A run directory as an attempt cut off after ``epochs`` epochs leaves it (with a moving average's shadows)."""
    import torch

    run_dir, model = tmp_path / "run", tmp_path / "run" / "model"
    model.mkdir(parents=True)
    (run_dir / "log.txt").write_text("# first attempt\n")
    torch.save({"metric_tracker": {"best_epoch": epochs - 1}, "moving_average": average and {"shadows": average}},
               model / f"training_state_e{epochs}_b0.th")
    torch.save({"weights": epochs, "buffer": "kept"}, model / f"model_state_e{epochs}_b0.th")
    torch.save({"weights": "an older best"}, model / "best.th")  # killed before allennlp linked the new best
    (run_dir / execute.ATTEMPTS).write_text(json.dumps([{"commit": "abc1234", "hardware": execute.hardware(),
                                                         "knobs": knobs, "started": time.time() - 100,
                                                         "from_epoch": 0, "reads": None}]))
    return run_dir


CHANGES = {"none": None, "cut_short_checkpoint": None, "model_state_alone": None, "moving_average": None,
           "first_epoch_best": None,
           "knobs": "its knobs changed", "code": "the training code (elmo_module, tasks, jsonnet_configs) changed",
           "crashed": "its last attempt crashed", "best_gone": "the weights of its best epoch (1)"}


@pytest.mark.parametrize("change", CHANGES)
def test_what_lets_an_unfinished_run_go_on(change, tmp_path, fake_training, monkeypatch, capsys):
    import torch

    knobs = {"SEED": "1", "SIZE": "tiny"}
    average = {"weights": "averaged"} if change == "moving_average" else None
    run_dir = _checkpointed_run(tmp_path, knobs, average=average)
    monkeypatch.setattr(execute, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(resume, "_same_training_code", lambda a, b: change != "code")
    monkeypatch.setattr(execute, "training_code_changed", lambda: False)
    best_at_start, named = [], []  # best.th as the training starts (deleted once the run is done), what the state names
    newer_at_start = []  # a file of a checkpoint newer than the one it goes on from, as the training starts
    real = execute.train_command

    def command(task, model):
        best, state = Path(model) / "best.th", Path(model) / "training_state_e2_b0.th"
        best_at_start.append(torch.load(best, weights_only=False) if best.is_file() else None)
        named.append(torch.load(state, weights_only=False).get("best_model_filename") if state.is_file() else None)
        newer_at_start.append(any((Path(model) / f"{k}_state_e3_b0.th").exists() for k in ("training", "model")))
        return real(task, model)

    monkeypatch.setattr(execute, "train_command", command)
    if change == "knobs":
        knobs = {**knobs, "SEED": "2"}
    if change == "crashed":
        (run_dir / "failed.json").write_text("{}")
    if change == "cut_short_checkpoint":  # the newest checkpoint was being written when the session ended
        (run_dir / "model" / "training_state_e3_b0.th").write_bytes(b"\x80\x02cut")
        (run_dir / "model" / "model_state_e3_b0.th").write_bytes(b"")
    if change == "model_state_alone":  # killed between the two writes of the newest checkpoint (model_state first)
        torch.save({"weights": 3}, run_dir / "model" / "model_state_e3_b0.th")
    if change in ("first_epoch_best", "best_gone"):  # epoch 1 stays the best; allennlp's checkpoint names no best.th
        torch.save({"metric_tracker": {"best_epoch": 0}, "best_model_filename": None},
                   run_dir / "model" / "training_state_e2_b0.th")
    if change == "best_gone":
        (run_dir / "model" / "best.th").unlink()
    status = execute.execute_run("ner", knobs, str(run_dir), {})
    assert status["status"] == "done", status
    result = json.loads((run_dir / "result.json").read_text())
    log = (run_dir / "log.txt").read_text()
    if CHANGES[change] is None:
        assert "--recover" in log and log.startswith("# first attempt")
        assert "attempt 2: goes on from the checkpoint after epoch 2" in log
        assert [a["from_epoch"] for a in result["attempts"]] == [0, 2]
        assert result["wall_time_s"] >= 99  # the first attempt's kept work counts
        assert newer_at_start == [False]  # `--recover` takes the newest model_state for the checkpoint
        # the checkpoint's epoch was the best: best.th is its state, with the averaged weights where it has them;
        # an earlier best stays; and the checkpoint names best.th, so that allennlp tests it if no later epoch wins
        weights = "averaged" if change == "moving_average" else 2
        kept = {"weights": "an older best"} if change == "first_epoch_best" else {"weights": weights, "buffer": "kept"}
        assert best_at_start == [kept] and named == [str(run_dir / "model" / "best.th")]
    else:  # it starts over, saying why (the log and the runner's output)
        assert "--recover" not in log and "first attempt" not in log and result["attempts"] is None
        assert result["wall_time_s"] < 99
        assert f"# starts from scratch: {CHANGES[change]}" in log
        assert f"starts from scratch: {CHANGES[change]}" in capsys.readouterr().out


@pytest.mark.parametrize("cache", ["same", "rebuilt_elsewhere", "gone"])
def test_a_run_goes_on_with_the_activation_cache_it_started_with(cache, tmp_path, monkeypatch):
    """`allennlp train --recover` refuses any configuration but the one the run started with, the cache's path
    included; a cache built afresh under another name since (its key changed: on 2026-11-27 the coref runs' key
    followed the seed of the first run needing it) crashed the run at once. It goes on with its own cache while that
    is whole, and starts over when that is gone."""
    knobs = {"SEED": "1", "SIZE": "tiny"}
    run_dir = _checkpointed_run(tmp_path, knobs)
    old, new = tmp_path / "cache" / "ner-old", tmp_path / "cache" / "ner-new"
    for directory in (old, new):
        directory.mkdir(parents=True)
        (directory / "meta.json").write_text("{}")
    embedder = {"type": "elmo_module", "cache_dir": str(new if cache == "same" else old)}
    (run_dir / "model" / "config.json").write_text(json.dumps({"model": {"embedders": {"elmo": embedder}}}))
    if cache == "gone":
        shutil.rmtree(old)
    monkeypatch.setattr(execute, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(resume, "_same_training_code", lambda a, b: True)
    monkeypatch.setattr(execute, "training_code_changed", lambda: False)
    seen = tmp_path / "seen_cache.txt"
    record = f"open({str(seen)!r}, 'w').write(os.environ['ELMO_CACHE'])\n"
    monkeypatch.setattr(execute, "train_command",
                        lambda task, model: [sys.executable, "-c", FAKE_TRAINING + record, str(model)])
    status = execute.execute_run("ner", knobs, str(run_dir), {"ELMO_CACHE": str(new)})
    assert status["status"] == "done", status
    resumed = "--recover" in (run_dir / "log.txt").read_text()
    assert (resumed, seen.read_text()) == {"same": (True, str(new)), "rebuilt_elsewhere": (True, str(old)),
                                           "gone": (False, str(new))}[cache]


def test_runs_under_way_go_on_first(tmp_path, fake_training, monkeypatch):
    """The end of a session cuts off the runs it trains: the next runner trains them before any other run (each is
    resumable only while the training code stays as it was), here the last of three seeds before the first."""
    import torch

    three = {"table1": {**ONE_COLUMN["table1"], "seeds": {"default": 3}}}
    path = write_profile(tmp_path, sweep_overrides=three)
    assert runner_main.main(runner_args(tmp_path, path, "--jobs", "1")) == 0
    first, _, last = fake_training[:]
    for model in (first, last):  # both unfinished; the last seed was cut off after epoch 2's checkpoint
        (model.parent / "result.json").unlink()
    torch.save({"metric_tracker": {"best_epoch": 1}}, last / "training_state_e2_b0.th")
    torch.save({"weights": 2}, last / "model_state_e2_b0.th")
    monkeypatch.setattr(execute, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(resume, "_same_training_code", lambda a, b: True)
    monkeypatch.setattr(execute, "training_code_changed", lambda: False)
    [run] = [r for r in plan_from(runner_main.parse_args(runner_args(tmp_path, path)))[1].runs
             if r.run_id == last.parent.name]
    (last.parent / execute.ATTEMPTS).write_text(json.dumps([{
        "commit": "abc1234", "hardware": execute.hardware(), "knobs": run.knob_dict, "started": time.time() - 100,
        "from_epoch": 0, "reads": json.loads((last.parent / "reads.json").read_text())}]))
    fake_training.clear()
    assert runner_main.main(runner_args(tmp_path, path, "--jobs", "1")) == 0
    assert fake_training == [last, first]


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    """A real runner trains a 5-epoch run; after its checkpoint of epoch 2 the runner and its training are killed
    (SIGKILL to the process group: what the end of a session does); a second runner finishes the run."""
    tmp_path = tmp_path_factory.mktemp("resume")
    data = tmp_path / "train.txt"
    data.write_text(NER_TRAIN.read_text() * 30)
    path = write_profile(tmp_path, knobs={"SIZE": "tiny", "NUM_EPOCHS": "5"},
                         task_knobs={"ner": {"TRAIN_PATH": str(data)}})
    env, _, a = start_runner(tmp_path, path)
    try:
        deadline = time.time() + 300
        while not list((tmp_path / "runs").glob("ner/*/model/training_state_e2_b0.th")):
            assert a.poll() is None and time.time() < deadline, "the first runner ended or did not train"
            time.sleep(0.2)
        time.sleep(0.5)  # (the model_state file is written just before)
    finally:
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
    killed = time.time()
    [run_dir] = [p.parent.parent for p in (tmp_path / "runs").glob("ner/*/model/config.json")]
    assert not (run_dir / "result.json").exists()
    # and as if the kill had landed between allennlp's two writes of the next checkpoint (checkpointer.py:206-214,
    # the model's state first): its model_state alone, which `--recover` took for the newest checkpoint and crashed
    # on the training_state it lacks (CI, 2026-11-29)
    newest = max(int(p.name[len("model_state_e"):-len("_b0.th")]) for p in run_dir.glob("model/model_state_e*_b0.th"))
    model = run_dir / "model"
    shutil.copy(model / f"model_state_e{newest}_b0.th", model / f"model_state_e{newest + 1}_b0.th")
    with pytest.MonkeyPatch.context() as patch:  # the second runner in this process: a working tree with changes
        patch.setattr(resume, "_same_training_code", lambda a, b: True)  # (a clean clone needs no patch)
        patch.setattr(execute, "training_code_changed", lambda: False)
        for name, value in env.items():
            patch.setenv(name, value)
        returncode = runner_main.main([*runner_args(tmp_path, path), "--jobs", "1"])
        alone = tmp_path / "uninterrupted"  # the same run, never stopped
        alone.mkdir()
        uninterrupted = runner_main.main([*runner_args(alone, path), "--jobs", "1"])
    [alone_dir] = [p.parent for p in (alone / "runs").glob("ner/*/result.json")]
    return {"run_dir": run_dir, "killed": killed, "returncode": returncode, "alone_dir": alone_dir,
            "alone_returncode": uninterrupted}


def test_a_killed_run_goes_on_from_its_checkpoint(killed_and_resumed):
    seen = killed_and_resumed
    run_dir = seen["run_dir"]
    assert seen["returncode"] == 0
    result = json.loads((run_dir / "result.json").read_text())
    [first, second] = result["attempts"]
    assert first["from_epoch"] == 0 and second["from_epoch"] >= 2
    assert [e["epoch"] for e in result["epochs"]] == [0, 1, 2, 3, 4]
    model = run_dir / "model"  # the epochs before the checkpoint were not trained again
    assert ((model / "metrics_epoch_0.json").stat().st_mtime < seen["killed"]
            < (model / "metrics_epoch_4.json").stat().st_mtime)
    assert result["dev"] > 0 and "attempt 2: goes on from the checkpoint" in (run_dir / "log.txt").read_text()


def test_a_killed_and_resumed_run_trains_exactly_as_the_uninterrupted_one(killed_and_resumed):
    """Its batches and dropout masks after the restart are those of a run never stopped: the random generators'
    states go with each checkpoint (tasks/checkpoint_loading.py RandomState). Before it, the first epoch after the
    restart saw other batches (the replay runs no validation, whose sampler draws python's generator) and other
    dropout masks (NER's dropout 0.5): its losses, and all after, differed."""
    seen = killed_and_resumed
    assert seen["alone_returncode"] == 0 and seen["alone_dir"].name == seen["run_dir"].name
    assert json.loads((seen["alone_dir"] / "result.json").read_text())["attempts"] is None  # (one attempt)

    def losses(run_dir):
        return [{key: json.loads((run_dir / "model" / f"metrics_epoch_{epoch}.json").read_text())[key]
                 for key in ("training_loss", "validation_loss")} for epoch in range(5)]

    assert losses(seen["run_dir"]) == losses(seen["alone_dir"])


@pytest.fixture(scope="module")
def first_epoch_best(tmp_path_factory):
    """A 4-epoch NER run whose first epoch stays its best (dev F1 11.1, then 0: tiny model, bundled sample x 30,
    seed 1), trained once uninterrupted, and once stopped by a real signal as soon as its checkpoint after epoch 1
    loads, then finished by a second runner: SIGTERM to the runner alone (it stops its training, as a scheduler's
    stop does) and SIGKILL to its process group (a session's end). Returns the run directories."""
    tmp = tmp_path_factory.mktemp("first_epoch")
    data = tmp / "train.txt"
    data.write_text(NER_TRAIN.read_text() * 30)
    runs = {}
    for case in ("uninterrupted", "SIGTERM", "SIGKILL"):
        path = write_profile(tmp / case, knobs={"SIZE": "tiny", "NUM_EPOCHS": "4"},
                             task_knobs={"ner": {"TRAIN_PATH": str(data)}}) if (tmp / case).mkdir() is None else None
        env, _, a = start_runner(tmp / case, path)
        try:
            deadline = time.time() + 300
            while case != "uninterrupted":
                states = list((tmp / case / "runs").glob("ner/*/model/training_state_e1_b0.th"))
                if states and _loads(states[0]):
                    (a.send_signal if case == "SIGTERM" else lambda s, a=a: os.killpg(a.pid, s))(getattr(signal, case))
                    break
                assert a.poll() is None and time.time() < deadline, "the first runner ended or did not train"
                time.sleep(0.05)
            out, err = a.communicate(timeout=300)
        finally:
            if a.poll() is None:
                os.killpg(a.pid, signal.SIGKILL)
                a.wait()
        assert a.returncode == {"uninterrupted": 0, "SIGTERM": 143, "SIGKILL": -9}[case], out[-2000:] + err[-2000:]
        if case != "uninterrupted":
            with pytest.MonkeyPatch.context() as patch:  # the second runner in this process; in a working tree with
                patch.setattr(resume, "_same_code_between", lambda a, b: True)  # changes, both record them
                for name, value in env.items():
                    patch.setenv(name, value)
                assert runner_main.main([*runner_args(tmp / case, path), "--jobs", "1"]) == 0
        [runs[case]] = [p.parent for p in (tmp / case / "runs").glob("ner/*/result.json")]
    return runs


def _loads(path) -> bool:
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=False)
        return True
    except Exception:  # noqa: BLE001  (still being written)
        return False


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_run_stopped_after_its_first_epoch_tests_its_best_epoch(first_epoch_best, stop):
    """Stopped once its checkpoint after epoch 1 existed, the run was tested on its last epoch's weights when the
    first stayed the best (allennlp's first checkpoint names no best model): SST-5 ELMo seed 3, test 30.0 -> 23.0,
    and its predictions refused (2026-11-29). Resumed, it is the run never stopped: every metric, epoch and
    prediction."""
    alone, resumed = first_epoch_best["uninterrupted"], first_epoch_best[stop]
    a, b = (json.loads((d / "result.json").read_text()) for d in (alone, resumed))
    assert a["metrics"]["best_epoch"] == 0 and len(a["epochs"]) == 4  # the case: the first epoch stays the best
    assert [x["from_epoch"] for x in b["attempts"]] == [0, 1]  # resumed from the checkpoint after epoch 1
    metrics = [{k: v for k, v in r["metrics"].items() if k.startswith(("best_", "training_", "validation_", "test_"))
                and "memory" not in k and k != "training_duration"} for r in (a, b)]
    assert metrics[0] == metrics[1] and metrics[0]["test_loss"]
    assert (b["dev"], b["test"], b["epochs"]) == (a["dev"], a["test"], a["epochs"])
    assert "problem" not in b["predictions"] and b["predictions"]["units"] == a["predictions"]["units"]
    splits = [json.loads(gzip.decompress((d / execute.PREDICTIONS).read_bytes()))["splits"] for d in (alone, resumed)]
    assert splits[0] == splits[1]
