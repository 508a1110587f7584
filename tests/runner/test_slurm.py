"""--executor slurm (runner/execution/slurm.py): the sbatch script against a recorded one and the settings, without a
cluster; then real runners against a real one-node SLURM on loopback (tests/runner/slurm_cluster.py, started and
stopped here; skipped with the reason where Debian's slurmctld, slurmd, slurm-client and munge are not installed):
the local executor's tables, a job cut off twice (SLURM's warning signal: requeued; scancel: submitted again) ending
as the run never stopped, a crashed run reported while the sweep goes on, Ctrl-C / SIGTERM cancelling exactly the
runner's jobs, a second runner refused."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner.__main__ as runner_main
from runner.execution.resume import training_code_changed
from runner.execution.slurm import (
    NO_SHARED_FS,
    NoProgress,
    SlurmOptions,
    SlurmRun,
    Watched,
    finish,
    run_slurm,
    sbatch_script,
    signals_held,
)
from runner.execution.training import STOPPING, child_pythonpath
from runner.paths import REPO
from runner.pipeline import plan_from
from runner.spec import SpecError
from tests.runner.fakes import NER_TRAIN
from tests.runner.slurm_cluster import Cluster, available

TINY = {"name": "t", "sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1"},
        "sweep_overrides": {"table1": {"seeds": {"default": 1}}}}  # two quick NER runs: baseline and ELMo
ONE_RUN = {"table1": {"seeds": {"default": 1}, "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}]}}

# ---- without a cluster ---------------------------------------------------------------------------------------------

RECORDED = """#!/bin/bash

# Parameters
#SBATCH --account=nlp
#SBATCH --constraint=a100
#SBATCH --cpus-per-task=4
#SBATCH --error=RUN_DIR/slurm/%j_0_log.err
#SBATCH --exclusive
#SBATCH --gpus-per-node=1
#SBATCH --job-name=elmo-ner-0123456789
#SBATCH --mem=12288M
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=RUN_DIR/slurm/%j_0_log.out
#SBATCH --partition=gpu
#SBATCH --qos=high
#SBATCH --requeue
#SBATCH --signal=USR2@90
#SBATCH --time=120
#SBATCH --wckey=submitit

