"""The runs as jobs of the executors (runner/execution/training.py run_local, run_ray; runner/execution/slurm.py
run_slurm): what each job gets (job_for) and the loop that hands them over and prints a line as each ends (execute)."""
import os
from pathlib import Path

from runner.execution.eta import Estimator, duration
from runner.execution.slurm import SlurmOptions, run_slurm
from runner.execution.training import run_local, run_ray
from runner.metrics import metric_text
from runner.profile import Profile
from runner.records import load_result
from runner.settings import Settings


def job_for(run, directory, caches, profile: Profile, cells, settings: Settings) -> dict:
    k = run.knob_dict
    sweeps = sorted({c.sweep for c in cells if c.run == run})
    tags = [run.task, f"elmo={k['ELMO']}", f"mix={k['ELMO_MIX']}", f"lambda={k['ELMO_LAMBDA']}",
            f"fraction={k['TRAIN_FRACTION']}", f"seed={k['SEED']}", *sweeps]
    extra = {"ELMO_CACHE": caches.get(run.cache_key, "") if run.uses_elmo else "",
             "WANDB": "true" if settings.wandb else "false", "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
             "WANDB_PROJECT": settings.wandb_project,
             "WANDB_RUN_GROUP": f"{profile.name}/{sweeps[0]}", "WANDB_NAME": run.run_id,
             "WANDB_TAGS": ",".join(tags), "WANDB_SILENT": "true"}
    if settings.executor in ("ray", "slurm") and settings.gpus_per_run > 0:
        extra["CUDA_DEVICE"] = "0"  # Ray or SLURM sets CUDA_VISIBLE_DEVICES to the run's GPU(s)
    elif profile.device == "cpu":  # --device cpu on a GPU profile: its CUDA_DEVICE knob (paper: 0) is not used
        extra["CUDA_DEVICE"] = "-1"
    return {"task": run.task, "knobs": k, "run_dir": str(directory), "extra_env": extra, "label": run_label(run, cells)}


def run_label(run, cells) -> str:
    """A run as a person names it: its task, its column in the first sweep that has it (and the x of a curve), its
    seed: "ner baseline seed 1" (the run directory and W&B name it by its id)."""
    cell = next((c for c in cells if c.run == run), None)
    if cell is None:
        return f"{run.task} seed {run.knob_dict['SEED']}"
    return f"{run.task} {cell.column}{f' at {cell.x}' if cell.x is not None else ''} seed {cell.seed}"


def progress_line(number: int, total: int, job: dict, status: dict, left: str) -> str:
    """One line per ended run: "[17/48] ner baseline seed 1: dev 88.12, test 84.30 (31 s) · about 4 min left", the
    metrics as the tables show them (runner/analysis/tables.py metric_text), the run's own wall time, and the wall time
    still to go where the finished runs give one (runner/execution/eta.py Estimator.left); a crashed run says so and
    names its log."""

    took = duration(float(status.get("wall_time_s") or 0))
    if status["status"] == "done":
        metrics = [f"{split} {metric_text(job['task'], status[split])}" for split in ("dev", "test")
                   if isinstance(status.get(split), (int, float))]
        what = f"{', '.join(metrics) or 'no metric'} ({took}{', already finished' if status.get('skipped') else ''})"
    else:
        what = f"CRASHED after {took}: {status.get('error', '')} (log: {status.get('log')})"
    return f"[{number}/{total}] {job['label']}: {what}" + (f" · {left}" if left else "")


def costed(jobs) -> list:
    """What runner/execution/eta.py costs of each job: its task, knobs and the epochs a run under way has done."""
    return [(j["task"], j["knobs"], j.get("epochs_done", 0)) for j in jobs]


def execute(jobs, settings: Settings, parallel: int, gpus=(), threads=None, archive=None, estimator=None) -> None:
    estimator = estimator or Estimator()
    runs = [j for j in jobs if "call" not in j]
    if settings.executor == "slurm":  # the jobs SLURM may run at once (as many as there are, where no cap is given)
        parallel = settings.slurm_max_jobs or max(1, len(runs))
    left = {j["run_dir"]: j for j in runs}

    def report(job, status):
        if status["status"] == "stages":
            print(f"{job['label']}: done ({duration(status['wall_time_s'])})", flush=True)
            return
        left.pop(job["run_dir"], None)
        if status["status"] == "done":
            estimator.add_result(load_result(Path(job["run_dir"]) / "result.json")[0])
            if archive:
                archive(Path(job["run_dir"]))
        print(progress_line(len(runs) - len(left), len(runs), job, status,
                            estimator.left(costed(left.values()), parallel)), flush=True)

    if settings.executor == "slurm":
        run_slurm(jobs, report, settings.keep_models, SlurmOptions.of(settings))
    elif settings.executor == "ray":
        run_ray(jobs, report, settings.keep_models, settings.address, settings.cpus_per_run, settings.gpus_per_run)
    else:
        run_local(jobs, report, settings.keep_models, parallel, threads or settings.threads, gpus)
