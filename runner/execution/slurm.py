"""``--executor slurm``: each run one SLURM job, submitted through submitit from the machine the runner runs on (a
login node), watched there until it ends (docs/runner.md#slurm).

A run's job runs ``execute_run`` (runner/execution/training.py) on a node, as the local executor does on this machine:
the same run directory, the same result.json, the same resume from the last epoch checkpoint. Beside the run, in
``RUN_DIR/slurm/``: the job's stdout and stderr (``JOBID_0_log.out``, ``JOBID_0_log.err``), submitit's pickles and
``jobs.json``, the runner's record of every job it submitted for the run (its id, when, how it ended); the finished
run's result.json names its jobs too (``slurm.job_ids``).

What survives what:

- SLURM's warning signal before a time limit or a preemption (``--signal=USR2@...``, submitit's): submitit calls
  ``SlurmRun.checkpoint`` and requeues the job (the same job id); the requeued job goes on from the run's last epoch
  checkpoint (runner/execution/resume.py). A run longer than the time limit so goes on over as many jobs as it
  needs, while each ends at least one epoch (else it fails, saying to give a longer --slurm-time).
- A job that ends without its run's result (``scancel``, a time limit hit without the warning, a node lost,
  preemption by cancellation): the runner submits the run again, at most ``retries`` times; it goes on from the
  checkpoint too.
- A run that crashes (its training exits non-zero: failed.json) or a job that fails (out of memory, a Python error):
  reported with its log's path, and the sweep goes on.
- Ctrl-C or SIGTERM of the runner: ``scancel`` of exactly the jobs this runner submitted (or took over) that have not
  ended, nothing else. A runner killed outright (SIGKILL) leaves its jobs queued: the next runner on the runs
  directory takes over those still in the queue (jobs.json) instead of submitting their runs twice.
"""
import errno
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from runner.execution.training import STOPPING, Job, child_pythonpath, execute_run, last_error_line
from runner.paths import REPO
from runner.records import write_json
from runner.settings import Settings
from runner.spec import SpecError

TIME_LIMITS = 1000  # submitit's cap on a job's requeues at its time limit: SlurmRun.checkpoint is the real one
LOGS = "slurm"  # RUN_DIR/slurm/: the jobs' logs, submitit's pickles, jobs.json
RECORD = "jobs.json"
# states of a job that has ended (squeue's %T); any other (PENDING, RUNNING, REQUEUED, COMPLETING, ...) has not
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
         "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED", "GONE"}  # GONE: no longer known to squeue or sacct