# setup
cd REPO
export PYTHONPATH=PYTHONPATH

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output RUN_DIR/slurm/%j_%t_log.out --error RUN_DIR/slurm/%j_%t_log.err PYTHON -u -m \
submitit.core._submit RUN_DIR/slurm
"""


def test_the_sbatch_script_is_the_recorded_one(tmp_path):
    """A run's job as submitit writes it (submitit's own tests compare with a recorded script too): the plan's
    resources, the place, the extra options, the requeue and warning signal, the logs beside the run."""
    run_dir = tmp_path / "runs" / "ner" / "ner-0123456789"
    options = SlurmOptions(cpus=4, gpus=1, time_min=120, mem_gb=12, partition="gpu", account="nlp", qos="high",
                           sbatch=("--constraint=a100", "--exclusive"))
    script = sbatch_script({"task": "ner", "run_dir": str(run_dir), "extra_env": {}}, options)
    general = (script.replace(str(run_dir), "RUN_DIR").replace(f"cd {REPO}", "cd REPO")
               .replace(f"PYTHONPATH={child_pythonpath()}", "PYTHONPATH=PYTHONPATH").replace(sys.executable, "PYTHON"))
    assert general == RECORDED.replace("-m \\\n", "-m "), script
    assert not (run_dir / "slurm").exists()  # writing the script submits and makes nothing
    short = sbatch_script({"task": "ner", "run_dir": str(run_dir), "extra_env": {}}, SlurmOptions(time_min=1))
    assert "#SBATCH --signal=USR2@15" in short and "--gpus" not in short and "--mem" not in short  # warned in time


def test_slurm_settings_come_from_the_flag_then_the_profile_then_the_default(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**TINY, "slurm": {"partition": "cpu", "time_min": 30, "sbatch": ["--comment=a"]}}))
    base = ["--profile", str(path), "--runs-dir", str(tmp_path / "r"), "--results-dir", str(tmp_path / "s"),
            "--executor", "slurm"]
    settings, _ = plan_from(runner_main.parse_args([*base, "--slurm-time", "5", "--slurm-sbatch=--nice=1"]))
    assert (settings.slurm_partition, settings.slurm_time_min, settings.slurm_sbatch, settings.slurm_retries,
            settings.slurm_max_jobs) == ("cpu", 5, ("--comment=a", "--nice=1"), 3, None)
    settings, _ = plan_from(runner_main.parse_args([*base, "--slurm-partition", "gpu", "--device", "cuda"]))
    assert (settings.slurm_partition, settings.slurm_time_min, settings.gpus_per_run) == ("gpu", 30, 1.0)


@pytest.mark.parametrize("extra, profile_slurm, line", [
    (["--cpus-per-run", "1.5"], {}, "error: --cpus-per-run: expected a whole number with --executor slurm, found 1.5"),
    (["--slurm-time", "0"], {}, "error: --slurm-time: expected a number >= 1, found 0"),
    (["--slurm-sbatch", "constraint=a100"], {}, "error: --slurm-sbatch: expected one sbatch option such as "
                                                  "--constraint=a100, found 'constraint=a100'"),
    ([], {"time": 5}, "error: profile key 'slurm': unknown key 'time' (expected: partition, account, qos, time_min, "
                      "mem_gb, sbatch, max_jobs, retries)"),
    ([], {"max_jobs": 0}, "error: profile key 'slurm': 'max_jobs' must be an integer >= 1, found 0")])
def test_bad_slurm_settings_are_one_line(extra, profile_slurm, line, tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**TINY, "slurm": profile_slurm}))
    assert runner_main.main(["--profile", str(path), "--runs-dir", str(tmp_path / "r"), "--results-dir",
                             str(tmp_path / "s"), "--executor", "slurm", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err == line


@pytest.mark.slow  # the preflight imports allennlp
def test_the_dry_run_prints_each_jobs_sbatch_script_and_submits_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no sbatch to call even by mistake (the preflight runs no program)
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**TINY, "slurm": {"partition": "debug", "time_min": 30}}))
    assert runner_main.main(["--profile", str(path), "--runs-dir", str(tmp_path / "runs"), "--results-dir",
                             str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), "--executor",
                             "slurm", "--dry-run", "--slurm-sbatch=--constraint=a100"]) == 0
    out = capsys.readouterr().out
    assert "--executor slurm would submit 2 job(s)" in out
    scripts = out.split("#!/bin/bash")[1:]
    assert len(scripts) == 2 and all("#SBATCH --partition=debug\n" in script and "#SBATCH --time=30\n" in script
                                     and "#SBATCH --constraint=a100\n" in script for script in scripts), out
    assert re.findall(r"^# ---- (ner \w+ seed 1): ", out, re.M) == ["ner baseline seed 1", "ner ELMo seed 1"]
    assert not list(tmp_path.glob("runs/*/*/slurm"))


def test_no_slurm_on_this_machine_is_one_line(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SpecError, match=r"^--executor slurm: sbatch, squeue, srun and scancel are not all on PATH: "
                                        r"run the runner on a machine of the SLURM cluster \(a login node\)$"):
        run_slurm([{"task": "ner", "run_dir": "/nonexistent/r", "label": "x"}], print, False, SlurmOptions())


@pytest.mark.parametrize("ran_s, time_min, epoch_ended, requeued", [
    (100, 1, False, False),  # the time limit reached with no epoch ended since the job started: it would loop
    (100, 1, True, True),  # an epoch more: requeued, as often as each job ends one
    (100, 60, False, True)])  # preempted early in the job: requeued whatever the progress
def test_a_job_is_requeued_at_its_time_limit_while_it_makes_progress(ran_s, time_min, epoch_ended, requeued,
                                                                     tmp_path):
    (tmp_path / "model").mkdir()
    job = SlurmRun(time_min)
    job.started = time.time() - ran_s
    state = tmp_path / "model" / "training_state_e1_b0.th"
    state.write_bytes(b"")
    os.utime(state, (job.started + (10 if epoch_ended else -10),) * 2)
    try:
        if requeued:
            again = job.checkpoint("ner", {"SEED": "1"}, str(tmp_path), {}, False)
            assert again.function is job and again.args == ("ner", {"SEED": "1"}, str(tmp_path), {}, False)
        else:
            with pytest.raises(NoProgress, match=r"^no epoch of the run ended in the 2 min of this job: give its "
                                                 r"jobs a longer time limit \(--slurm-time, now 1 min\)$"):
                job.checkpoint("ner", {"SEED": "1"}, str(tmp_path), {}, False)
        assert STOPPING.is_set()  # the training killed by the requeue writes no failed.json
    finally:
        STOPPING.clear()


def test_a_ctrl_c_during_a_submission_acts_once_the_job_is_in_the_list():
    """(else a job sbatch accepted could be left out of the list the runner cancels)"""
    listed = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            listed.append("job 7")
    assert listed == ["job 7"]


def ended_job(tmp_path, outcome=None, logs=True, submissions=1):
    """A job that ended as SLURM leaves it: its logs and submitit's result pickle (or none) beside its run."""
    import cloudpickle

    run_dir = tmp_path / "runs" / "ner" / "ner-0123456789"
    (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
    watched = Watched({"task": "ner", "run_dir": str(run_dir), "label": "ner baseline seed 1"}, "41", submissions)
    if logs:
        watched.stdout.write_text("submitit INFO starting\n")
        watched.stderr.write_text("Traceback (most recent call last):\nMemoryError: out of memory\n")
    if outcome is not None:
        watched.result.write_bytes(cloudpickle.dumps(outcome))
    return watched


@pytest.mark.parametrize("outcome, state, logs, submissions, expected", [
    (("success", {"status": "done", "dev": 1.0}), "COMPLETED", True, 1, {"status": "done", "dev": 1.0}),
    (("success", {"status": "interrupted"}), "CANCELLED", True, 1, "again"),  # scancel: submitted again
    (None, "TIMEOUT", True, 3, "again"),
    (None, "GONE", False, 1, "again"),  # no longer known to SLURM, no result: submitted again
    (None, "TIMEOUT", True, 4, {"status": "crashed", "log": "err",
                                "error": "SLURM job 41 ended TIMEOUT: MemoryError: out of memory (submitted 4 times)"}),
    (None, "OUT_OF_MEMORY", True, 1, {"status": "crashed", "log": "err",
                                      "error": "SLURM job 41 ended OUT_OF_MEMORY: MemoryError: out of memory"}),
    (("error", "Traceback\nValueError: bad\n"), "FAILED", True, 1,
     {"status": "crashed", "log": "err", "error": "SLURM job 41: ValueError: bad"}),
    (None, "CANCELLED", False, 4, {"status": "crashed", "log": "out",
                                   "error": "SLURM job 41 ended CANCELLED before it started (submitted 4 times)"})])
def test_an_ended_job_is_reported_or_submitted_again(outcome, state, logs, submissions, expected, tmp_path):
    watched = ended_job(tmp_path, outcome, logs, submissions)
    reported = []
    again = finish(watched, state, lambda job, status: reported.append(status), SlurmOptions(retries=3))
    if expected == "again":
        assert again == f"ended {state} before its run did" and not reported
    else:
        logs = {"err": str(watched.stderr), "out": str(watched.stdout)}
        assert again is None and reported == [{**expected, **({"log": logs[expected["log"]], "wall_time_s": 0}
                                                               if "log" in expected else {})}]
    assert json.loads((watched.stdout.parent / "jobs.json").read_text())[0]["state"] == state


def test_a_job_that_ran_where_the_runs_directory_is_not_stops_the_sweep_in_one_line(tmp_path):
    watched = ended_job(tmp_path, logs=False)
    with pytest.raises(SpecError) as raised:
        finish(watched, "FAILED", lambda job, status: None, SlurmOptions())
    assert str(raised.value) == (f"SLURM job 41 of ner baseline seed 1 ended FAILED and left no log at "
                                 f"{watched.stdout}: {NO_SHARED_FS}")


# ---- a real one-node SLURM -----------------------------------------------------------------------------------------


# Started once for this module; ./run_tests.sh runs a test file on one pytest-xdist worker (--dist loadfile), so one
# cluster at a time: two would each give their jobs every core, and these tests wait for jobs within deadlines.
@pytest.fixture(scope="module")
def slurm():
    reason = available()
    if reason:
        pytest.skip(reason)
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


def runner_env(tmp_path, cluster):
    return cluster.env({**os.environ, "PYTHONPATH": child_pythonpath(), "WANDB_MODE": "offline",
                        "NLTK_DATA": str(tmp_path), "ALLENNLP_CACHE_ROOT": str(tmp_path / "allennlp")})


def runner_command(tmp_path, profile, *extra):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return [sys.executable, "-m", "runner", "--profile", str(path), "--runs-dir", str(tmp_path / "runs"),
            "--results-dir", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), "--no-wandb", *extra]


