"""``python -m runner``: run a profile's sweeps (Tables 1-6, Figures 1-2) and build its results. See docs/runner.md.

Killing it at any moment and starting it again re-runs only unfinished runs. A crashed run is reported with its log
and the sweep goes on. ``--build-only`` rebuilds the tables and figures from the runs that exist. Ctrl-C stops the
running trainings and starts no more (exit 130), and so does SIGTERM (exit 143), even when the runner was started in
the background by a script (which leaves SIGINT ignored); one runner at a time works in a runs directory and in a
results directory (locks).
"""
import argparse
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional

from runner.eta import Estimator
from runner.execute import (PREDICTIONS, adopt_record, git_commit, hardware, keep_predictions_again, load_result, repo_relative,
                            under_way, write_json)
from runner.inputs import Checksums
from runner.probe_runs import check_finished_probes, execute_probe, missing_probe_inputs, plan_probes
from runner.spec import (REPO, SWEEP_KINDS, Cell, Run, SpecError, bilm_outputs, check_only, expand_cells,
                         load_profile, load_sweeps, missing_inputs, patience_twin, repo_path, unique_runs)

LEFT_OUT = "left out of the tables until trained again"  # what --build-only --redo-stale does with a stale run


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m runner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="default", help="profile name (runner/profiles/NAME.json) or path")
    p.add_argument("--only", help="comma-separated sweep names to run (default: all of the profile's)")
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="where runs, the activation caches and the biLM stages compute (default: the profile's "
                        "'device', else cpu); cuda: the local executor runs one run per GPU at a time")
    p.add_argument("--runs-per-gpu", type=int, default=1, help="local executor with --device cuda: runs sharing "
                   "each GPU at a time (small models leave a GPU mostly idle)")
    p.add_argument("--jobs", type=int, help="local executor on CPU: runs at a time (default: the profile's 'jobs', "
                   "else 1)")
    p.add_argument("--threads", type=int, help="local executor: CPU threads per run (default: cores / jobs)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray resources per run")
    p.add_argument("--gpus-per-run", type=float, help="Ray resources per run, fractions too (default: 1 with "
                   "--device cuda, else 0; > 0 sets CUDA_DEVICE=0, Ray sets CUDA_VISIBLE_DEVICES)")
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
                   "problems or the plan (with a GPU-hour estimate where a GPU is present), and stop")
    p.add_argument("--fetch-data", action="store_true", help="first download, convert and verify the profile's "
                   "data into DATA_DIR (python -m runner.data fetch PROFILE; docs/data.md), then go on")
    p.add_argument("--no-wandb", action="store_true", help="runs do not log to Weights & Biases (WANDB=false): "
                   "where its service cannot start (docs/runner.md#weights--biases)")
    p.add_argument("--wandb-project", default=os.environ.get("WANDB_PROJECT", "elmo-reproduction"))
    return p.parse_args(argv)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's or `kill`'s stop): handled as Ctrl-C is."""


def _raise_terminated(signum, frame):
    raise Terminated()


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop the trainings cleanly. A shell script's `cmd &` starts cmd with SIGINT ignored, and
    Python then installs no handler: `kill -INT` would do nothing, so the default handler is put back."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)


def main(argv=None) -> int:
    stop_on_signals()
    try:
        return _main(argv)
    except KeyboardInterrupt as e:
        print(f"\n{'terminated (SIGTERM)' if isinstance(e, Terminated) else 'interrupted'}: the running trainings "
              "were stopped and no other run started; finished runs are kept (run the same command again to go on)",
              file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # a write() names no file: then the directories the runner writes in, with their free space
        where = e.filename or "under " + ", ".join(f"{d} ({shutil.disk_usage(_existing(d)).free / 1e6:,.0f} MB free)"
                                                   for d in _writes_in)
        print(f"error: no space left on device writing {where}: free some space and run the same command again "
              f"(finished runs are kept, unfinished ones start again)", file=sys.stderr)
        return 1
    finally:
        while _lock_files:  # (the process ending releases them too; main() may be called again in one process)
            _lock_files.pop().close()


def _rounded(value):
    """A metric as a progress line shows it: 0.31, not 0.30999999999999994 (the result files keep every digit)."""
    return f"{value:.4g}" if isinstance(value, float) else value


def check_flags(args) -> None:
    """Numbers and directories of the command line, before any work (a negative --jobs was a traceback; a
    --results-dir that is a file, a traceback after every training)."""
    at_least_one, positive, not_negative = (">= 1", lambda v: v >= 1), ("> 0", lambda v: v > 0), \
        (">= 0", lambda v: v >= 0)
    for flag, value, (expected, ok) in (("--jobs", args.jobs, at_least_one), ("--threads", args.threads, at_least_one),
                                        ("--runs-per-gpu", args.runs_per_gpu, at_least_one),
                                        ("--cpus-per-run", args.cpus_per_run, positive),
                                        ("--gpus-per-run", args.gpus_per_run, not_negative)):
        if value is not None and not ok(value):
            raise SpecError(f"{flag}: expected a number {expected}, found {value:g}")
    for flag, value in (("--runs-dir", args.runs_dir), ("--results-dir", args.results_dir),
                        ("--cache-dir", args.cache_dir)):
        if value and Path(value).exists() and not Path(value).is_dir():
            raise SpecError(f"{flag} '{value}': expected a directory (or a path to make one), found a file")
        if value:  # under /proc or on a read-only disk: a traceback at the first write. Its nearest existing
            where = _existing(Path(value).absolute())  # folder is written in once (--check makes nothing)
            try:
                tempfile.TemporaryFile(dir=where).close()
            except OSError as e:
                raise SpecError(f"{flag} '{value}': expected a directory the runner can write in, found "
                                f"{e.strerror or e} writing in {where}") from None


def ignored_environment(profile: dict) -> None:
    """A knob set in the environment steers `allennlp train` run by hand, not the runner's runs, whose knobs come
    from the profile (they are the runs' identity): say so rather than train silently without it."""
    from tasks.knobs import KNOBS

    # (importing tasks sets every knob's default in the environment, for allennlp: only other values were set here)
    set_here = [f"{k}={os.environ[k]}" for k, default in KNOBS.items() if os.environ.get(k, default) != default]
    if set_here:
        print(f"warning: environment variable(s) {', '.join(set_here)} ignored: the runner takes every knob from the "
              f"profile '{profile['name']}' (its 'knobs' or 'task_knobs', or a profile file of your own)",
              file=sys.stderr)


@dataclass
class Plan:
    """What one invocation works on: the profile, its sweeps' cells and runs, and where each goes."""
    profile: dict
    profile_path: Path
    only: Optional[List[str]]
    sweeps: list
    cells: list
    probes: list
    runs: list
    runs_dir: Path
    results_dir: Path
    run_dir: dict
    probe_dir: dict


def _main(argv=None) -> int:
    """plan -> check (preflight, device, locks) -> biLM stages -> runs -> tables; a SpecError is one line, exit 2."""
    args = parse_args(argv)
    started = time.time()
    if args.fetch_data:
        from runner.data import fetch_into_data_dir

        if fetch_into_data_dir(args.profile):
            return 2
    try:
        plan = make_plan(args)
        if args.build_only:  # it writes in both directories too (restored runs, tables): not beside a runner
            take_locks(plan, " (it builds the tables itself when its runs end)")
            restore_archived(plan.profile, [*plan.runs, *plan.probes], {**plan.run_dir, **plan.probe_dir},
                                       plan.results_dir)
            check_finished(plan.runs, plan.run_dir, plan.runs_dir, redo_stale=args.redo_stale, build_only=True)
            check_finished_probes(plan.probes, plan.probe_dir, Checksums(plan.runs_dir / ".checksums.json"),
                                  args.redo_stale, LEFT_OUT)
        else:
            wanted = wanted_runs(plan, args)
            from runner.preflight import run_preflight  # every input checked before any work (runner/preflight.py)

            status = run_preflight(plan.profile, wanted, plan.cells, args)
            if status is not None:
                return status
            gpus, stage_device = device_and_locks(plan, args)
            archive = restore_archived(plan.profile, [*plan.runs, *plan.probes], {**plan.run_dir, **plan.probe_dir},
                                       plan.results_dir)
            inputs, finished = run_stages(plan, args, wanted, gpus, stage_device, archive)
            train(plan, args, wanted, inputs, finished, gpus, stage_device, archive)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return build_tables(plan, args, argv, started)


def make_plan(args) -> Plan:
    """The profile and its sweeps, checked against the schema (SpecError), expanded into cells and runs."""
    check_flags(args)
    profile, profile_path = load_profile(args.profile)
    if args.precision:  # a knob like any other: it enters the ELMo runs' identity (spec.py without_idle_knobs)
        profile.setdefault("knobs", {})["ELMO_PRECISION"] = args.precision
    if args.task_precision:
        profile.setdefault("knobs", {})["TASK_PRECISION"] = args.task_precision
    only = args.only.split(",") if args.only else None
    check_only(profile, only)
    # Results are always built for every sweep of the profile (summary.json and the tables stay in step);
    # --only picks the sweeps whose runs are trained.
    sweeps = load_sweeps(profile, profile_path)
    cells = expand_cells(profile, sweeps)
    _check_selects_runs(profile, sweeps, cells, only)
    probes = plan_probes(profile, sweeps)
    if args.device:  # the flag wins over the profile, for the preflight, the biLM stages, the caches and the runs
        profile["device"] = args.device
    ignored_environment(profile)
    runs = unique_runs(cells)
    runs_dir = Path(args.runs_dir or REPO / "runs" / profile["name"]).resolve()
    results_dir = Path(args.results_dir or REPO / "results" / profile["name"]).resolve()
    _writes_in[:] = [runs_dir, results_dir, Path(args.cache_dir).resolve()]
    return Plan(profile, profile_path, only, sweeps, cells, probes, runs, runs_dir, results_dir,
                {run: runs_dir / run.task / run.run_id for run in runs},
                {probe: runs_dir / "probes" / probe.run_id for probe in probes})


def wanted_runs(plan: Plan, args) -> list:
    """The runs this invocation trains (--only, --baselines-only), in the profile's "run_order": "tasks" (the
    default) one task's runs before the next's (the profile's task order; sweep order within a task), "sweeps" one
    sweep's runs before the next's (the profile's sweep order, a run shared by two sweeps going with the first; task
    order within a sweep). Either way a multi-session profile cut short by the end of a session leaves whole tables:
    of its first tasks, or its first sweeps over every task (the small profile: Table 1's six rows first)."""
    selected = unique_runs([c for c in plan.cells if not plan.only or c.sweep in plan.only])
    wanted = [r for r in selected if not (args.baselines_only and r.uses_elmo)]
    order = {task: i for i, task in enumerate(plan.profile.get("tasks", []))}
    if plan.profile.get("run_order", "tasks") == "sweeps":
        sweep_index = {name: i for i, name in enumerate(plan.profile["sweeps"])}
        first = {}
        for cell in plan.cells:
            first[cell.run] = min(first.get(cell.run, len(sweep_index)), sweep_index.get(cell.sweep, len(sweep_index)))
        return sorted(wanted, key=lambda r: (first.get(r, len(sweep_index)), order.get(r.task, len(order))))
    return sorted(wanted, key=lambda r: order.get(r.task, len(order)))


def device_and_locks(plan: Plan, args):
    """(GPU slots, the device of the biLM stages and caches) after the preflight (which lists an unusable GPU among
    every other problem), and the locks: one runner per runs directory and per results directory (two runners with
    their own runs directories would both train everything into one archive and tables, the last to finish winning)."""
    gpus, stage_device, device_line = device_plan(plan.profile.get("device", "cpu"), args)
    print(f"runner: {device_line}", flush=True)
    take_locks(plan)
    return gpus, stage_device


def take_locks(plan: Plan, hint: str = "") -> None:
    """One runner per runs directory and per results directory (lock_dir), --build-only included: beside a runner it
    restored archived results over the stale ones that runner had just moved aside to train again (--redo-stale)."""
    problem = (lock_dir(plan.runs_dir, "runs directory", "--runs-dir")
               or lock_dir(plan.results_dir, "results directory", "--results-dir"))
    if problem:
        raise SpecError(problem + hint)


def wanted_probes(plan: Plan, args) -> list:
    """The probe sweeps this invocation runs: --only picks them as it picks task sweeps; --baselines-only none."""
    return [] if args.baselines_only else [p for p in plan.probes if not plan.only or p.sweep in plan.only]


def run_stages(plan: Plan, args, wanted, gpus, stage_device, archive):
    """The data checked first, then the biLM stages (if the profile has its own biLM and an ELMo run is still to
    do: a fresh clone of a finished multi-session profile has no result missing, nor its biLM's weights, which stay
    out of git), then their outputs; returns (inputs of each run, the finished runs)."""
    from runner.inputs import unfinished_or_stale

    profile, run_dir = plan.profile, plan.run_dir
    # --redo-stale: the stale runs count as to do, so that their stages are brought up to date first
    unrun = (unfinished_or_stale(wanted, run_dir, plan.runs_dir) if args.redo_stale
             else [r for r in wanted if load_result(run_dir[r] / "result.json")[0] is None])
    parallel = args.jobs or int(profile.get("jobs", 1))
    _check_inputs(profile, wanted, bilm_outputs(profile), wanted_probes(plan, args))
    from runner.bilm import check_stage_outputs, prepare_bilm, stages_pending
    from runner.vectors import prepare_vectors, vectors_pending

    vectors_pending(profile)  # a stage output that no longer matches its record stops here, runs to do or not
    check_stage_outputs(profile)
    task_knobs = {r.task: r.knob_dict for r in reversed(wanted)}
    stages = not args.baselines_only and any(r.uses_elmo for r in unrun)
    beside = (stages and args.executor == "local" and stage_device == "cpu" and parallel >= 2
              and stages_pending(profile, task_knobs))
    vectors = bool(profile.get("vectors")) and bool(unrun)  # the baselines' word vectors, before any baseline
    if vectors and not (beside and vectors_pending(profile)):
        prepare_vectors(profile)
        vectors = False
    if beside:  # the vectors (if still to make) and then the baselines beside the biLM stages
        train_baselines_beside_stages(profile, task_knobs, [r for r in wanted if not r.uses_elmo], plan.runs,
                                      run_dir, plan.runs_dir, plan.cells, parallel, args, archive, vectors)
    elif stages:
        prepare_bilm(profile, task_knobs, parallel, stage_device, gpus)
    _check_inputs(profile, unrun)
    if profile.get("archive_runs") and profile.get("bilm"):
        from runner.bilm import archive_bilm

        archive_bilm(profile, plan.results_dir / "bilm")
    return check_finished(plan.runs, run_dir, plan.runs_dir, redo_stale=args.redo_stale)


def train(plan: Plan, args, wanted, inputs, finished, gpus, stage_device, archive) -> None:
    """The unfinished runs (their activation caches first), then the probe sweeps."""
    todo = [r for r in wanted if r not in finished]
    print(f"profile '{plan.profile['name']}': {len(wanted)} runs in {len(plan.sweeps)} sweeps, "
          f"{len(wanted) - len(todo)} already finished, {len(todo)} to do; runs in {plan.runs_dir}")
    for run in todo:  # what the run reads, recorded with its result (runner/inputs.py)
        plan.run_dir[run].mkdir(parents=True, exist_ok=True)
        write_json(plan.run_dir[run] / "inputs.json", inputs[run])
    done = {r: under_way(plan.run_dir[r], r.knob_dict) for r in todo}
    going_on = [r for r in todo if done[r]]
    if going_on:  # runs cut off by the end of the last session first (runner/execute.py under_way)
        todo = going_on + [r for r in todo if r not in going_on]
        print(f"{len(going_on)} run(s) under way go on first from their checkpoints: "
              f"{', '.join(f'{plan.run_dir[r].name} (after epoch {done[r]})' for r in going_on)}", flush=True)
    caches = ({} if args.no_cache or not plan.profile.get("cache", True)
              else build_caches(todo, Path(args.cache_dir), stage_device))
    jobs = [{**job_for(r, plan.run_dir[r], caches, plan.profile, plan.cells, args), "epochs_done": done[r] or 0}
            for r in todo]
    parallel = args.jobs or int(plan.profile.get("jobs", 1))
    estimator = Estimator()
    for run in finished:
        estimator.add_result(load_result(plan.run_dir[run] / "result.json")[0])
    if jobs:
        print(f"to do: {estimator.describe(_costed(jobs), parallel)}", flush=True)
    execute(jobs, args, parallel, gpus, archive=archive, estimator=estimator)
    probes = wanted_probes(plan, args)
    if probes:
        run_probes(probes, plan.probe_dir, args, Checksums(plan.runs_dir / ".checksums.json"))
        for probe in probes if archive else ():  # a probe's result is archived like a run's (probes/RUN_ID)
            archive(plan.probe_dir[probe])


def build_tables(plan: Plan, args, argv, started: float) -> int:
    """Every table and figure of the profile from the runs there are, with how they were made; 1 if a run crashed."""
    from runner.results import build_results, runs_made

    profile, runs, run_dir, probes, results_dir = plan.profile, plan.runs, plan.run_dir, plan.probes, plan.results_dir
    if profile.get("archive_runs"):  # committed records name no absolute path of this machine (issue 26)
        from runner.execute import make_portable

        make_portable(results_dir)
    for r in runs:  # a profile without an archive: its runs' predictions become their numbers of record here
        adopt_record(run_dir[r])
    results = {r: load_result(run_dir[r] / "result.json")[0] for r in runs}
    aside = [r for r in runs if results[r] is None and (run_dir[r] / "result.stale.json").is_file()]
    provenance = {
        "command": " ".join([os.environ.get("ELMO_MAIN_COMMAND", "python -m runner"), *(argv or sys.argv[1:])]),
        "profile": str(plan.profile_path.relative_to(REPO) if plan.profile_path.is_relative_to(REPO)
                       else plan.profile_path),
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
        "runs_made": runs_made(list(results.values())),
        **({"stale_runs_set_aside": f"{len(aside)} (their inputs changed since they ran: missing here until trained "
                                    f"again; runner/inputs.py settle_stale)"} if aside else {}),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "wall_time_s": round(time.time() - started, 1),
        "run_wall_time_s": round(sum(float(result.get("wall_time_s") or 0) for result in results.values() if result)
                                 + sum(float((load_result(d / "result.json")[0] or {}).get("wall_time_s") or 0)
                                       for d in plan.probe_dir.values()), 1),
    }
    paper = json.loads((REPO / "results" / "paper_numbers.json").read_text())
    result_cells = [replace(c, run_dir=run_dir[c.run]) for c in plan.cells]
    result_cells += [Cell(p.sweep, p.kind, "probe", None, 0, run_dir=plan.probe_dir[p]) for p in probes]
    report = None
    if profile.get("bilm"):
        from runner.bilm import bilm_markdown, bilm_report
        from runner.results import provenance_lines, write_atomic

        report = bilm_report(profile, results_dir / "bilm" if profile.get("archive_runs") else None)
        results_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(results_dir / "bilm.md", bilm_markdown(report, provenance_lines(provenance)))
    if profile.get("vectors"):
        from runner.results import provenance_lines
        from runner.vectors import write_report

        write_report(profile, results_dir, provenance_lines(provenance))
    build_results(plan.sweeps, result_cells, paper, results_dir, provenance, {"bilm": report} if report else None)
    if profile.get("archive_runs") and runs:  # a profile made over many sessions says what its runs cost
        from runner.results import cost_markdown, provenance_lines, write_atomic

        write_atomic(results_dir / "cost.md", cost_markdown(list(results.values()), int(profile.get("jobs", 1)),
                                                            provenance_lines(provenance), profile.get("tasks")))
    from runner.report import ReportError, write_report  # the verdicts at a glance: claims.png/.svg and index.html

    try:
        write_report(results_dir, plan.profile_path.stem)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"results in {results_dir} ({provenance['wall_time_s']:.0f} s)")
    crashed = [r for r in runs if not results[r] and (run_dir[r] / "failed.json").is_file()]
    return 1 if crashed else 0