# ended without the run's result through no fault of the run: submitted again, going on from its checkpoint
CUT_OFF = {"CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "GONE"}
NO_SHARED_FS = ("the nodes do not see the runs directory: put the runs, results and cache directories and the "
                "repository with its .venv on a file system the nodes share (docs/runner.md#slurm)")


@dataclass(frozen=True)
class SlurmOptions:
    """What every job asks SLURM for: the resources of a run (the plan's: --cpus-per-run, --gpus-per-run) and where."""
    cpus: int = 1
    gpus: int = 0
    time_min: int = 240
    mem_gb: Optional[float] = None
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    sbatch: Tuple[str, ...] = ()
    max_jobs: Optional[int] = None
    retries: int = 3

    @classmethod
    def of(cls, settings: Settings) -> "SlurmOptions":
        return cls(cpus=max(1, int(settings.cpus_per_run)), gpus=int(settings.gpus_per_run),
                   time_min=settings.slurm_time_min, mem_gb=settings.slurm_mem_gb,
                   partition=settings.slurm_partition, account=settings.slurm_account, qos=settings.slurm_qos,
                   sbatch=settings.slurm_sbatch, max_jobs=settings.slurm_max_jobs, retries=settings.slurm_retries)


def extra_options(sbatch: Tuple[str, ...]) -> Dict[str, object]:
    """``--constraint=a100`` -> {"constraint": "a100"}; ``--exclusive`` -> {"exclusive": True} (submitit's form)."""
    options = {}
    for option in sbatch:
        key, _, value = option[2:].partition("=")
        options[key.replace("-", "_")] = value if value else True
    return options


def job_parameters(options: SlurmOptions, job_name: str) -> dict:
    """submitit's SlurmExecutor parameters of one run's job."""
    signal_delay = min(90, max(10, options.time_min * 60 // 4))  # the warning before the limit: submitit's 90 s,
    parameters = {"job_name": job_name, "time": options.time_min, "cpus_per_task": options.cpus,  # less when short
                  "ntasks_per_node": 1, "signal_delay_s": signal_delay,
                  "setup": [f"cd {shlex.quote(str(REPO))}",  # the job's Python finds runner/ and the tasks
                            f"export PYTHONPATH={shlex.quote(child_pythonpath())}"],
                  "additional_parameters": {"requeue": True, **extra_options(options.sbatch)}}
    if options.gpus:
        parameters["gpus_per_node"] = options.gpus
    if options.mem_gb:
        parameters["mem"] = f"{math.ceil(options.mem_gb * 1024)}M"
    for key in ("partition", "account", "qos"):
        if getattr(options, key):
            parameters[key] = getattr(options, key)
    return parameters


def executor_for(run_dir: Path, options: SlurmOptions, job_name: str, script_only: bool = False):
    """submitit's executor of one run's job; ``script_only``: one that only writes the sbatch script, on a machine
    with no SLURM too (submitit refuses to make an executor where srun is not on PATH)."""
    import submitit  # submitit: only for --executor slurm

    class ScriptOnly(submitit.SlurmExecutor):
        @classmethod
        def affinity(cls) -> int:
            return 1

    # time limits reached: requeued as long as each job ends an epoch more (SlurmRun.checkpoint), not a fixed number
    executor = (ScriptOnly if script_only else submitit.SlurmExecutor)(folder=run_dir / LOGS,
                                                                       max_num_timeout=TIME_LIMITS)
    executor.update_parameters(**job_parameters(options, job_name))
    return executor


def job_name(job: Job) -> str:
    return f"elmo-{Path(job['run_dir']).name}"


def sbatch_script(job: Job, options: SlurmOptions) -> str:
    """The sbatch script submitit would submit for ``job`` (its folder named, the job id still %j)."""
    executor = executor_for(Path(job["run_dir"]), options, job_name(job), script_only=True)
    return executor._make_submission_file_text(executor._submitit_command_str, "dry-run")


def job_env(job: Job, options: SlurmOptions) -> Dict[str, str]:
    """The run's environment in its job: the job's CPUs as its threads; a GPU job sees its GPUs as cuda:0... (SLURM
    sets CUDA_VISIBLE_DEVICES)."""
    threads = str(options.cpus)
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **job["extra_env"],
            **({"CUDA_DEVICE": "0"} if options.gpus else {})}


class NoProgress(RuntimeError):
    """A job reached its time limit without finishing an epoch since it started: requeued, it would only do so again."""


class SlurmRun:
    """What a job runs: one run (execute_run). SIGTERM (scancel, a requeue) stops its training and makes it write
    nothing (the run stays unfinished and goes on later from its checkpoint); submitit calls ``checkpoint`` on SLURM's
    warning signal and requeues the job with what it returns: this run again, as often as each job ends at least one
    more epoch (``time_min``: the job's time limit)."""

    def __init__(self, time_min: int = 240):
        self.time_min, self.started = time_min, time.time()

    def __call__(self, task: str, knobs: Dict[str, str], run_dir: str, extra_env: Dict[str, str],
                 keep_models: bool) -> dict:
        self.started = time.time()
        signal.signal(signal.SIGTERM, lambda signum, frame: STOPPING.set())
        status = execute_run(task, knobs, run_dir, extra_env, keep_models)
        if status["status"] == "done" and not status.get("skipped"):
            record_job_ids(Path(run_dir))
        return status

    def checkpoint(self, task: str, knobs: Dict[str, str], run_dir: str, extra_env: Dict[str, str],
                   keep_models: bool):
        """This run again (submitit requeues the job with it); NoProgress (the job fails, reported with its log) when
        the warning came near the time limit and no epoch checkpoint was written since the job started. A preemption
        earlier in the job is requeued whatever the progress."""
        import submitit  # submitit: only for --executor slurm

        STOPPING.set()  # the training is about to be killed by the requeue: not a crash
        ran = time.time() - self.started
        newest = max((p.stat().st_mtime for p in Path(run_dir).glob("model/training_state_e*_b0.th")), default=0.0)
        if ran >= self.time_min * 60 / 2 and newest < self.started:
            raise NoProgress(f"no epoch of the run ended in the {ran / 60:.0f} min of this job: give its jobs a longer "
                             f"time limit (--slurm-time, now {self.time_min} min)")
        return submitit.helpers.DelayedSubmission(self, task, knobs, run_dir, extra_env, keep_models)


def record_job_ids(run_dir: Path) -> None:
    """The finished run's result.json names the SLURM jobs that made it (in a job, after execute_run wrote it)."""
    ids = [entry["job_id"] for entry in read_record(run_dir)]
    current = os.environ.get("SLURM_JOB_ID")
    if current and current not in ids:
        ids.append(current)
    path = run_dir / "result.json"
    result = json.loads(path.read_text())
    result["slurm"] = {"job_ids": ids}
    write_json(path, result)


def read_record(run_dir: Path) -> List[dict]:
    try:
        return json.loads((Path(run_dir) / LOGS / RECORD).read_text())
    except (OSError, ValueError):
        return []


def job_states(ids: List[str]) -> Dict[str, str]:
    """Each job's state: squeue's (it keeps ended jobs for the cluster's MinJobAge), else sacct's, else GONE; all
    UNKNOWN (not ended) while the controller does not answer."""
    if not ids:
        return {}
    states = {}
    try:
        out = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%T", f"--jobs={','.join(ids)}"],
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:  # a controller too busy to answer: asked again at the next poll
        return {i: "UNKNOWN" for i in ids}
    if out.returncode != 0 and "Invalid job id" not in out.stderr:  # (that one: none of them known any more)
        return {i: "UNKNOWN" for i in ids}
    for line in out.stdout.splitlines() if out.returncode == 0 else ():
        found, _, state = line.strip().partition("|")
        if found in ids:
            states[found] = state.split()[0] if state else "UNKNOWN"
    missing = [i for i in ids if i not in states]
    if missing and shutil.which("sacct"):
        try:
            out = subprocess.run(["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State",
                                  f"--jobs={','.join(missing)}"], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return {i: states.get(i, "UNKNOWN") for i in ids}
        for line in out.stdout.splitlines() if out.returncode == 0 else ():
            job_id, _, state = line.strip().partition("|")
            if job_id in missing and state:
                states[job_id] = state.split()[0]
    return {i: states.get(i, "GONE") for i in ids}


class Watched:
    """One run's job in the queue: the job (runner's dict), its SLURM job id, its files, the submissions so far."""

    def __init__(self, job: Job, job_id: str, submissions: int):
        self.job, self.job_id, self.submissions = job, job_id, submissions
        folder = Path(job["run_dir"]) / LOGS
        self.stdout, self.stderr = folder / f"{job_id}_0_log.out", folder / f"{job_id}_0_log.err"
        self.result = folder / f"{job_id}_0_result.pkl"

    def note(self, **fields) -> None:
        """jobs.json: this job's entry updated (added at submission)."""
        run_dir = Path(self.job["run_dir"])
        record = read_record(run_dir)
        entry = next((e for e in record if e["job_id"] == self.job_id), None)
        if entry is None:
            entry = {"job_id": self.job_id, "submitted": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     "stdout": str(self.stdout), "stderr": str(self.stderr)}
            record.append(entry)
        entry.update(fields)
        write_json(run_dir / LOGS / RECORD, record)

    def outcome(self) -> Optional[Tuple[str, object]]:
        """("success", execute_run's status) or ("error", the traceback), or None: the job wrote no result."""
        import cloudpickle  # submitit's pickles: only for --executor slurm

        try:
            with open(self.result, "rb") as f:
                return cloudpickle.load(f)
        except (OSError, EOFError, ValueError):
            return None


def submit(job: Job, options: SlurmOptions, keep_models: bool, submissions: int) -> Watched:
    """One run's job submitted (sbatch through submitit); a refusal is one line naming the run and sbatch's words."""
    run_dir = Path(job["run_dir"])
    executor = executor_for(run_dir, options, job_name(job))
    try:
        submitted = executor.submit(SlurmRun(options.time_min), job["task"], job["knobs"], job["run_dir"],
                                    job_env(job, options), keep_models)
    except Exception as e:  # noqa: BLE001  (submitit's FailedJobError, sbatch's CalledProcessError: sbatch's words)
        words = [line for line in str(e).splitlines() if "error" in line.lower()] or str(e).splitlines() or [""]
        raise SpecError(f"--executor slurm: sbatch refused the job of {job['label']}: {words[-1].strip()[:300]}") \
            from None
    watched = Watched(job, str(submitted.job_id), submissions)
    watched.note()
    return watched


def ended_status(watched: Watched, state: str) -> dict:
    """The status of a job that ended and wrote no run status (or a Python error): a crash of the run, named by its
    job's log."""
    log = watched.stderr if watched.stderr.is_file() else watched.stdout
    if not watched.stdout.is_file() and not watched.stderr.is_file():  # no log written where the runner looks
        if state in CUT_OFF:  # e.g. cancelled while it waited in the queue
            return {"status": "crashed", "error": f"SLURM job {watched.job_id} ended {state} before it started",
                    "log": str(watched.stdout), "wall_time_s": 0}
        raise SpecError(f"SLURM job {watched.job_id} of {watched.job['label']} ended {state} and left no log at "
                        f"{watched.stdout}: {NO_SHARED_FS}")
    error = last_error_line(log) if log.is_file() else ""
    if "No space left on device" in error:  # every later run would fail the same way: stop the sweep
        raise OSError(errno.ENOSPC, f"No space left on device (SLURM job {watched.job_id})", str(log))
    return {"status": "crashed", "error": f"SLURM job {watched.job_id} ended {state}" + (f": {error}" if error else ""),
            "log": str(log), "wall_time_s": 0}


def adoptable(job: Job) -> Optional[str]:
    """The id of a job of this run that an earlier runner submitted and that is still in the queue, or None."""
    record = [e for e in read_record(Path(job["run_dir"])) if "ended" not in e]
    if not record:
        return None
    job_id = record[-1]["job_id"]
    return job_id if job_states([job_id]).get(job_id, "GONE") not in ENDED else None


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait until the block is over (then act): a job sbatch accepted is in the runner's list
    before a stop can cancel that list, never submitted and forgotten."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    previous = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if got:
            signal.raise_signal(got[0])


def run_slurm(jobs: List[Job], report: Callable[[Job, dict], None], keep_models: bool, options: SlurmOptions,
              poll_s: float = 2.0, max_poll_s: float = 30.0) -> None:
    """Each run one job, at most ``options.max_jobs`` in the queue at once; ``report`` as each run ends (its
    execute_run status, or a crash naming the job's log). Polls squeue every ``poll_s`` seconds while jobs end,
    backing off to ``max_poll_s`` while none does."""
    if not all(shutil.which(program) for program in ("sbatch", "squeue", "srun", "scancel")):
        raise SpecError("--executor slurm: sbatch, squeue, srun and scancel are not all on PATH: run the runner on "
                        "a machine of the SLURM cluster (a login node)")
    queue = [j for j in jobs if "call" not in j]
    live: Dict[str, Watched] = {}
    for job in list(queue):  # an earlier runner's jobs still queued: watched, not submitted twice
        job_id = adoptable(job)
        if job_id:
            print(f"runner: slurm: {job['label']}: job {job_id} of an earlier runner is still queued; waiting for it",
                  flush=True)
            live[job_id] = Watched(job, job_id, len(read_record(Path(job["run_dir"]))))
            queue.remove(job)
    where = " ".join(f"--{k}={getattr(options, k)}" for k in ("partition", "account", "qos") if getattr(options, k))
    print(f"runner: slurm: {len(queue)} job(s) to submit, {options.cpus} CPU(s), {options.gpus} GPU(s), "
          f"{options.time_min} min each{' ' + where if where else ''}; logs in each run's {LOGS}/", flush=True)
    wait = poll_s
    try:
        while queue or live:
            while queue and (options.max_jobs is None or len(live) < options.max_jobs):
                job = queue.pop(0)
                with signals_held():
                    watched = submit(job, options, keep_models, 1)
                    live[watched.job_id] = watched
                print(f"runner: slurm: {job['label']}: job {watched.job_id}", flush=True)
            time.sleep(wait)
            states = job_states(list(live))
            ended = [live[i] for i, state in states.items() if state in ENDED]
            wait = poll_s if ended else min(max_poll_s, wait * 1.5)
            for watched in ended:
                del live[watched.job_id]
                state = states[watched.job_id]
                again = finish(watched, state, report, options)
                if again is not None:
                    with signals_held():
                        resubmitted = submit(watched.job, options, keep_models, watched.submissions + 1)
                        live[resubmitted.job_id] = resubmitted
                    print(f"runner: slurm: {watched.job['label']}: job {watched.job_id} {again}; submitted again "
                          f"as job {resubmitted.job_id} ({resubmitted.submissions - 1} of {options.retries} "
                          f"resubmissions), it goes on from its last epoch checkpoint", flush=True)
    except BaseException:  # Ctrl-C, SIGTERM, a refused submission, a full disk: this runner's jobs cancelled
        cancel(list(live.values()))
        raise


def finish(watched: Watched, state: str, report: Callable[[Job, dict], None], options: SlurmOptions) -> Optional[str]:
    """A job that ended: its run reported, or why it is to be submitted again (None: reported)."""
    outcome = watched.outcome()
    watched.note(ended=time.strftime("%Y-%m-%d %H:%M:%S %Z"), state=state)
    if outcome is not None and outcome[0] == "success" and outcome[1].get("status") != "interrupted":
        report(watched.job, outcome[1])
        return None
    if outcome is not None and outcome[0] == "error":
        if "No space left on device" in str(outcome[1]):
            raise OSError(errno.ENOSPC, f"No space left on device (SLURM job {watched.job_id})", str(watched.stderr))
        lines = [line for line in str(outcome[1]).splitlines() if line.strip()]
        report(watched.job, {"status": "crashed", "error": f"SLURM job {watched.job_id}: {(lines or [''])[-1]}",
                             "log": str(watched.stderr), "wall_time_s": 0})
        return None
    cut_off = state in CUT_OFF or outcome is not None  # (an "interrupted" run: its job was stopped)
    if cut_off and watched.submissions <= options.retries:
        return f"ended {state} before its run did"
    status = ended_status(watched, state)
    if cut_off:
        status["error"] += f" (submitted {watched.submissions} times)"
    report(watched.job, status)
    return None


def cancel(watched: List[Watched]) -> None:
    """scancel of these jobs, by id (nothing else of the user's); said in one line."""
    ids = [w.job_id for w in watched]
    if not ids:
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}  # not cut short
    try:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=120)
        for w in watched:
            w.note(ended=time.strftime("%Y-%m-%d %H:%M:%S %Z"), state="CANCELLED by the runner")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    print(f"runner: slurm: cancelled this runner's job(s) {', '.join(ids)} (scancel)", flush=True)


def dry_run(jobs: List[Job], options: SlurmOptions) -> str:
    """--check with --executor slurm: the sbatch script of each job it would submit."""
    parts = [f"--executor slurm would submit {len(jobs)} job(s) (sbatch through submitit); each runs its run "
             f"(runner/execution/training.py execute_run) on a node:"]
    for job in jobs:
        parts.append(f"\n# ---- {job['label']}: {job['run_dir']}\n{sbatch_script(job, options)}")
    return "\n".join(parts)