SLURM_FLAGS = ("--executor", "slurm", "--cpus-per-run", "1", "--slurm-time", "30")


def results_of(runs_dir: Path):
    out = {}
    for path in sorted(runs_dir.glob("*/*/result.json")):
        r = json.loads(path.read_text())
        out[r["run_id"]] = (r["dev"], r["test"], r["mix_weights"], [e["validation"] for e in r["epochs"]])
    return out


def squeue(cluster, *args) -> str:
    return subprocess.run(["squeue", "--noheader", *args], env=cluster.env(), capture_output=True, text=True,
                          timeout=60).stdout


def job_state(cluster, job_id: str) -> str:
    return squeue(cluster, "--states=all", "--format=%T", f"--jobs={job_id}").strip()


def scontrol(cluster, action: str, job_id: str) -> bool:
    """``scontrol ACTION JOB``: whether it was done (hold: a pending job only; suspend: a running one only)."""
    return subprocess.run(["scontrol", action, job_id], env=cluster.env(), capture_output=True,
                          timeout=60).returncode == 0


def recorded_jobs(run_dir: Path) -> list:
    try:
        return [e["job_id"] for e in json.loads((run_dir / "slurm" / "jobs.json").read_text())]
    except (OSError, ValueError):
        return []


@pytest.mark.slow
def test_a_sweep_through_slurm_gives_the_local_tables(slurm, tmp_path):
    """`--executor slurm` on the tiny profile: each run a job of the cluster (its id in result.json and jobs.json,
    its logs beside the run), the results and table1.md those of the local executor."""
    local, ours = tmp_path / "local", tmp_path / "slurm"
    local.mkdir(), ours.mkdir()
    started = time.time()
    done = subprocess.run(runner_command(ours, TINY, *SLURM_FLAGS), cwd=REPO, env=runner_env(ours, slurm),
                          capture_output=True, text=True, timeout=900)
    slurm_s = time.time() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    alone = subprocess.run(runner_command(local, TINY, "--jobs", "2", "--threads", "1"), cwd=REPO,
                           env=runner_env(local, slurm), capture_output=True, text=True, timeout=900)
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    assert len(results_of(local / "runs")) == 2 and results_of(ours / "runs") == results_of(local / "runs")

    def strip(text):
        return [line for line in text.splitlines() if not line.startswith("- **")]  # provenance differs

    assert strip((ours / "results" / "table1.md").read_text()) == strip((local / "results" / "table1.md").read_text())
    for path in (ours / "runs").glob("*/*/result.json"):
        [job_id] = json.loads(path.read_text())["slurm"]["job_ids"]
        assert recorded_jobs(path.parent) == [job_id]
        assert job_state(slurm, job_id) == "COMPLETED"  # a job of this cluster's
        assert f": job {job_id}\n" in done.stdout
        logs = path.parent / "slurm"
        assert (logs / f"{job_id}_0_log.out").is_file() and (logs / f"{job_id}_0_log.err").is_file()
    print(f"slurm executor: {slurm_s:.0f} s for the tiny profile's 2 runs")


