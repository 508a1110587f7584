"""``python -m runner``: run a profile's sweeps (Tables 1-6, Figures 1-2) and build its results. See docs/runner.md.

Killing it at any moment and starting it again re-runs only unfinished runs. A crashed run is reported with its log
and the sweep goes on. ``--build-only`` rebuilds the tables and figures from the runs that exist. Ctrl-C stops the
running trainings and starts no more (exit 130), and so does SIGTERM (exit 143), even when the runner was started in
the background by a script (which leaves SIGINT ignored); one runner at a time works in a runs directory and in a
results directory (locks).
"""
import argparse
import os
import sys

from runner.paths import REPO
from runner.pipeline import (  # what an invocation does, step by step: this file is the command line only
    plan_from,
    run,
    slurm_dry_run,
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m runner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="default", help="profile name (runner/profiles/NAME.json) or path")
    p.add_argument("--only", help="comma-separated sweep names to run (default: all of the profile's)")
    p.add_argument("--executor", choices=("local", "ray", "slurm"), default="local",
                   help="slurm: each run one SLURM job through submitit (docs/runner.md#slurm)")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="where runs, the activation caches and the biLM stages compute (default: the profile's "
                        "'device', else cpu); cuda: the local executor runs one run per GPU at a time")
    p.add_argument("--runs-per-gpu", type=int, default=1, help="local executor with --device cuda: runs sharing "
                   "each GPU at a time (small models leave a GPU mostly idle)")
    p.add_argument("--jobs", type=int, help="local executor on CPU: runs at a time (default: the profile's 'jobs', "
                   "else 1)")
    p.add_argument("--threads", type=int, help="local executor: CPU threads per run (default: cores / jobs)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray and SLURM resources per run")
    p.add_argument("--gpus-per-run", type=float, help="Ray and SLURM resources per run, fractions too on Ray "
                   "(default: 1 with --device cuda, else 0; > 0 sets CUDA_DEVICE=0, Ray or SLURM sets "
                   "CUDA_VISIBLE_DEVICES)")
    slurm = p.add_argument_group("--executor slurm", "each flag over the profile's \"slurm\" object's key of the "
                                 "same name (docs/runner.md#slurm)")
    slurm.add_argument("--slurm-partition", help="the partition (profile: partition; default: the cluster's)")
    slurm.add_argument("--slurm-account", help="the account to charge (profile: account)")
    slurm.add_argument("--slurm-qos", help="the quality of service (profile: qos)")
    slurm.add_argument("--slurm-time", type=int, help="each job's time limit in minutes (profile: time_min; default "
                       "240); a run that needs longer is requeued and goes on from its last epoch checkpoint")
    slurm.add_argument("--slurm-mem", type=float, help="each job's memory in GB (profile: mem_gb; default: the "
                       "partition's)")
    slurm.add_argument("--slurm-sbatch", action="append", metavar="OPTION", help="one more #SBATCH option, e.g. "
                       "--slurm-sbatch=--constraint=a100 (repeatable; profile: sbatch, a list)")
    slurm.add_argument("--slurm-max-jobs", type=int, help="jobs in the queue at once (profile: max_jobs; default: "
                       "every run at once)")
    slurm.add_argument("--slurm-retries", type=int, help="resubmissions of a job cancelled, timed out, preempted or "
                       "lost before its run ended (profile: retries; default 3); each goes on from the checkpoint")
    p.add_argument("--no-cache", action="store_true", help="run the biLM in every run instead of caching its layers")
    p.add_argument("--precision", choices=("float32", "bfloat16"), help="the biLM's matrix products in every ELMo "
                   "run and activation cache: sets the knob ELMO_PRECISION (default: the profile's, else float32)")
    p.add_argument("--task-precision", choices=("float32", "bfloat16"), help="the task model's training and dev "
                   "passes in every run, baselines too: sets the knob TASK_PRECISION (default: the profile's, else "
                   "float32); independent of --precision, which is the biLM's and its activation cache's")
    p.add_argument("--runs-dir", help="default: runs/PROFILE")
    p.add_argument("--results-dir", help="default: results/PROFILE")
    p.add_argument("--cache-dir", default=str(REPO / "cache" / "elmo"))
    p.add_argument("--keep-models", action="store_true", help="keep model.tar.gz and best.th of every run")
    p.add_argument("--build-only", action="store_true", help="only rebuild tables and figures from existing runs")
    p.add_argument("--redo-stale", action="store_true",
                   help="train again the finished runs whose data, biLM or GloVe files changed since (their old "
                        "result.json is kept as result.stale.json); without it the runner stops and lists them. "
                        "With --build-only: only set them aside (the tables count them as missing until they are "
                        "trained again)")
    p.add_argument("--baselines-only", action="store_true",
                   help="only the runs without ELMo, and no biLM stage (e.g. on spare cores while the biLM trains)")
    p.add_argument("--check", action="store_true", help="read and check every input without training, print the "
                   "problems or the plan (with a GPU-hour estimate where a GPU is present), and stop; with "
                   "--executor slurm also the sbatch script of each job it would submit")
    p.add_argument("--dry-run", dest="check", action="store_true", help="the same as --check")
    p.add_argument("--fetch-data", action="store_true", help="first download, convert and verify the profile's "
                   "data into DATA_DIR (python -m runner.data fetch PROFILE; docs/data.md), then go on")
    p.add_argument("--no-wandb", action="store_true", help="runs do not log to Weights & Biases (WANDB=false): "
                   "where its service cannot start (docs/runner.md#weights--biases)")
    p.add_argument("--wandb-project", default=os.environ.get("WANDB_PROJECT", "elmo-reproduction"))
    return p.parse_args(argv)


def main(argv=None) -> int:
    flags = parse_args(argv)
    status = run(flags, argv)
    if status == 0 and flags.check and flags.executor == "slurm" and not flags.build_only:  # what it would submit
        settings, plan = plan_from(flags, argv)
        print(slurm_dry_run(plan, settings), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