def train_baselines_beside_stages(profile, task_knobs, baselines, runs, run_dir, runs_dir, cells, parallel,
                                  args, archive=None, vectors: bool = False) -> None:
    """The biLM stages take one of the ``parallel`` slots (one process; the mini profiles pretrain on 1 thread) and
    the baseline runs, which do not read the biLM, the others, so that a 2-core machine is not half idle for the
    hours of pretraining; once the stages are done their slot trains baselines too. With ``vectors`` (the profile's
    word vectors still to make: 25 min to 1.8 h on 1 thread for the small profile; the stages do not read them)
    the vectors stage takes the second slot first and the baselines, which read the vectors, wait for it. Stage
    progress goes to its log only (the runs' lines are printed). Ctrl-C stops all (stop_runs() ends the stage
    processes too)."""
    import threading

    from runner.bilm import prepare_bilm
    from runner.vectors import prepare_vectors

    # Before the vectors are made, runs that read other bytes at their path (a fresh machine's archive: runs of two
    # machines) cannot be told apart: the check after the vectors stage (write_inputs, run_stages) settles them.
    inputs, finished = check_finished(baselines, run_dir, runs_dir, redo_stale=args.redo_stale, mixed=not vectors)
    todo = [r for r in baselines if r not in finished]
    # The finished ones are checked against the vectors once they are made; those found stale then (with
    # --redo-stale: an earlier machine's runs) train in this slot too, not after the hours of pretraining.
    unchecked, stale = ([r for r in baselines if r in finished] if vectors else []), set()
    if not todo and not vectors:
        prepare_bilm(profile, task_knobs, parallel, "cpu")
        return
    print(f"biLM stages run beside {'the word vectors and ' if vectors else ''}{len(todo)} baseline runs"
          f"{f' (and those of {len(unchecked)} finished ones that the vectors show stale)' if unchecked else ''}; "
          "stage progress is in the logs named below", flush=True)

    def write_inputs():  # what each baseline reads, its word vectors' checksum included (so only once they exist)
        now, current = check_finished(baselines, run_dir, runs_dir, redo_stale=args.redo_stale) if vectors else (
            inputs, finished)
        stale.update(r for r in unchecked if r not in current)
        for run in todo + sorted(stale, key=unchecked.index):
            run_dir[run].mkdir(parents=True, exist_ok=True)
            write_json(run_dir[run] / "inputs.json", now[run])

    def timed(label, work):
        def call():
            started = time.time()
            work()
            return {"status": "stages", "wall_time_s": round(time.time() - started, 1)}
        return {"call": call, "label": label}

    jobs = [timed("biLM stages", lambda: prepare_bilm(profile, task_knobs, 1, "cpu", quiet=True))]
    vectors_made, vectors_ok = threading.Event(), []
    if vectors:
        def make_vectors():
            try:
                prepare_vectors(profile)
                write_inputs()
                vectors_ok.append(True)
            finally:  # the baselines waiting for them go on (or, if they failed, are not started)
                vectors_made.set()
        jobs.append(timed("word vectors", make_vectors))
    else:
        write_inputs()

    def after_vectors() -> bool:
        vectors_made.wait()
        return bool(vectors_ok)

    candidates = todo + unchecked
    baseline_jobs = [job_for(r, run_dir[r], {}, profile, cells, args) for r in candidates]
    if vectors:  # an unchecked run that the vectors leave current does not start (status 'interrupted': silent)
        for run, job in zip(candidates, baseline_jobs):
            job["after"] = after_vectors if run in todo else (lambda run=run: after_vectors() and run in stale)
    threads = args.threads or max(1, (os.cpu_count() or 1) // parallel)
    execute(jobs + baseline_jobs, args, parallel, (), threads, archive=archive)  # the stages first: they start at once


def restore_archived(profile, runs, run_dir, results_dir: Path):
    """Profiles with ``"archive_runs": true`` (the multi-session mini profiles) keep a copy of every finished run's
    result.json in RESULTS/runs/TASK/RUN_ID.json, written as each run finishes. A fresh clone (runs/ is not in git)
    then resumes where the last session stopped: the copies go back into the runs directory here and count as
    finished once their recorded input checksums match this machine's files (else they are stale, as any finished
    run: check_finished). Of the profile's own biLM only the stages' records are kept, in RESULTS/bilm/ (runner/bilm.py
    archive_bilm). Returns the function that archives one finished run directory, or None."""
    if not profile.get("archive_runs"):
        return None
    archive_dir = results_dir / "runs"
    restored = 0
    for run in runs:
        copy, target = archive_dir / run_dir[run].parent.name / f"{run.run_id}.json", run_dir[run] / "result.json"
        archived = load_result(copy)[0] if copy.is_file() and not target.is_file() else None
        if archived is not None and not set_aside(archived, target.with_name("result.stale.json")):
            put_back(archived, copy.with_name(f"{run.run_id}.{PREDICTIONS}"), target)
            restored += 1
    if restored:
        print(f"restored {restored} finished runs from {archive_dir}", flush=True)
    restore_patience_twins(runs, run_dir, archive_dir)

    def archive(directory: Path) -> None:
        result, _ = load_result(directory / "result.json")
        if result is not None:
            (archive_dir / directory.parent.name).mkdir(parents=True, exist_ok=True)
            if (directory / PREDICTIONS).is_file():  # per-example predictions travel with the result (issue 22)
                target = archive_dir / directory.parent.name / f"{directory.name}.{PREDICTIONS}"
                shutil.copyfile(directory / PREDICTIONS, target.with_name(target.name + ".partial"))
                os.replace(target.with_name(target.name + ".partial"), target)
            write_json(archive_dir / directory.parent.name / f"{directory.name}.json", repo_relative(result))

    for run in runs:  # finished before this profile archived, or by --baselines-only
        if not (archive_dir / run_dir[run].parent.name / f"{run.run_id}.json").is_file():
            archive(run_dir[run])
        elif keep_predictions_again(run_dir[run]):  # refused by an earlier rule, still on this machine
            print(f"kept the per-example predictions of {run_dir[run]} (refused before: runner/execute.py "
                  f"keep_predictions)", flush=True)
            archive(run_dir[run])
        elif adopt_record(run_dir[run]):  # its predictions become its number of record (runner/evidence.py)
            archive(run_dir[run])
    return archive


def restore_patience_twins(runs, run_dir, archive_dir: Path) -> None:
    """A run not archived under its own id whose training is archived under another epoch cap (runner/spec.py
    patience_twin: patience stopped it before either cap) gets that result, its knobs saying the new cap and its
    ``same_training_as`` the archived run; the archive then keeps it under its own id too (the caller's loop)."""
    by_task, answered = {}, []
    for run in (r for r in runs if isinstance(r, Run)):  # task runs, not probes
        task_dir = archive_dir / run_dir[run].parent.name
        target = run_dir[run] / "result.json"
        if target.is_file() or (task_dir / f"{run.run_id}.json").is_file():
            continue
        if task_dir not in by_task:
            by_task[task_dir] = [dict(r, run_id=r.get("run_id") or p.stem)
                                 for p, r in ((p, load_result(p)[0]) for p in sorted(task_dir.glob("*.json"))) if r]
        twin = patience_twin(run, by_task[task_dir])
        if twin is None:
            continue
        result = dict(twin, run_id=run.run_id, knobs={**twin["knobs"], "NUM_EPOCHS": run.knob_dict["NUM_EPOCHS"]},
                      same_training_as={"run_id": twin["run_id"], "NUM_EPOCHS": twin["knobs"]["NUM_EPOCHS"],
                                        "epochs": len(twin["epochs"]),
                                        "why": "patience stopped it before either cap (runner/spec.py patience_twin)"})
        if set_aside(result, target.with_name("result.stale.json")):
            continue
        put_back(result, task_dir / f"{twin['run_id']}.{PREDICTIONS}", target)
        answered.append(f"{run.run_id} <- {twin['run_id']}")
    if answered:
        print(f"{len(answered)} run(s) answered by their training under another epoch cap, which patience ended "
              f"before either cap: {', '.join(answered)}", flush=True)


def put_back(result: dict, predictions: Path, target: Path) -> None:
    """An archived result into the runs directory as ``target`` (result.json), its predictions (if archived) first:
    a run with a result.json is finished, so it must be complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if predictions.is_file():
        shutil.copyfile(predictions, target.with_name(PREDICTIONS))
    write_json(target, result)


def set_aside(archived: dict, stale: Path) -> bool:
    """Whether the archived result is the one --redo-stale moved aside to ``stale`` (the same training: its `made`
    record), which restoring would undo: the run counted as finished again, with the bytes it was stale for."""
    made = (load_result(stale)[0] or {}).get("made") if stale.is_file() else None
    return made is not None and made == archived.get("made")


def _check_selects_runs(profile, sweeps, cells, only) -> None:
    """A profile (or --only) whose tasks are in none of its sweeps would do nothing and report success."""
    run_sweeps = [s["name"] for s in sweeps if "columns" in SWEEP_KINDS[s["kind"]] and (not only or s["name"] in only)]
    if run_sweeps and not any(c.sweep in run_sweeps for c in cells):
        raise SpecError(f"profile '{profile['name']}': key 'tasks': expected tasks of the sweeps "
                        f"{', '.join(run_sweeps)}, found {profile.get('tasks')!r}: no run to do")


_writes_in = []  # the runs, results and cache directories, for the line a full disk gives


def _existing(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


_lock_files = []  # held open for the runner's lifetime; the kernel releases the locks when the process ends


def lock_dir(directory: Path, what: str, flag: str) -> str:
    """One runner per runs directory (two would train the same runs twice into the same directories: interleaved
    logs, a failed.json beside a result.json) and per results directory (one archive, one set of tables). The
    second one stops at once with this message rather than wait (a sweep may hold the directory for hours). flock
    is released by the kernel however the holder ends (kill -9 included), so a stale lock cannot block a later
    runner. Returns '' when the lock is ours."""
    directory.mkdir(parents=True, exist_ok=True)
    f = open(directory / ".runner.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "pid unknown"
        f.close()
        return (f"{what} {directory} is in use by another runner ({holder}); wait for it to end or stop "
                f"it, or give this one another {flag}")
    f.truncate(0)
    f.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    f.flush()
    _lock_files.append(f)
    return ""


def check_finished(runs, run_dir, runs_dir: Path, redo_stale: bool, build_only: bool = False, mixed: bool = True):
    """(inputs of each run, the runs that are finished and current). A result.json that is empty or cut short is
    not finished (warning naming it; redone). A finished run whose input files changed since is *stale*: the
    runner stops and lists them (a silently redone run could throw away days of GPU time over an innocent change,
    a silently kept one mixes old results into new tables); ``--redo-stale`` moves their result.json aside to
    result.stale.json and trains them again. Results written before inputs were recorded cannot be checked: a
    warning says how many. ``mixed``: refuse runs that read different bytes at one path (_check_same_bytes)."""
    from runner.inputs import Checksums, input_paths, run_inputs, settle_stale, stale_inputs

    checksums = Checksums(runs_dir / ".checksums.json")
    inputs, finished, stale, unverified, read = {}, set(), [], 0, {}
    for run in runs:
        paths = input_paths(run.task, run.knob_dict, run.uses_elmo)
        inputs[run] = run_inputs(paths, checksums, repo_path)
        result, problem = load_result(run_dir[run] / "result.json")
        if not build_only and (run_dir[run] / "result.json").is_dir():  # a training could not write its result
            raise SpecError(f"{problem}: remove it, and the run is trained again")
        if problem:
            print(f"warning: {problem}: counted as " + ("missing (run the runner without --build-only to redo it)"
                                                       if build_only else "unfinished, it runs again"), file=sys.stderr)
        if result is None:
            continue
        if result.get("inputs") is None:
            unverified += 1
        changed = stale_inputs(result.get("inputs"), inputs[run], paths)
        if changed:
            stale.append((run, changed))
        else:
            finished.add(run)
            read[run_dir[run]] = {paths[k]: v for k, v in (result.get("inputs") or {}).items() if paths.get(k) and v}
    checksums.save()
    if unverified:
        print(f"warning: {unverified} finished runs in {runs_dir} were written before the runner recorded what they "
              f"read; their data and weights cannot be checked", file=sys.stderr)
    settle_stale([(run_dir[run], changed) for run, changed in stale], redo_stale, "runs", "train",
                 LEFT_OUT if build_only else "runs again")
    if mixed:
        _check_same_bytes(read)
    return inputs, finished


def _check_same_bytes(read: dict) -> None:
    """Finished runs that read one path must have read the same bytes: a profile's tables mix nothing else. The
    stale check above compares each run with the files here; this one compares the runs with each other, which is
    what is left to check where the files are not (a fresh clone's --build-only: the profile's own vectors and biLM
    stay out of git) and what a move to another machine breaks (its CPU trains other bytes from the same recipe).
    ``read``: run directory -> {path: the sha256 its result.json recorded}."""
    seen = {}  # path -> checksum -> the runs that read it
    for directory, sums in read.items():
        for path, digest in sums.items():
            seen.setdefault(path, {}).setdefault(digest, []).append(directory)
    mixed = {path: by_sum for path, by_sum in seen.items() if len(by_sum) > 1}
    if mixed:
        lines = [f"  - {path}: " + "; ".join(f"{len(dirs)} run(s) read sha256 {digest[:12]} (e.g. {dirs[0]})"
                                              for digest, dirs in sorted(by_sum.items(), key=lambda kv: -len(kv[1])))
                 for path, by_sum in sorted(mixed.items())]
        raise SpecError(f"finished runs read different files at the same path, so their results cannot share a "
                        f"table:\n" + "\n".join(lines) + "\nput the files the runs should share here and run again "
                        "with --redo-stale (the others are trained anew)")


def _check_inputs(profile, runs, exclude=(), probes=()):
    missing = missing_inputs(profile, runs, exclude) + missing_probe_inputs(probes, profile.get("requires"))
    if missing:
        raise SpecError(f"profile '{profile['name']}' needs files that are not here:\n" +
                        "\n".join(f"  - {line}" for line in missing))


def device_plan(device: str, args):
    """(the GPU slots of the local executor, gpu_slots(); the device of the biLM stages and activation caches,
    which run in this process; a line saying where everything computes). Refuses (SpecError, one line) a GPU that
    torch cannot run kernels on (elmo_module/device.py)."""
    import torch

    from elmo_module.device import cuda_problem, describe
    from runner.execute import gpu_slots

    if device not in ("cpu", "cuda"):
        raise SpecError(f"profile key 'device' must be \"cpu\" or \"cuda\", found {device!r}")
    if device == "cpu":
        if args.gpus_per_run:
            raise SpecError("--gpus-per-run needs --device cuda (or a profile with \"device\": \"cuda\")")
        return [], "cpu", describe("cpu")
    if args.executor == "ray":
        if args.gpus_per_run is None:
            args.gpus_per_run = 1.0
        if args.gpus_per_run <= 0:
            raise SpecError(f"--device cuda with --executor ray needs --gpus-per-run > 0, found {args.gpus_per_run}")
        local = "cuda" if torch.cuda.device_count() and cuda_problem(0) is None else "cpu"
        return [], local, (f"device cuda on Ray: {args.gpus_per_run:g} GPU per run (Ray pins each run to its GPU); "
                           f"biLM stages and activation caches here on {describe(local)}")
    count = torch.cuda.device_count()
    for index in range(max(count, 1)):
        problem = cuda_problem(index)
        if problem:
            raise SpecError(f"device cuda: {problem}")
    slots = gpu_slots(count, args.runs_per_gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
    names = "; ".join(describe(f"cuda:{i}").split(": ", 1)[1] for i in range(count))
    return slots, "cuda", (f"device cuda: {count} GPU(s) ({names}), {len(slots)} run(s) at a time, {args.runs_per_gpu} per "
                   f"GPU, each pinned to its GPU")


def run_probes(probes, probe_dir, args, checksums) -> None:
    """The probe sweeps (Tables 4-6), one after the other, 1 CPU thread unless --threads; each is skipped once
    finished and current (a stale one stops the runner, or runs again with --redo-stale)."""
    check_finished_probes(probes, probe_dir, checksums, args.redo_stale)
    threads = args.threads or 1
    cache = None if args.no_cache else args.cache_dir
    for i, probe in enumerate(probes, 1):
        status = execute_probe(probe, probe_dir[probe], threads, cache, checksums)
        what = (f"done ({status['wall_time_s']}s{', already finished' if status.get('skipped') else ''})"
                if status["status"] == "done" else f"CRASHED: {status.get('error', '')} -- log: {status.get('log')}")
        print(f"[probe {i}/{len(probes)}] {probe.sweep} ({probe.kind}): {what}", flush=True)


def build_caches(todo, cache_root: Path, device: str = "cpu"):
    """One activation cache per (task, data, biLM) that the unfinished ELMo runs need."""
    from runner.cache import ensure_cache, no_cache_reason

    caches = {}
    for run in todo:
        if not run.uses_elmo or run.cache_key in caches:
            continue
        reason = no_cache_reason(run.task, run.knob_dict)
        if reason:
            print(reason, flush=True)
            caches[run.cache_key] = ""
            continue
        print(f"activation cache for {run.task} ...", flush=True)
        caches[run.cache_key] = str(ensure_cache(run.task, run.knob_dict, cache_root, device=device))
    return caches


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


def _costed(jobs) -> list:
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
        eta = estimator.describe(_costed(left.values()), parallel) if left else "none left"
        print(f"[{len(runs) - len(left):>3}/{len(runs)}] {job['label']}: {what} | to do: {eta}", flush=True)

    if args.executor == "ray":
        run_ray(jobs, report, args.keep_models, args.address, args.cpus_per_run, args.gpus_per_run or 0)
    else:
        run_local(jobs, report, args.keep_models, parallel, threads or args.threads, gpus)


if __name__ == "__main__":
    sys.exit(main())