def _loads(path) -> bool:
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=False)
        return True
    except Exception:  # noqa: BLE001  (still being written)
        return False


def newest_checkpoint(run_dir: Path) -> int:
    """Epochs done at the newest checkpoint of the run that loads whole (0: none yet)."""
    epochs = sorted((int(p.name[len("training_state_e"):-len("_b0.th")])
                     for p in run_dir.glob("model/training_state_e*_b0.th")), reverse=True)
    return next((e for e in epochs if _loads(run_dir / "model" / f"training_state_e{e}_b0.th")
                 and _loads(run_dir / "model" / f"model_state_e{e}_b0.th")), 0)


def wait_for(what, check, process, deadline):
    while True:
        found = check()
        if found:
            return found
        assert process.poll() is None, f"the runner ended while waiting for {what}: {process.communicate()}"
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.slow
def test_a_job_cut_off_twice_ends_as_the_run_never_stopped(slurm, tmp_path):
    """A 5-epoch run: after its first epoch checkpoint its job gets SLURM's warning signal (what a time limit or a
    preemption sends first; submitit requeues the job, the same id), after a later checkpoint it is cancelled
    (scancel: the runner submits it again, a new id). It goes on from its checkpoint each time and ends with the
    epochs, losses and numbers of the same run trained in one go by the local executor."""
    if training_code_changed():
        pytest.skip("the working tree changes the training code (elmo_module, tasks, jsonnet_configs): a run "
                    "goes on from a checkpoint only with the code of a commit (runner/execution/resume.py)")
    data = tmp_path / "train.txt"
    data.write_text(NER_TRAIN.read_text() * 30)
    profile = {**TINY, "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "5"}, "task_knobs": {"ner": {"TRAIN_PATH": str(data)}},
               "sweep_overrides": ONE_RUN}
    ours, local = tmp_path / "slurm", tmp_path / "local"
    ours.mkdir(), local.mkdir()
    process = subprocess.Popen(runner_command(ours, profile, *SLURM_FLAGS, "--no-cache"), cwd=REPO,
                               env=runner_env(ours, slurm), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.time() + 600
        run_dir = wait_for("the run's job", lambda: next((p.parent.parent for p in
                                                          (ours / "runs").glob("ner/*/slurm/jobs.json")), None),
                           process, deadline)
        first = wait_for("the first checkpoint", lambda: newest_checkpoint(run_dir), process, deadline)
        [job_id] = recorded_jobs(run_dir)
        subprocess.run(["scancel", "--signal=USR2", job_id], env=slurm.env(), check=True, timeout=60)
        # SLURM holds a requeued job back for two minutes (its begin time); an administrator's update starts it now
        wait_for("the job requeued", lambda: job_state(slurm, job_id) == "PENDING", process, deadline)
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=slurm.env(), check=True,
                       timeout=60)
        wait_for("the requeued job's checkpoint", lambda: len(json.loads((run_dir / "attempts.json").read_text())) == 2
                 and newest_checkpoint(run_dir) > first, process, deadline)
        assert recorded_jobs(run_dir) == [job_id]  # requeued: the same job
        subprocess.run(["scancel", job_id], env=slurm.env(), check=True, timeout=60)
        out, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    again = recorded_jobs(run_dir)
    assert len(again) == 2 and again[0] == job_id
    assert re.search(rf"job {job_id} ended CANCELLED before its run did; submitted again as job {again[1]} "
                     r"\(1 of 3 resubmissions\)", out), out
    result = json.loads((run_dir / "result.json").read_text())
    assert result["slurm"]["job_ids"] == again
    assert [a["from_epoch"] for a in result["attempts"]][0] == 0 and len(result["attempts"]) == 3
    assert all(a["from_epoch"] >= 1 for a in result["attempts"][1:]), result["attempts"]
    assert not (run_dir / "failed.json").exists()
    alone = subprocess.run(runner_command(local, profile, "--no-cache", "--jobs", "1", "--threads", "1"), cwd=REPO,
                           env=runner_env(local, slurm), capture_output=True, text=True, timeout=900)
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    [alone_dir] = [p.parent for p in (local / "runs").glob("ner/*/result.json")]
    assert alone_dir.name == run_dir.name

    def losses(directory):
        return [{key: json.loads((directory / "model" / f"metrics_epoch_{epoch}.json").read_text())[key]
                 for key in ("training_loss", "validation_loss")} for epoch in range(5)]

    assert losses(run_dir) == losses(alone_dir)
    assert results_of(ours / "runs") == results_of(local / "runs")


