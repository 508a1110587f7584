"""The runner: resume after a kill, crashed runs, spec errors, and the Ray executor giving the local results."""
import dataclasses
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

from runner.execution.training import child_pythonpath
from runner.profile import Profile
from runner.spec import SpecError, expand_cells, load_sweeps, unique_runs

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

REPO = Path(__file__).resolve().parents[2]
# two quick NER runs (tiny model, 1 epoch, bundled sample data): baseline and ELMo
NO_PROFILE = Profile.of({"sweeps": ["figure1"]}, "t.json")  # a sweep's cells with no profile knobs
PROFILE = {"name": "t", "sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1"},
           "sweep_overrides": {"table1": {"seeds": {"default": 1}}}}


def runner_command(tmp_path, profile, *extra):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return [sys.executable, "-m", "runner", "--profile", str(path), "--runs-dir", str(tmp_path / "runs"),
            "--results-dir", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), *extra]


def runner_env(tmp_path):
    return {**os.environ, "PYTHONPATH": child_pythonpath(), "WANDB_MODE": "offline", "NLTK_DATA": str(tmp_path),
            "ALLENNLP_CACHE_ROOT": str(tmp_path / "allennlp")}


def results_of(runs_dir: Path):
    out = {}
    for path in sorted(runs_dir.glob("*/*/result.json")):
        r = json.loads(path.read_text())
        out[r["run_id"]] = (r["dev"], r["test"], r["mix_weights"])
    return out


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """Run the sweep, kill the runner once the first run has finished, start it again; returns what it saw."""
    tmp_path = tmp_path_factory.mktemp("local")
    command = runner_command(tmp_path, PROFILE)
    process = subprocess.Popen(command, cwd=REPO, env=runner_env(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 300
    while not list((tmp_path / "runs").glob("*/*/result.json")):
        assert process.poll() is None and time.time() < deadline, "runner ended before finishing a run"
        time.sleep(0.5)
    first = list((tmp_path / "runs").glob("*/*/result.json"))
    os.killpg(process.pid, signal.SIGKILL)  # the runner and the training it was running, mid-run
    process.wait()
    finished_before = {p: p.stat().st_mtime_ns for p in first}
    second = subprocess.run(command, cwd=REPO, env=runner_env(tmp_path), capture_output=True, text=True,
                            timeout=600)
    return tmp_path, finished_before, second


def test_resume_after_kill_reruns_only_unfinished_runs(local_sweep):
    tmp_path, finished_before, second = local_sweep
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert len(finished_before) == 1
    assert "2 runs in 1 sweeps, 1 already finished, 1 to do" in second.stdout
    # one short line for the run, in the table's unit (NER: %, 2 decimals); the finished run costs the one to do
    assert re.search(r"^to do: about \d+ (s|min) of runs, about \d+ (s|min) of wall time at 1 at a time", second.stdout,
                     re.M), second.stdout
    [line] = [text_line for text_line in second.stdout.splitlines() if text_line.startswith("[")]
    assert re.fullmatch(r"\[1/1\] ner (baseline|ELMo) seed 1: dev \d+\.\d\d, test \d+\.\d\d \(\d+ (s|min)\)",
                        line), line
    for path, mtime in finished_before.items():
        assert path.stat().st_mtime_ns == mtime, "a finished run was run again"
    assert len(list((tmp_path / "runs").glob("*/*/result.json"))) == 2
    assert not list((tmp_path / "runs").glob("*/*/failed.json"))
    table = (tmp_path / "results" / "table1.md").read_text()
    assert "| ner |" in table and "missing" in table  # other tasks were not in this profile: marked missing


def test_ray_executor_gives_the_local_results(local_sweep, tmp_path):
    """Without --address it starts a Ray instance of its own: Ray's default joined the cluster recorded in its temp
    directory (ray_current_cluster), and a dead one hung this test for 600 s. Here a record pointing nowhere, in a
    private temp directory (RAY_TMPDIR: no real cluster is touched)."""
    import tempfile

    local_path, _, _ = local_sweep
    command = runner_command(tmp_path, PROFILE, "--executor", "ray", "--cpus-per-run", "1")
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")  # a cluster started and gone
    env = {k: v for k, v in runner_env(tmp_path).items() if k != "RAY_ADDRESS"}
    try:
        done = subprocess.run(command, cwd=REPO, env={**env, "RAY_TMPDIR": str(ray_tmp)}, capture_output=True,
                              text=True, timeout=600)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "runner: ray: a local instance of its own" in done.stdout
    ours, local = results_of(tmp_path / "runs"), results_of(local_path / "runs")
    assert len(local) == 2 and ours == local
    def strip(text):
        return [line for line in text.splitlines() if not line.startswith("- **")]  # provenance differs
    assert strip((tmp_path / "results" / "table1.md").read_text()) == \
        strip((local_path / "results" / "table1.md").read_text())


@pytest.mark.parametrize("address, environment, niceness, joins", [
    (None, None, "0", "local"), ("ray://cluster:10001", None, None, "ray://cluster:10001"),
    (None, "10.0.0.1:6379", None, "10.0.0.1:6379")])
def test_a_local_ray_instance_runs_the_trainings_at_normal_priority(address, environment, niceness, joins,
                                                                   monkeypatch):
    """Ray starts its workers at nice 15, and the trainings inherit it: beside the small profile's two trainings the
    Ray test's got ~4 % of a core each and timed out. A local instance gets the local executor's 0; a cluster's own
    setting is left alone. Without --address or RAY_ADDRESS, a new local instance ("local"), never one found."""
    import ray

    from runner.execution.training import run_ray

    seen = []

    def init(**kwargs):
        seen.append((os.environ.get("RAY_worker_niceness"), kwargs["address"]))
        raise RuntimeError("stop here")

    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if environment:
        monkeypatch.setenv("RAY_ADDRESS", environment)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RuntimeError, match="stop here"):
        run_ray([], lambda job, status: None, address=address)
    assert seen == [(niceness, joins)]


def test_crashed_run_is_reported_and_the_sweep_goes_on(tmp_path):
    bad = tmp_path / "broken.txt"  # beyond the first records that the preflight reads: 3 columns where CoNLL-2003 has 4
    bad.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n" * 8000 + "EU NNP B-NP\n")
    profile = {**PROFILE, "task_knobs": {"ner": {"TRAIN_PATH": str(bad)}},
               "sweep_overrides": {"table1": {"seeds": {"default": 1},
                                              "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}]}}}
    done = subprocess.run(runner_command(tmp_path, profile, "--no-cache"), cwd=REPO, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "CRASHED" in done.stdout and "log.txt" in done.stdout
    assert re.search(r"^\[1/1\] ner baseline seed 1: CRASHED after \d+ (s|min): .+ \(log: \S+log\.txt\)$", done.stdout,
                     re.M), done.stdout
    failed = json.loads(next((tmp_path / "runs").glob("*/*/failed.json")).read_text())
    assert Path(failed["log"]).is_file()
    assert "crashed" in (tmp_path / "results" / "table1.md").read_text()


def test_shared_runs_are_trained_once_and_unknown_knobs_rejected():
    profile = Profile.of({"sweeps": ["table1", "table3", "figure1"], "knobs": {"SIZE": "tiny"}}, "p.json")
    sweeps = load_sweeps(profile, Path("p.json"))
    cells = expand_cells(profile, sweeps)
    runs = unique_runs(cells)
    # Figure 1's 100 % points and Table 3's srl input / snli both are Table 1 runs
    assert len(runs) < len(cells)
    srl_input = [c.run for c in cells if c.task == "srl" and c.run.knob_dict["ELMO"] == "input"
                 and c.run.knob_dict["TRAIN_FRACTION"] == "1.0" and c.seed == 1]
    assert len(set(srl_input)) == 1 and len(srl_input) >= 3
    with pytest.raises(SpecError, match="unknown knob"):
        expand_cells(dataclasses.replace(profile, knobs={"SIZ": "tiny"}), sweeps)


def test_paper_profile_lists_what_is_missing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "runner", "--profile", "paper", "--runs-dir", str(tmp_path)],
                          cwd=REPO, env={k: v for k, v in runner_env(tmp_path).items() if not k.endswith("_DIR")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "ELMO_DIR is not set" in done.stderr and "https://allennlp.org/elmo" in done.stderr
    assert "SQUAD_DIR is not set" in done.stderr and "Traceback" not in done.stderr


def test_profile_bilm_is_pretrained_finetuned_used_and_not_redone(tmp_path):
    from tests.elmo_module.test_pretrain import TINY_OPTIONS, grammar_lines

    (tmp_path / "train.txt").write_text(grammar_lines(300, 0))
    (tmp_path / "heldout.txt").write_text(grammar_lines(20, 1))
    (tmp_path / "options.json").write_text(json.dumps(TINY_OPTIONS))
    tuned = tmp_path / "bilm-ner"
    profile = {**PROFILE, "bilm": {
        "pretrain": {"out": str(tmp_path / "bilm"),  # the text under the data root, as the profiles name it
                     "args": ["--options", str(tmp_path / "options.json"), "--train", "${DATA_DIR}/train.txt",
                              "--heldout", "${DATA_DIR}/heldout.txt", "--tokens", "400", "--batch-size", "8",
                              "--unroll", "10", "--threads", "1"]},
        "finetune": {"tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"),
                     "args": ["--batch-size", "4", "--unroll", "5", "--threads", "1"]}},
        "task_knobs": {"ner": {"ELMO_OPTIONS": str(tuned / "options.json"),
                               "ELMO_WEIGHTS": str(tuned / "weights.hdf5")}}}
    env = {**runner_env(tmp_path), "DATA_DIR": str(tmp_path)}  # (before, pretrain was given "${DATA_DIR}/train.txt")
    def run(*extra):
        return subprocess.run(runner_command(tmp_path, profile, *extra), cwd=REPO, env=env,
                                            capture_output=True, text=True, timeout=600)
    first = run("--baselines-only")  # no biLM needed: nothing is pretrained
    assert first.returncode == 0, first.stderr[-2000:]
    assert not (tmp_path / "bilm").exists() and len(results_of(tmp_path / "runs")) == 1

    second = run()
    assert second.returncode == 0, second.stderr[-2000:]
    pretrained = json.loads((tmp_path / "bilm" / "perplexity.json").read_text())
    assert pretrained["history"][-1]["tokens_trained"] >= 400
    assert pretrained["history"][-1]["average"] < pretrained["history"][0]["average"]
    # the fine-tuning text is the task's training sentences as its reader gives them
    text = (tmp_path / "text" / "ner.train.txt").read_text().splitlines()
    first_sentence = [line.split()[0] for line in (REPO / "tasks/ner/sample_data/train.txt").read_text().splitlines()
                      if line.strip() and not line.startswith("-DOCSTART-")]
    assert text[0].split() == first_sentence[:len(text[0].split())]
    assert (tuned / "perplexity.json").is_file()
    elmo_runs = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/*/result.json")]
    assert [r["knobs"]["ELMO_OPTIONS"] for r in elmo_runs if r["knobs"]["ELMO"] != "none"] == [
        str(tuned / "options.json")]
    report = (tmp_path / "results" / "bilm.md").read_text()
    assert "| ner | " in report and "finetune" in report
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert set(summary["bilm"]["finetune"]) == {"ner"}

    third = run()  # every run finished: the biLM is not needed, no stage runs or is even looked at again
    assert third.returncode == 0 and "biLM pretraining" not in third.stdout, third.stderr[-2000:]
    assert "biLM fine-tuning" not in third.stdout and "0 to do" in third.stdout
    assert len(json.loads((tmp_path / "bilm" / "stages.json").read_text())) == 1
    (tmp_path / "runs" / "ner").rename(tmp_path / "runs-kept")  # runs to do again: the finished stages are reused
    fourth = run()
    assert fourth.returncode == 0 and "biLM pretraining: done" in fourth.stdout, fourth.stderr[-2000:]
    assert "biLM fine-tuning on ner: done" in fourth.stdout
    assert len(json.loads((tmp_path / "bilm" / "stages.json").read_text())) == 1

    # other args in the profile: the finished stages are not reused as if made by them (before, "done" whatever
    # their args; a checkpoint went on under the new ones)
    shutil.rmtree(tmp_path / "runs" / "ner")
    pretrain_args = profile["bilm"]["pretrain"]["args"]
    profile["bilm"]["pretrain"]["args"] = pretrain_args + ["--precision", "bfloat16"]
    fifth = run()
    assert fifth.returncode == 2 and "Traceback" not in fifth.stderr, fifth.stderr[-2000:]
    assert fifth.stderr.splitlines()[0] == (
        f"error: biLM pretraining: {tmp_path / 'bilm'} was made with other settings than the profile's (--precision "
        f"(absent) -> bfloat16): remove {tmp_path / 'bilm'} to make it again (the finished runs that read it are then "
        f"stale), or put the profile's args back")
    profile["bilm"]["pretrain"]["args"] = pretrain_args
    profile["bilm"]["finetune"]["args"] = ["--batch-size", "2", "--unroll", "5", "--threads", "1"]
    sixth = run()
    assert sixth.returncode == 2 and "biLM fine-tuning on ner:" in sixth.stderr.splitlines()[0], sixth.stderr[-2000:]
    assert "(--batch-size 4 -> 2)" in sixth.stderr.splitlines()[0]
    assert len(json.loads((tmp_path / "bilm" / "stages.json").read_text())) == 1  # nothing was trained


def test_a_stage_made_before_its_profile_named_the_data_root_is_still_its_stage(tmp_path, monkeypatch):
    """small's stages recorded ``../shared/data/...`` before its profile read ``${DATA_DIR}/...``: the next runner
    refused its own half-made biLM as made "with other settings" (2026-11-29). The same files are the same args,
    under any DATA_DIR; another file is not."""
    from runner.spec import SpecError
    from runner.stages.bilm_stages import _record_settings, check_settings

    _record_settings(tmp_path, ["--train", "../shared/data/lm/a.txt", "--epochs", "1"], {})
    for root in (None, str(tmp_path / "elsewhere")):
        monkeypatch.delenv("DATA_DIR", raising=False) if root is None else monkeypatch.setenv("DATA_DIR", root)
        check_settings(tmp_path, ["--train", "${DATA_DIR}/lm/a.txt", "--epochs", "1"], "biLM pretraining")
        with pytest.raises(SpecError, match=r"\(--train \.\./shared/data/lm/a\.txt -> \$\{DATA_DIR\}/lm/b\.txt\)"):
            check_settings(tmp_path, ["--train", "${DATA_DIR}/lm/b.txt", "--epochs", "1"], "biLM pretraining")


def test_pretraining_stopped_by_minutes_is_not_done(tmp_path):
    from runner.stages.bilm_stages import pretraining_done

    args = ["--tokens", "1000"]
    assert not pretraining_done(tmp_path, args)  # nothing written yet
    record = {"history": [{"tokens_trained": 0}, {"tokens_trained": 800}], "epochs_completed": 0}
    (tmp_path / "perplexity.json").write_text(json.dumps(record))
    assert not pretraining_done(tmp_path, args)  # a --minutes stop short of the budget: resume it
    record["history"].append({"tokens_trained": 1000})
    (tmp_path / "perplexity.json").write_text(json.dumps(record))
    assert pretraining_done(tmp_path, args)
    assert not pretraining_done(tmp_path, ["--epochs", "2"])  # 0 of 2 epochs


def _bilm_profile(tmp_path, tokens: int) -> dict:
    """PROFILE with a tiny pretrain + NER fine-tuning stage and 2 jobs (one slot for the stages, one for runs)."""
    from tests.elmo_module.test_pretrain import TINY_OPTIONS, grammar_lines

    (tmp_path / "train.txt").write_text(grammar_lines(300, 0))
    (tmp_path / "heldout.txt").write_text(grammar_lines(20, 1))
    (tmp_path / "options.json").write_text(json.dumps(TINY_OPTIONS))
    tuned = tmp_path / "bilm-ner"
    return {**PROFILE, "jobs": 2, "bilm": {
        "pretrain": {"out": str(tmp_path / "bilm"),
                     "args": ["--options", str(tmp_path / "options.json"), "--train", str(tmp_path / "train.txt"),
                              "--heldout", str(tmp_path / "heldout.txt"), "--tokens", str(tokens), "--batch-size",
                              "8", "--unroll", "10", "--threads", "1"]},
        "finetune": {"tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"),
                     "args": ["--batch-size", "4", "--unroll", "5", "--threads", "1"]}},
        "task_knobs": {"ner": {"ELMO_OPTIONS": str(tuned / "options.json"),
                               "ELMO_WEIGHTS": str(tuned / "weights.hdf5")}}}


def test_baselines_train_while_the_bilm_is_pretrained(tmp_path):
    """With 2 jobs on CPU the baseline run starts at once, beside the pretraining, not after the biLM stages (the
    mini profiles would leave a core idle for the hour of pretraining)."""
    import datetime

    profile = _bilm_profile(tmp_path, 4000)
    done = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "biLM stages run beside 1 baseline runs" in done.stdout
    results = {json.loads(p.read_text())["knobs"]["ELMO"]: p for p in (tmp_path / "runs").glob("*/*/result.json")}
    assert set(results) == {"none", "input"}
    baseline = json.loads(results["none"].read_text())
    baseline_start = results["none"].stat().st_mtime - baseline["wall_time_s"]
    stage = json.loads((tmp_path / "bilm" / "stages.json").read_text())[0]
    pretrain_end = datetime.datetime.strptime(stage["date"].rsplit(" ", 1)[0], "%Y-%m-%d %H:%M:%S").timestamp()
    assert baseline_start < pretrain_end - 1, (baseline_start, pretrain_end)
    assert json.loads(results["input"].read_text())["dev"] is not None


def _stage_span(stages_json: Path) -> tuple:
    """(start, end) in epoch seconds of the first stage a stages.json records."""
    import datetime

    stage = json.loads(stages_json.read_text())[0]
    end = datetime.datetime.strptime(stage["date"].rsplit(" ", 1)[0], "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return end - stage["wall_time_s"], end


def _vectors_profile(tmp_path, tokens: int, train: Path) -> dict:
    """_bilm_profile with a word-vectors stage (runner/stages/word_vectors.py) that NER's baseline reads as
    GLOVE_PATH."""
    profile = _bilm_profile(tmp_path, tokens)
    profile["vectors"] = {"out": str(tmp_path / "vectors"), "train": [str(train)], "dims": ["50:lowercase"],
                          "args": ["--min-count", "1", "--epochs", "1"]}
    profile["task_knobs"]["ner"]["GLOVE_PATH"] = str(tmp_path / "vectors" / "vectors.50d.lowercase.txt")
    return profile


def test_word_vectors_are_made_beside_the_pretraining_and_the_baselines_wait_for_them(tmp_path):
    """A fresh machine makes the small profile's word vectors (1.8 h on 1 thread) and pretrains its biLM (3.5 h
    or more): both at once on 2 jobs, not one after the other with a core idle; the baseline, which reads the
    vectors, starts once they are made, and its result records their checksum."""
    import hashlib

    profile = _vectors_profile(tmp_path, 20_000, tmp_path / "train.txt")
    done = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "biLM stages run beside the word vectors and 1 baseline runs" in done.stdout, done.stdout
    vectors_start, vectors_end = _stage_span(tmp_path / "vectors" / "stages.json")
    pretrain_start, pretrain_end = _stage_span(tmp_path / "bilm" / "stages.json")
    assert vectors_start < pretrain_end - 1 and pretrain_start < vectors_end, (vectors_start, pretrain_start)
    results = {json.loads(p.read_text())["knobs"]["ELMO"]: p for p in (tmp_path / "runs").glob("*/*/result.json")}
    assert set(results) == {"none", "input"}
    baseline = json.loads(results["none"].read_text())
    assert results["none"].stat().st_mtime - baseline["wall_time_s"] >= vectors_end - 1
    vectors = (tmp_path / "vectors" / "vectors.50d.lowercase.txt").read_bytes()
    assert baseline["reads"][profile["task_knobs"]["ner"]["GLOVE_PATH"]] == hashlib.sha256(vectors).hexdigest()


def test_a_stage_about_to_start_while_the_runner_stops_does_not_start(tmp_path):
    """The word vectors failed while the pretraining beside them was still reading its text: stop_runs() found no
    stage process, the pretraining started just after and the runner waited on it for hours (the test below hung
    600 s under load, 2026-11-29). A stage checks the stop and registers under one lock, as the runs do."""
    import runner.execution.training as execute
    from runner.spec import SpecError
    from runner.stages.bilm_stages import call_stage

    marker = tmp_path / "started"
    execute.STOPPING.set()
    try:
        with pytest.raises(SpecError, match="biLM pretraining: not started, the runner is stopping"):
            call_stage([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], tmp_path, tmp_path / "log.txt",
                  "biLM pretraining")
    finally:
        execute.STOPPING.clear()
    time.sleep(1)
    assert not marker.exists() and not execute.LIVE


def test_failed_word_vectors_start_no_baseline_and_stop_the_pretraining(tmp_path):
    # the vectors stage refuses held-out text (runner/stages/word_vectors.py): it fails at once
    heldout = tmp_path / "heldout"
    heldout.mkdir()
    (heldout / "text.txt").write_text("held out text\n")
    profile = _vectors_profile(tmp_path, 10_000_000, heldout / "text.txt")  # would pretrain for hours
    started = time.time()
    done = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "word vectors failed" in done.stderr.splitlines()[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and time.time() - started < 300
    assert not list((tmp_path / "runs").glob("*/*/log.txt"))  # no baseline started
    marker = str(tmp_path / "bilm")
    assert subprocess.run(["pgrep", "-f", f"elmo_module pretrain.*{marker}"], capture_output=True).returncode == 1


def test_a_fresh_machine_resumes_an_archive_of_runs_made_on_two_machines(tmp_path):
    """The small profile, 2026-11-27: a fresh machine (no artifacts/, no runs/) restored an archive holding runs of a
    first machine (stale on the second) beside the second's; the runner stopped before making the word vectors
    ("finished runs read different files at the same path"), so the profile could not go on from a fresh clone.
    Now the vectors are made first; the runs whose recorded checksum is not theirs train again (--redo-stale), beside
    the pretraining as the baselines still to do, the others are kept."""
    import hashlib

    profile = {**_vectors_profile(tmp_path, 4000, tmp_path / "train.txt"), "archive_runs": True,
               "sweep_overrides": {"table1": {"seeds": {"default": 2}}}}
    first = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    archive = {(r["knobs"]["ELMO"], r["seed"]): (p, r) for p in (tmp_path / "results" / "runs" / "ner").glob("*.json")
               for r in [json.loads(p.read_text())]}
    assert len(archive) == 4, sorted(archive)
    (other, other_result), (_, kept_result) = archive[("none", 1)], archive[("none", 2)]
    glove = profile["task_knobs"]["ner"]["GLOVE_PATH"]
    other.write_text(json.dumps({**other_result, "reads": {**other_result["reads"], glove: "f" * 64}}))
    archive[("input", 2)][0].unlink()  # an ELMo run still to do: the biLM stages run again
    for made_here in ("runs", "vectors", "bilm", "bilm-ner"):  # a fresh machine: none of them in git
        shutil.rmtree(tmp_path / made_here)

    again = subprocess.run(runner_command(tmp_path, profile, "--redo-stale"), cwd=REPO, env=runner_env(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    vectors = hashlib.sha256((tmp_path / "vectors" / "vectors.50d.lowercase.txt").read_bytes()).hexdigest()
    assert vectors == kept_result["reads"][glove]  # the same recipe on one CPU: the same bytes
    assert f"stale, runs again: {tmp_path / 'runs' / 'ner' / other_result['run_id']} ({glove}" in again.stdout
    # ... trained beside the biLM stages (with the vectors' core), not after them: only the ELMo run is left then
    assert "4 runs in 1 sweeps, 3 already finished, 1 to do" in again.stdout, again.stdout
    remade = json.loads((tmp_path / "runs" / "ner" / other_result["run_id"] / "result.json").read_text())
    assert remade["reads"][glove] == vectors and remade["made"] != other_result["made"]
    assert json.loads((tmp_path / "runs" / "ner" / kept_result["run_id"] / "result.json").read_text()) == kept_result
    assert (tmp_path / "runs" / "ner" / archive[("input", 2)][1]["run_id"] / "result.json").is_file()


def test_ctrl_c_while_baselines_train_beside_the_pretraining_stops_both(tmp_path):
    profile = _bilm_profile(tmp_path, 10_000_000)  # would pretrain for hours
    process = subprocess.Popen(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marker = str(tmp_path / "bilm")

    def stage_alive():
        return subprocess.run(["pgrep", "-f", f"elmo_module pretrain.*{marker}"], capture_output=True).returncode == 0

    deadline = time.time() + 300
    while not (stage_alive() and list((tmp_path / "runs").glob("ner/*/log.txt"))):
        if process.poll() is not None or time.time() > deadline:
            subprocess.run(["pkill", "-f", marker])
            process.kill()
            pytest.fail(f"no baseline run started beside the pretraining: {process.communicate()}")
        time.sleep(0.5)
    time.sleep(3)
    process.send_signal(signal.SIGINT)  # to the runner only, not its process group: it must stop its children
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    deadline = time.time() + 20
    while stage_alive() and time.time() < deadline:
        time.sleep(0.5)
    assert not stage_alive(), "the pretraining outlived the interrupted runner"
    assert "Traceback" not in err


def test_archived_runs_let_a_fresh_clone_resume(tmp_path):
    """"archive_runs": every finished run's result.json is copied to RESULTS/runs/ as it finishes; with the runs
    directory gone (a fresh clone: runs/ is not in git) the runner restores them and trains nothing again."""
    import shutil

    profile = {**PROFILE, "archive_runs": True}
    first = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    archived = sorted((tmp_path / "results" / "runs").glob("ner/*.json"))
    assert len(archived) == 2
    made = [json.loads(p.read_text())["made"] for p in archived]  # each run says how it was made
    assert all(m["git_commit"] and m["finished"].endswith("UTC") and "torch" in m["hardware"] for m in made)
    curves = [json.loads(p.read_text())["epochs"] for p in archived]  # the dev metric of every epoch (NUM_EPOCHS 1)
    assert all([e["epoch"] for e in c] == [0] and isinstance(e["validation"], float) for c in curves for e in c)
    table = (tmp_path / "results" / "table1.md").read_text()
    assert f"- **runs_made**: 2 runs at commit {made[0]['git_commit']}, finished " in table
    tsv = (tmp_path / "results" / "runs_made.tsv").read_text().splitlines()  # every commit, linked from the block
    assert len(tsv) == 2 and tsv[1].startswith(f"{made[0]['git_commit']}\t2\t")
    # per-example predictions: checked against the run's own dev and test F1, archived beside the result
    records = [json.loads(p.read_text())["predictions"] for p in archived]
    assert all(r["file"] == "predictions.json.gz" and r["metric"] == "span_f1" and set(r["units"]) == {"dev", "test"}
               for r in records), records
    assert len(list((tmp_path / "results" / "runs").glob("ner/*.predictions.json.gz"))) == 2
    shutil.rmtree(tmp_path / "runs")
    second = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "restored 2 finished runs" in second.stdout and "2 already finished, 0 to do" in second.stdout
    assert not list((tmp_path / "runs").glob("ner/*/log.txt"))  # nothing trained
    assert len(list((tmp_path / "runs").glob("ner/*/predictions.json.gz"))) == 2  # restored with the results
    def strip(text):
        return [line for line in text.splitlines() if not line.startswith(("- **date", "- **wall", "- **run_wall"))]
    assert strip((tmp_path / "results" / "table1.md").read_text()) == strip(table)
    # without the flag nothing is archived (the default profile's results stay tables only)
    plain = tmp_path / "plain"
    plain.mkdir()
    third = subprocess.run(runner_command(plain, PROFILE), cwd=REPO, env=runner_env(plain), capture_output=True,
                           text=True, timeout=600)
    assert third.returncode == 0 and not (plain / "results" / "runs").exists()


def test_a_profile_reuses_another_profiles_archived_runs_of_the_same_id(tmp_path):
    """"reuse_runs_from": the runs of the same id (the same knobs) archived by another profile are restored, not
    trained again, their records saying where from (and kept in this profile's archive); the others train. A
    profile naming a folder without archived runs is refused in one line."""
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(), second_dir.mkdir()
    first = subprocess.run(runner_command(first_dir, {**PROFILE, "archive_runs": True}), cwd=REPO,
                           env=runner_env(first_dir), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    profile = {**PROFILE, "archive_runs": True, "reuse_runs_from": [str(first_dir / "results")],
               "sweep_overrides": {"table1": {"seeds": {"default": 2}}}}  # seed 1 as the first profile's, and 2
    second = subprocess.run(runner_command(second_dir, profile), cwd=REPO, env=runner_env(second_dir),
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "restored 2 finished runs" in second.stdout and "2 of them from another profile" in second.stdout
    trained = {p.parent.name for p in (second_dir / "runs").glob("ner/*/log.txt")}
    archived = {p.stem: json.loads(p.read_text()) for p in (second_dir / "results" / "runs").glob("ner/*.json")}
    assert len(archived) == 4 and len(trained) == 2
    for run_id, record in archived.items():
        reused = record.get("reused_from")
        assert (reused is None) == (run_id in trained)
        assert reused is None or (reused.endswith(f"ner/{run_id}.json") and record["knobs"]["SEED"] == "1")
    refused = subprocess.run(runner_command(second_dir, {**profile, "reuse_runs_from": [str(tmp_path)]}), cwd=REPO,
                             env=runner_env(second_dir), capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "reuse_runs_from" in refused.stderr.splitlines()[0]


def test_killed_runner_leaves_no_pretraining_behind(tmp_path):
    """kill -9 of the runner (an OOM kill, a lost session): its stage process dies with it (PR_SET_PDEATHSIG), as
    its trainings do, and the next runner resumes the pretraining from its checkpoint."""
    profile = {**_bilm_profile(tmp_path, 10_000_000), "jobs": 1}
    process = subprocess.Popen(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pattern = f"elmo_module pretrain.*{tmp_path / 'bilm'}"
    def alive():
        return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0
    deadline = time.time() + 120
    while not alive():
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail("the pretraining stage did not start")
        time.sleep(0.5)
    process.kill()
    process.wait()
    deadline = time.time() + 20
    while alive() and time.time() < deadline:
        time.sleep(0.5)
    still = alive()
    subprocess.run(["pkill", "-f", pattern])
    assert not still, "the pretraining outlived the killed runner"


def test_fresh_clone_of_a_finished_profile_trains_nothing_and_keeps_the_biLM_report(tmp_path):
    """With "archive_runs" the profile's own biLM stages leave their records in RESULTS/bilm/ (options, perplexities,
    commands), never their weights (generated weights stay out of git). A fresh clone (no artifacts, no runs) whose
    archived runs are all finished runs no stage and no training, and still reports the biLM in bilm.md."""
    import shutil

    profile = {**_bilm_profile(tmp_path, 400), "archive_runs": True}
    def run():
        return subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                                     capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr[-2000:]
    kept = tmp_path / "results" / "bilm"
    assert sorted(p.name for p in (kept / "bilm-ner").iterdir()) == ["options.json", "perplexity.json", "stages.json"]
    assert (kept / "bilm" / "perplexity.json").is_file() and not list(kept.glob("*/*.hdf5"))
    report = (tmp_path / "results" / "bilm.md").read_text()
    assert "| ner |" in report and "Pretrained biLM" in report
    for directory in ("runs", "bilm", "bilm-ner", "text"):
        shutil.rmtree(tmp_path / directory)
    second = run()
    assert second.returncode == 0, second.stderr[-2000:]
    assert "2 already finished, 0 to do" in second.stdout and "biLM pretraining" not in second.stdout
    assert "biLM fine-tuning" not in second.stdout
    assert not list((tmp_path / "runs").glob("ner/*/log.txt")) and not (tmp_path / "bilm").exists()
    def strip(text):
        return [line for line in text.splitlines() if not line.startswith(("- **date", "- **wall", "- **run_wall",
                                                                                "- **runs_made"))]
    assert strip((tmp_path / "results" / "bilm.md").read_text()) == strip(report)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_runner_started_in_the_background_by_a_script_stops_on_sigint_and_sigterm(tmp_path, signum, code):
    """`./run_all.sh ... &` in a script starts the runner with SIGINT ignored (POSIX, for background jobs of a
    non-interactive shell): `kill -INT` must still stop it and its training, as must a scheduler's SIGTERM."""
    profile = {**PROFILE, "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "200"}}  # would train for many minutes
    def ignore_sigint():
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    process = subprocess.Popen(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint)
    marker = str(tmp_path / "runs")

    def training_alive():
        return subprocess.run(["pgrep", "-f", f"allennlp train.*{marker}"], capture_output=True).returncode == 0

    deadline = time.time() + 300
    while not (training_alive() and list((tmp_path / "runs").glob("ner/*/log.txt"))):
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail(f"no training started: {process.communicate()}")
        time.sleep(0.5)
    time.sleep(3)
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        subprocess.run(["pkill", "-f", marker])
        pytest.fail(f"the runner ignored signal {signum}")
    assert process.returncode == code, err[-2000:]
    assert "Traceback" not in err and "finished runs are kept" in err
    deadline = time.time() + 20
    while training_alive() and time.time() < deadline:
        time.sleep(0.5)
    assert not training_alive(), "the training outlived the stopped runner"


def test_archived_runs_and_biLM_are_not_ignored_by_git():
    """What a multi-session profile archives in results/<profile>/ must reach git, or a fresh clone has nothing to
    resume from. The .gitignore line `runs/` (meant for the top-level runs directory) also matched
    results/<profile>/runs/, so one session's 12 archived SNLI/SQuAD runs were never committed."""
    import json as json_module

    if subprocess.run(["git", "rev-parse"], cwd=REPO, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    profiles = [p for p in (REPO / "runner" / "profiles").glob("*.json")
                if json_module.loads(p.read_text()).get("archive_runs")]
    assert profiles, "no profile archives its runs"
    for path in profiles:
        results = f"results/{path.stem}"
        for kept in (f"{results}/runs/snli/table1-seed1.json", f"{results}/bilm/bilm-snli/perplexity.json"):
            ignored = subprocess.run(["git", "check-ignore", "-q", kept], cwd=REPO).returncode == 0
            assert not ignored, f"git ignores {kept}: a fresh clone could not resume {path.name}"
    # the working directories stay out of git
    for scratch in ("runs/mini/ner/x/result.json", "artifacts/mini/bilm/weights.hdf5", "cache/elmo/x"):
        assert subprocess.run(["git", "check-ignore", "-q", scratch], cwd=REPO).returncode == 0, scratch


def test_x_point_knobs_reach_only_their_runs_and_later_knobs_keep_run_ids():
    """Figure 1's smallest point may set more knobs (BATCHES_PER_EPOCH); they reach the runs at that x only. A knob
    added after runs were archived (runner/spec.py LATER_KNOBS) leaves the identity of every run that does not set
    it unchanged, so a multi-session profile's archived runs are still found."""
    import hashlib

    from runner.spec import LATER_KNOBS

    sweep = {"name": "figure1", "kind": "curve", "split": "dev", "tasks": ["ner"], "seeds": {"default": 1},
             "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}],
             "x": {"knob": "TRAIN_FRACTION", "values": ["0.1", "1.0"], "knobs": {"0.1": {"BATCHES_PER_EPOCH": "9"}}}}
    runs = {c.x: c.run for c in expand_cells(NO_PROFILE, [sweep])}
    assert runs["0.1"].knob_dict["BATCHES_PER_EPOCH"] == "9" and runs["1.0"].knob_dict["BATCHES_PER_EPOCH"] == ""
    full = runs["1.0"]
    before = [kv for kv in full.knobs if kv[0] not in LATER_KNOBS]  # the knobs as they were before those were added
    assert full.run_id == f"ner-{hashlib.sha1(json.dumps(['ner', before]).encode()).hexdigest()[:10]}"
    assert runs["0.1"].run_id != expand_cells(NO_PROFILE, [{**sweep, "x": {**sweep["x"], "knobs": {}}}])[0].run.run_id


def test_a_task_of_a_curve_may_have_its_own_x_values_and_point_knobs():
    """Figure 1's SRL points are other fractions of its file than SNLI's (each file is another share of the real
    training set): x.tasks.<task> replaces the shared values, full_percent and point knobs for that task only."""
    from runner.spec import check_sweep, x_axis

    sweep = {"name": "figure1", "kind": "curve", "split": "dev", "tasks": ["ner", "srl"], "seeds": {"default": 1},
             "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}],
             "x": {"knob": "TRAIN_FRACTION", "values": ["0.1", "1.0"], "knobs": {"0.1": {"BATCHES_PER_EPOCH": "9"}},
                   "tasks": {"srl": {"values": ["0.036", "1.0"], "full_percent": 2.78,
                                     "knobs": {"0.036": {"BATCHES_PER_EPOCH": "79"}}}}}}
    check_sweep(sweep, "figure1.json")
    assert x_axis(sweep, "ner")["values"] == ["0.1", "1.0"] and x_axis(sweep, "ner").get("full_percent") is None
    assert x_axis(sweep, "srl")["full_percent"] == 2.78 and x_axis(sweep, "srl")["knob"] == "TRAIN_FRACTION"
    runs = {(c.task, c.x): c.run.knob_dict for c in expand_cells(NO_PROFILE, [sweep])}
    assert sorted(runs) == [("ner", "0.1"), ("ner", "1.0"), ("srl", "0.036"), ("srl", "1.0")]
    assert runs[("srl", "0.036")]["TRAIN_FRACTION"] == "0.036" and runs[("srl", "0.036")]["BATCHES_PER_EPOCH"] == "79"
    assert runs[("ner", "0.1")]["BATCHES_PER_EPOCH"] == "9" and runs[("srl", "1.0")]["BATCHES_PER_EPOCH"] == ""


def test_every_archived_run_belongs_to_its_profiles_plan():
    """results/<profile>/runs/ holds the runs a fresh clone restores; one whose id the plan no longer has (knobs
    changed, a run identity that drifted) would be silently ignored and trained again."""
    from runner.execution.probes import plan_probes
    from runner.profile import load_profile
    from runner.spec import load_sweeps

    for archive in sorted((REPO / "results").glob("*/runs")):
        profile, path = load_profile(archive.parent.name)
        sweeps = load_sweeps(profile, path)
        ids = {r.run_id for r in unique_runs(expand_cells(profile, sweeps))} | {
            p.run_id for p in plan_probes(profile.knobs, sweeps)}
        stray = sorted(p.name for p in archive.glob("*/*.json") if p.stem not in ids)
        assert not stray, f"{archive}: archived runs not in the profile's plan: {stray}"


def _predictions_run(tmp_path, correct: int, knobs: dict):
    """A finished run of 1,000 dev pairs whose training reported dev accuracy 0.700, and whose predictions pass got
    ``correct`` of them right; its predictions refused when it finished (an earlier rule)."""
    import gzip

    from runner.records import write_json

    run_dir = tmp_path / "run"
    (run_dir / "model").mkdir(parents=True)
    counts = [[1, 1]] * correct + [[0, 1]] * (1000 - correct)
    data = {"format": 1, "metric": "accuracy", "splits": {"dev": {"ids": [str(i) for i in range(1000)],
                                                                  "counts": counts, "pred": [], "gold": []}}}
    (run_dir / "model" / "unit_predictions.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    metrics = {"best_validation_accuracy": 0.7}
    write_json(run_dir / "result.json", {"run_id": "run", "task": "snli", "seed": 1, "knobs": knobs,
                                         "metric": "accuracy", "dev": 0.7, "test": None, "metrics": metrics,
                                         "predictions": {"problem": "... not kept"}})
    return run_dir, metrics


@pytest.mark.parametrize("knobs, correct, kept", [
    ({"ELMO": "both", "ELMO_LAYER_NORM": "false"}, 700, True),
    ({"ELMO": "both", "ELMO_LAYER_NORM": "false"}, 698, False),  # 69.8 against 70.0: something is wrong
    ({"ELMO": "both", "ELMO_LAYER_NORM": "true"}, 698, True),  # batch-wide layer norm: other batches, other outputs
    ({"ELMO": "both", "ELMO_LAYER_NORM": "true"}, 680, False),  # but not 2 points
    ({"ELMO": "none", "ELMO_LAYER_NORM": "true"}, 698, False),  # no ELMo, no layer norm
])
def test_predictions_of_a_batch_wide_layer_norm_are_kept_with_the_difference(tmp_path, knobs, correct, kept):
    """The SNLI ELMo runs (layer norm over the whole batch, as the paper code) lost their predictions: 68.58 from
    the predictions pass against 68.72 reported. They are kept now, the difference recorded."""
    from runner.execution.training import PREDICTIONS, keep_predictions

    run_dir, metrics = _predictions_run(tmp_path, correct, knobs)
    record = keep_predictions(run_dir / "model", tmp_path, "accuracy", metrics, knobs)
    assert ("problem" not in record) == kept, record
    assert (tmp_path / PREDICTIONS).is_file() == kept
    if kept and correct != 700:
        assert record["batch_dependent"]["dev"] == {"predictions": 69.8, "reported": 70.0}


def test_a_raised_epoch_cap_retrains_only_the_runs_that_ran_to_the_old_one(tmp_path):
    """runner/spec.py patience_twin: a run archived under another NUM_EPOCHS, which patience stopped before its cap,
    answers for the same run under a cap at least as high (the same training, epoch for epoch); a run that ran to its
    old cap is trained again. Here the cap-1 baseline is rewritten as if patience had stopped it after 1 of 2 epochs;
    under a cap of 3 it is restored as finished, with its knobs saying 3 and `same_training_as` the archived run, and
    only the ELMo run (which ran to its cap of 1) is left to train."""
    profile = {**PROFILE, "archive_runs": True}
    first = subprocess.run(runner_command(tmp_path, profile), cwd=REPO, env=runner_env(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    archived = {json.loads(p.read_text())["knobs"]["ELMO"]: p
                for p in (tmp_path / "results" / "runs").glob("ner/*.json")}
    baseline = json.loads(archived["none"].read_text())
    assert baseline["knobs"]["NUM_EPOCHS"] == "1" and len(baseline["epochs"]) == 1
    archived["none"].write_text(json.dumps(dict(baseline, knobs={**baseline["knobs"], "NUM_EPOCHS": "2"})))
    shutil.rmtree(tmp_path / "runs")
    raised = {**profile, "knobs": {**profile["knobs"], "NUM_EPOCHS": "3"}}
    second = subprocess.run(runner_command(tmp_path, raised, "--build-only"), cwd=REPO, env=runner_env(tmp_path),
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "1 run(s) answered by their training under another epoch cap" in second.stdout, second.stdout
    restored = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("ner/*/result.json")]
    assert len(restored) == 1, "the ELMo run ran to its cap of 1: a cap of 3 must train it again"
    (result,) = restored
    assert result["knobs"]["NUM_EPOCHS"] == "3" and result["knobs"]["ELMO"] == "none"
    assert result["same_training_as"]["run_id"] == baseline["run_id"] != result["run_id"]
    assert result["same_training_as"]["NUM_EPOCHS"] == "2" and result["dev"] == baseline["dev"]
    assert (tmp_path / "runs" / "ner" / result["run_id"] / "predictions.json.gz").is_file()
    # and it is archived under its own id, so a later fresh clone restores it directly
    assert (tmp_path / "results" / "runs" / "ner" / f"{result['run_id']}.json").is_file()
    table = (tmp_path / "results" / "table1.md").read_text()
    assert "missing" in table.lower() or "—" in table  # the ELMo column waits for its run


def test_patience_ends_a_training_the_same_under_any_higher_cap(tmp_path):
    """The premise of patience_twin, on a real training: tiny SNLI (patience 5, reduce-on-plateau, as the small
    profile's) under caps of 12 and 20 trains the same epochs, losses equal to the bit, and patience ends both
    before the lower cap."""
    curves = []
    for cap in ("12", "20"):
        profile = {"name": "t", "sweeps": ["table1"], "tasks": ["snli"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": cap},
                   "sweep_overrides": {"table1": {"seeds": {"default": 1},
                                                  "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}]}}}
        out = tmp_path / cap
        out.mkdir()
        done = subprocess.run(runner_command(out, profile), cwd=REPO, env=runner_env(out), capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        (model,) = list((out / "runs").glob("snli/*/model"))
        epochs = sorted(model.glob("metrics_epoch_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        curves.append([{k: v for k, v in json.loads(p.read_text()).items() if k.startswith(("training_", "validation_"))
                        and not k.endswith(("duration", "memory_MB", "_mem_MB", "_start", "_end"))} for p in epochs])
    assert 0 < len(curves[0]) < 12, "patience must end the training before the lower cap for this test to mean anything"
    assert curves[0] == curves[1]
    assert all("training_loss" in epoch and "validation_loss" in epoch for epoch in curves[0])
