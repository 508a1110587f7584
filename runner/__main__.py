"""``python -m runner``: run a profile's sweeps (Tables 1-6, Figures 1-2) and build its results. See README.md.

Killing it at any moment and starting it again re-runs only unfinished runs. A crashed run is reported with its log
and the sweep goes on. ``--build-only`` rebuilds the tables and figures from the runs that exist.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from runner.probe_runs import execute_probe, missing_probe_inputs, plan_probes
from runner.spec import (REPO, Cell, SpecError, bilm_outputs, expand_cells, load_profile, load_sweeps, missing_inputs,
                         unique_runs)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m runner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="default", help="profile name (runner/profiles/NAME.json) or path")
    p.add_argument("--only", help="comma-separated sweep names to run (default: all of the profile's)")
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--jobs", type=int, help="local executor: runs at a time (default: the profile's 'jobs', else 1)")
    p.add_argument("--threads", type=int, help="local executor: CPU threads per run (default: cores / jobs)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray resources per run")
    p.add_argument("--gpus-per-run", type=float, default=0.0, help="Ray resources per run (sets CUDA_DEVICE=0)")
    p.add_argument("--no-cache", action="store_true", help="run the biLM in every run instead of caching its layers")
    p.add_argument("--runs-dir", help="default: runs/PROFILE")
    p.add_argument("--results-dir", help="default: results/PROFILE")
    p.add_argument("--cache-dir", default=str(REPO / "cache" / "elmo"))
    p.add_argument("--keep-models", action="store_true", help="keep model.tar.gz and best.th of every run")
    p.add_argument("--build-only", action="store_true", help="only rebuild tables and figures from existing runs")
    p.add_argument("--baselines-only", action="store_true",
                   help="only the runs without ELMo, and no biLM stage (e.g. on spare cores while the biLM trains)")
    p.add_argument("--wandb-project", default=os.environ.get("WANDB_PROJECT", "elmo-reproduction"))
    return p.parse_args(argv)


def hardware() -> str:
    cpu = platform.processor() or ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU cores ({cpu}), {gpu}, torch {torch.__version__}"


def git_commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    try:
        profile, profile_path = load_profile(args.profile)
        sweeps = load_sweeps(profile, profile_path, args.only.split(",") if args.only else None)
        cells = expand_cells(profile, sweeps)
        probes = plan_probes(profile, sweeps)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs = unique_runs(cells)
    name = profile["name"]
    runs_dir = Path(args.runs_dir or REPO / "runs" / name).resolve()
    results_dir = Path(args.results_dir or REPO / "results" / name).resolve()
    run_dir = {run: runs_dir / run.task / run.run_id for run in runs}
    probe_dir = {probe: runs_dir / "probes" / probe.run_id for probe in probes}

    if not args.build_only:
        wanted = [r for r in runs if not (args.baselines_only and r.uses_elmo)]
        try:  # the data first, then the biLM stages (if the profile has its own biLM), then their outputs
            _check_inputs(profile, wanted, bilm_outputs(profile), [] if args.baselines_only else probes)
            if not args.baselines_only and any(r.uses_elmo for r in wanted):
                from runner.bilm import prepare_bilm

                prepare_bilm(profile, {r.task: r.knob_dict for r in reversed(wanted)},
                             args.jobs or int(profile.get("jobs", 1)))
            _check_inputs(profile, wanted)
        except SpecError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        todo = [r for r in wanted if not (run_dir[r] / "result.json").is_file()]
        print(f"profile '{name}': {len(wanted)} runs in {len(sweeps)} sweeps, {len(wanted) - len(todo)} already "
              f"finished, {len(todo)} to do; runs in {runs_dir}")
        caches = {} if args.no_cache or not profile.get("cache", True) else build_caches(todo, Path(args.cache_dir))
        jobs = [job_for(r, run_dir[r], caches, profile, cells, args) for r in todo]
        execute(jobs, args, args.jobs or int(profile.get("jobs", 1)))
        if not args.baselines_only:
            run_probes(probes, probe_dir, args)

    from runner.results import build_results

    provenance = {
        "command": " ".join([os.environ.get("ELMO_MAIN_COMMAND", "python -m runner"), *(argv or sys.argv[1:])]),
        "profile": str(profile_path.relative_to(REPO) if profile_path.is_relative_to(REPO) else profile_path),
        "description": profile.get("description", ""),
        "data": {r.task: {k: r.knob_dict[k] or f"bundled sample (tasks/{r.task}/sample_data)"
                          for k in ("TRAIN_PATH", "DEV_PATH", "TEST_PATH")} for r in runs} |
                {p.sweep: {flag: " ".join(v) for flag, v in p.args if flag not in ("options", "weights")}
                 for p in probes},
        "weights": sorted({f"{r.knob_dict['ELMO_OPTIONS'] or 'bundled tiny'} + {r.knob_dict['ELMO_WEIGHTS'] or 'bundled tiny'}"
                           for r in runs if r.uses_elmo} |
                          {f"{p.arg_dict['options'][0] or 'bundled tiny'} + {p.arg_dict['weights'][0] or 'bundled tiny'}"
                           for p in probes}),
        "hardware": hardware(), "executor": args.executor, "git_commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "wall_time_s": round(time.time() - started, 1),
        "run_wall_time_s": round(sum(json.loads((d / "result.json").read_text())["wall_time_s"]
                                     for d in [*run_dir.values(), *probe_dir.values()]
                                     if (d / "result.json").is_file()), 1),
    }
    paper = json.loads((REPO / "results" / "paper_numbers.json").read_text())
    result_cells = [replace(c, run_dir=run_dir[c.run]) for c in cells]
    result_cells += [Cell(p.sweep, p.kind, "probe", None, 0, run_dir=probe_dir[p]) for p in probes]
    report = None
    if profile.get("bilm"):
        from runner.bilm import bilm_markdown, bilm_report
        from runner.results import provenance_lines, write_atomic

        report = bilm_report(profile)
        results_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(results_dir / "bilm.md", bilm_markdown(report, provenance_lines(provenance)))
    build_results(sweeps, result_cells, paper, results_dir, provenance, {"bilm": report} if report else None)
    print(f"results in {results_dir} ({provenance['wall_time_s']:.0f} s)")
    crashed = [c for c in result_cells if (c.run_dir / "failed.json").is_file()]
    return 1 if crashed else 0


def _check_inputs(profile, runs, exclude=(), probes=()):
    missing = missing_inputs(profile, runs, exclude) + missing_probe_inputs(probes, profile.get("requires"))
    if missing:
        raise SpecError(f"profile '{profile['name']}' needs files that are not here:\n" +
                        "\n".join(f"  - {line}" for line in missing))


def run_probes(probes, probe_dir, args) -> None:
    """The probe sweeps (Tables 4-6), one after the other, 1 CPU thread unless --threads; each is skipped once
    finished."""
    threads = args.threads or 1
    cache = None if args.no_cache else args.cache_dir
    for i, probe in enumerate(probes, 1):
        status = execute_probe(probe, probe_dir[probe], threads, cache)
        what = (f"done ({status['wall_time_s']}s{', already finished' if status.get('skipped') else ''})"
                if status["status"] == "done" else f"CRASHED: {status.get('error', '')} -- log: {status.get('log')}")
        print(f"[probe {i}/{len(probes)}] {probe.sweep} ({probe.kind}): {what}", flush=True)


def build_caches(todo, cache_root: Path):
    """One activation cache per (task, data, biLM) that the unfinished ELMo runs need."""
    from runner.cache import ensure_cache

    caches = {}
    for run in todo:
        if not run.uses_elmo:
            continue
        if run.cache_key not in caches:
            print(f"activation cache for {run.task} ...", flush=True)
            caches[run.cache_key] = str(ensure_cache(run.task, run.knob_dict, cache_root))
    return caches


def job_for(run, directory, caches, profile, cells, args) -> dict:
    k = run.knob_dict
    sweeps = sorted({c.sweep for c in cells if c.run == run})
    tags = [run.task, f"elmo={k['ELMO']}", f"mix={k['ELMO_MIX']}", f"lambda={k['ELMO_LAMBDA']}",
            f"fraction={k['TRAIN_FRACTION']}", f"seed={k['SEED']}", *sweeps]
    extra = {"ELMO_CACHE": caches.get(run.cache_key, "") if run.uses_elmo else "", "WANDB": "true",
             "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "WANDB_PROJECT": args.wandb_project,
             "WANDB_RUN_GROUP": f"{profile['name']}/{sweeps[0]}", "WANDB_NAME": run.run_id,
             "WANDB_TAGS": ",".join(tags), "WANDB_SILENT": "true"}
    if args.executor == "ray" and args.gpus_per_run > 0:
        extra["CUDA_DEVICE"] = "0"  # Ray sets CUDA_VISIBLE_DEVICES to the run's GPU
    return {"task": run.task, "knobs": k, "run_dir": str(directory), "extra_env": extra,
            "label": f"{run.task} elmo={k['ELMO']} mix={k['ELMO_MIX']} frac={k['TRAIN_FRACTION']} seed={k['SEED']}"}


def execute(jobs, args, parallel: int) -> None:
    from runner.execute import run_local, run_ray

    state = {"done": 0, "started": time.time()}

    def report(job, status):
        state["done"] += 1
        left = len(jobs) - state["done"]
        eta = (time.time() - state["started"]) / state["done"] * left
        if status["status"] == "done":
            what = f"dev={status['dev']} test={status['test']} ({status['wall_time_s']}s)"
        else:
            what = f"CRASHED: {status.get('error', '')} -- log: {status.get('log')}"
        print(f"[{state['done']:>3}/{len(jobs)}] {job['label']}: {what} | ETA {eta / 60:.1f} min", flush=True)

    if args.executor == "ray":
        run_ray(jobs, report, args.keep_models, args.address, args.cpus_per_run, args.gpus_per_run)
    else:
        run_local(jobs, report, args.keep_models, parallel, args.threads)


if __name__ == "__main__":
    sys.exit(main())
