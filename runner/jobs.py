"""The runs as jobs of the executors (runner/execute.py run_local, run_ray): what each job gets (job_for) and the
loop that hands them over and prints a line as each ends (execute)."""
import os
from pathlib import Path

from runner.eta import Estimator
from runner.execute import load_result


def _rounded(value):
    """A metric as a progress line shows it: 0.31, not 0.30999999999999994 (the result files keep every digit)."""
    return f"{value:.4g}" if isinstance(value, float) else value


def job_for(run, directory, caches, profile, cells, args) -> dict:
    k = run.knob_dict
    sweeps = sorted({c.sweep for c in cells if c.run == run})
    tags = [run.task, f"elmo={k['ELMO']}", f"mix={k['ELMO_MIX']}", f"lambda={k['ELMO_LAMBDA']}",
            f"fraction={k['TRAIN_FRACTION']}", f"seed={k['SEED']}", *sweeps]
    extra = {"ELMO_CACHE": caches.get(run.cache_key, "") if run.uses_elmo else "",
             "WANDB": "false" if args.no_wandb else "true", "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
             "WANDB_PROJECT": args.wandb_project,
             "WANDB_RUN_GROUP": f"{profile['name']}/{sweeps[0]}", "WANDB_NAME": run.run_id,
             "WANDB_TAGS": ",".join(tags), "WANDB_SILENT": "true"}
    if args.executor == "ray" and (args.gpus_per_run or 0) > 0:
        extra["CUDA_DEVICE"] = "0"  # Ray sets CUDA_VISIBLE_DEVICES to the run's GPU
    elif profile.get("device") == "cpu":  # --device cpu on a GPU profile: its CUDA_DEVICE knob (paper: 0) is not used
        extra["CUDA_DEVICE"] = "-1"
    return {"task": run.task, "knobs": k, "run_dir": str(directory), "extra_env": extra,
            "label": f"{run.task} elmo={k['ELMO']} mix={k['ELMO_MIX']} frac={k['TRAIN_FRACTION']} seed={k['SEED']}"}


def costed(jobs) -> list:
    """What runner/eta.py costs of each job: its task, knobs and the epochs a run under way has done."""
    return [(j["task"], j["knobs"], j.get("epochs_done", 0)) for j in jobs]


def execute(jobs, args, parallel: int, gpus=(), threads=None, archive=None, estimator=None) -> None:
    from runner.execute import run_local, run_ray

    estimator = estimator or Estimator()
    runs = [j for j in jobs if "call" not in j]
    left = {j["run_dir"]: j for j in runs}

    def report(job, status):
        if status["status"] == "stages":
            print(f"{job['label']}: done ({status['wall_time_s']}s)", flush=True)
            return
        left.pop(job["run_dir"], None)
        if status["status"] == "done":
            what = f"dev={_rounded(status['dev'])} test={_rounded(status['test'])} ({status['wall_time_s']}s)"
            estimator.add_result(load_result(Path(job["run_dir"]) / "result.json")[0])
            if archive:
                archive(Path(job["run_dir"]))
        else:
            what = f"CRASHED: {status.get('error', '')} -- log: {status.get('log')}"
        eta = estimator.describe(costed(left.values()), parallel) if left else "none left"
        print(f"[{len(runs) - len(left):>3}/{len(runs)}] {job['label']}: {what} | to do: {eta}", flush=True)

    if args.executor == "ray":
        run_ray(jobs, report, args.keep_models, args.address, args.cpus_per_run, args.gpus_per_run or 0)
    else:
        run_local(jobs, report, args.keep_models, parallel, threads or args.threads, gpus)