@pytest.mark.slow
def test_a_crashed_run_is_reported_with_its_log_and_the_sweep_goes_on(slurm, tmp_path):
    bad = tmp_path / "broken.txt"  # beyond the first records that the preflight reads: 3 columns where CoNLL has 4
    bad.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n" * 8000 + "EU NNP B-NP\n")
    profile = {**TINY, "sweep_overrides": {"table1": {"seeds": {"default": 1}, "columns": [
        {"label": "baseline", "knobs": {"ELMO": "none"}},
        {"label": "broken", "knobs": {"ELMO": "none", "TRAIN_PATH": str(bad)}}]}}}
    done = subprocess.run(runner_command(tmp_path, profile, *SLURM_FLAGS, "--no-cache"), cwd=REPO,
                          env=runner_env(tmp_path, slurm), capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^\[\d/2\] ner broken seed 1: CRASHED after \d+ (s|min): .+ \(log: \S+log\.txt\)$", done.stdout,
                     re.M), done.stdout
    assert re.search(r"^\[\d/2\] ner baseline seed 1: dev \d+\.\d\d, test \d+\.\d\d", done.stdout, re.M), done.stdout
    failed = json.loads(next((tmp_path / "runs").glob("*/*/failed.json")).read_text())
    assert Path(failed["log"]).is_file()
    assert len(list((tmp_path / "runs").glob("*/*/result.json"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stopping_the_runner_cancels_its_jobs_and_nothing_else(slurm, tmp_path, signum, code):
    """Another job of the same user is in the queue; a second runner on the same runs directory is refused; Ctrl-C
    (or SIGTERM) of the first cancels its own jobs, running and queued, and leaves the other one alone."""
    data = tmp_path / "train.txt"
    # long enough that no run can finish before the signal (cancelled, its length costs nothing): with 30 copies one
    # under load ran its 20 epochs out and wrote result.json while the second runner was being refused (2026-12-06)
    data.write_text(NER_TRAIN.read_text() * 300)
    profile = {**TINY, "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "20"}, "task_knobs": {"ner": {"TRAIN_PATH": str(data)}}}
    other = subprocess.run(["sbatch", "--parsable", f"--output={tmp_path / 'other.out'}", "--wrap", "sleep 600"],
                           env=slurm.env(), capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    process = subprocess.Popen(runner_command(tmp_path, profile, *SLURM_FLAGS, "--no-cache"), cwd=REPO,
                               env=runner_env(tmp_path, slurm), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        run_dirs = wait_for("both runs' jobs", lambda: (lambda found: found if len(found) == 2 else None)(
            [p.parent.parent for p in (tmp_path / "runs").glob("ner/*/slurm/jobs.json")]), process, deadline)
        ours = [job for run_dir in run_dirs for job in recorded_jobs(run_dir)]
        wait_for("a job of the runner's running", lambda: "RUNNING" in [job_state(slurm, j) for j in ours], process,
                 deadline)
        second = subprocess.run(runner_command(tmp_path, profile, *SLURM_FLAGS, "--no-cache"), cwd=REPO,
                                env=runner_env(tmp_path, slurm), capture_output=True, text=True, timeout=300)
        assert second.returncode == 2 and "is in use by another runner" in second.stderr, second.stderr
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        still = job_state(slurm, other)
        subprocess.run(["scancel", other], env=slurm.env(), timeout=60)
    assert process.returncode == code, out[-3000:] + err[-3000:]
    cancelled = re.search(r"cancelled this runner's job\(s\) (.+) \(scancel\)", out)
    assert cancelled and sorted(cancelled.group(1).split(", ")) == sorted(ours), out
    deadline = time.time() + 60  # a running job is COMPLETING until its processes are gone (KillWait)
    while "COMPLETING" in [job_state(slurm, j) for j in ours] and time.time() < deadline:
        time.sleep(0.5)
    assert [job_state(slurm, j) for j in ours] == ["CANCELLED", "CANCELLED"]
    assert still in ("RUNNING", "PENDING")  # the other job was not touched
    assert not list((tmp_path / "runs").glob("*/*/result.json"))
    assert not list((tmp_path / "runs").glob("*/*/failed.json"))


@pytest.mark.slow
def test_a_runner_killed_outright_leaves_its_jobs_to_the_next_one(slurm, tmp_path):
    """SIGKILL of the runner (a login node's reboot) cannot cancel its jobs: they go on in the queue. The next runner
    on the runs directory waits for them rather than submitting their runs a second time into the same directories."""
    data = tmp_path / "train.txt"
    data.write_text(NER_TRAIN.read_text() * 30)
    profile = {**TINY, "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "3"}, "task_knobs": {"ner": {"TRAIN_PATH": str(data)}},
               "sweep_overrides": ONE_RUN}
    command = runner_command(tmp_path, profile, *SLURM_FLAGS, "--no-cache")
    first = subprocess.Popen(command, cwd=REPO, env=runner_env(tmp_path, slurm), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        run_dir = wait_for("the run's job", lambda: next((p.parent.parent for p in
                                                          (tmp_path / "runs").glob("ner/*/slurm/jobs.json")), None),
                           first, time.time() + 300)
        [job_id] = recorded_jobs(run_dir)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert job_state(slurm, job_id) in ("PENDING", "RUNNING")
    # the job is kept from ending until the second runner has looked (under load it finished first: a flaky test):
    # held while pending, suspended while running, and let go once the second runner says it waits for it
    paused = next((how for how in ("hold", "suspend") if scontrol(slurm, how, job_id)), None)
    assert paused, f"job {job_id} could be neither held nor suspended ({job_state(slurm, job_id)})"
    output = tmp_path / "second.txt"
    waiting = f"job {job_id} of an earlier runner is still queued; waiting for it"
    with open(output, "w") as out:
        second = subprocess.Popen(command, cwd=REPO, env=runner_env(tmp_path, slurm), stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for("the second runner to wait for the job", lambda: waiting in output.read_text(), second,
                     time.time() + 300)
        finally:
            scontrol(slurm, {"hold": "release", "suspend": "resume"}[paused], job_id)
        try:
            assert second.wait(timeout=900) == 0, output.read_text()[-3000:]
        finally:
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
    assert recorded_jobs(run_dir) == [job_id]
    assert json.loads((run_dir / "result.json").read_text())["slurm"]["job_ids"] == [job_id]
