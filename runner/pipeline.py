"""One invocation of the runner, step by step: plan -> check (preflight, device, locks) -> biLM stages -> runs -> tables
(``python -m runner``, runner/__main__.py, reads the command line and calls run()). Where each step lives: the plan
runner/plan.py, the locks runner/locks.py, the archive and the finished-run checks runner/execution/archive.py, the biLM
stages and what trains beside them runner/stages/schedule.py, the runs as jobs runner/execution/jobs.py, the tables
runner/analysis/build.py.
"""
import argparse
import errno
import shutil
import signal
import sys
import threading
import time
from typing import Tuple

from runner.analysis.build import build_tables
from runner.data.fetch import fetch_into_data_dir
from runner.execution.archive import LEFT_OUT, check_finished, restore_archived
from runner.execution.eta import Estimator
from runner.execution.freshness import Checksums
from runner.execution.jobs import costed, execute, job_for
from runner.execution.probes import check_finished_probes, run_probes
from runner.execution.slurm import SlurmOptions, dry_run
from runner.execution.training import under_way
from runner.locks import release_locks, take_locks
from runner.plan import Plan, device_plan, make_plan, wanted_probes, wanted_runs
from runner.preflight.checks import run_preflight  # every input checked before any work
from runner.profile import SpecError, load_profile
from runner.records import READS_FILE, load_result, write_json
from runner.settings import Settings, existing
from runner.stages.bilm_stages import restore_of_record
from runner.stages.schedule import build_caches, run_stages


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


def run(flags: argparse.Namespace, argv=None) -> int:
    """The whole invocation for the parsed command line (``argv``: as typed, for the results' provenance); the exit
    status."""
    stop_on_signals()
    writes_in = []  # the runs, results and cache directories once known, for the line a full disk gives
    try:
        return _run(flags, argv, writes_in)
    except KeyboardInterrupt as e:
        print(f"\n{'terminated (SIGTERM)' if isinstance(e, Terminated) else 'interrupted'}: the running trainings "
              "were stopped and no other run started; finished runs are kept (run the same command again to go on)",
              file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # a write() names no file: then the directories the runner writes in, with their free space
        where = e.filename or "under " + ", ".join(f"{d} ({shutil.disk_usage(existing(d)).free / 1e6:,.0f} MB free)"
                                                   for d in writes_in)
        print(f"error: no space left on device writing {where}: free some space and run the same command again "
              f"(finished runs are kept, unfinished ones start again)", file=sys.stderr)
        return 1
    finally:
        release_locks()


def plan_from(flags: argparse.Namespace, argv=()) -> Tuple[Settings, Plan]:
    """The settings and the plan of a parsed command line (SpecError: one line)."""
    profile, profile_path = load_profile(flags.profile)
    settings = Settings.build(flags, profile, tuple(argv or ()))
    return settings, make_plan(settings, profile, profile_path)


def _run(flags: argparse.Namespace, argv, writes_in: list) -> int:
    """plan -> check (preflight, device, locks) -> biLM stages -> runs -> tables; a SpecError is one line, exit 2."""
    started = time.time()
    if flags.fetch_data:
        if fetch_into_data_dir(flags.profile):
            return 2
    try:
        settings, plan = plan_from(flags, argv)
        writes_in[:] = settings.writes_in
        if settings.build_only:  # it writes in both directories too (restored runs, tables): not beside a runner
            take_locks(plan, " (it builds the tables itself when its runs end)")
            restore_archived(plan.profile, [*plan.runs, *plan.probes], {**plan.run_dir, **plan.probe_dir},
                                       plan.results_dir)
            check_finished(plan.runs, plan.run_dir, plan.runs_dir, redo_stale=settings.redo_stale, build_only=True)
            check_finished_probes(plan.probes, plan.probe_dir, Checksums(plan.runs_dir / ".checksums.json"),
                                  settings.redo_stale, LEFT_OUT)
        else:
            wanted = wanted_runs(plan, settings.baselines_only)
            restore_of_record(plan.profile.bilm_of_record)  # a pretrained biLM kept in git: the preflight then reads it
            status = run_preflight(plan.profile, wanted, plan.cells, settings)
            if status is not None:
                return status
            gpus, stage_device = device_and_locks(plan, settings)
            archive = restore_archived(plan.profile, [*plan.runs, *plan.probes], {**plan.run_dir, **plan.probe_dir},
                                       plan.results_dir)
            reads, finished = run_stages(plan, settings, wanted, gpus, stage_device, archive)
            train(plan, settings, wanted, reads, finished, gpus, stage_device, archive)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return build_tables(plan, settings, started)


def device_and_locks(plan: Plan, settings: Settings):
    """(GPU slots, the device of the biLM stages and caches) after the preflight (which lists an unusable GPU among
    every other problem), and the locks: one runner per runs directory and per results directory (two runners with
    their own runs directories would both train everything into one archive and tables, the last to finish winning)."""
    gpus, stage_device, device_line = device_plan(settings)
    print(f"runner: {device_line}", flush=True)
    take_locks(plan)
    return gpus, stage_device


def train(plan: Plan, settings: Settings, wanted, reads, finished, gpus, stage_device, archive) -> None:
    """The unfinished runs (their activation caches first), then the probe sweeps."""
    todo = [r for r in wanted if r not in finished]
    print(f"profile '{plan.profile.name}': {len(wanted)} runs in {len(plan.sweeps)} sweeps, "
          f"{len(wanted) - len(todo)} already finished, {len(todo)} to do; runs in {plan.runs_dir}")
    for run in todo:  # what the run reads, recorded with its result (runner/execution/freshness.py)
        plan.run_dir[run].mkdir(parents=True, exist_ok=True)
        write_json(plan.run_dir[run] / READS_FILE, reads[run])
    done = {r: under_way(plan.run_dir[r], r.knob_dict) for r in todo}
    going_on = [r for r in todo if done[r]]
    if going_on:  # runs cut off by the end of the last session first (runner/execution/training.py under_way)
        todo = going_on + [r for r in todo if r not in going_on]
        print(f"{len(going_on)} run(s) under way go on first from their checkpoints: "
              f"{', '.join(f'{plan.run_dir[r].name} (after epoch {done[r]})' for r in going_on)}", flush=True)
    caches = ({} if not settings.cache
              else build_caches(todo, settings.cache_dir, stage_device))
    jobs = [{**job_for(r, plan.run_dir[r], caches, plan.profile, plan.cells, settings), "epochs_done": done[r] or 0}
            for r in todo]
    parallel = settings.jobs
    estimator = Estimator()
    for run in finished:
        estimator.add_result(load_result(plan.run_dir[run] / "result.json")[0])
    if jobs:
        print(f"to do: {estimator.describe(costed(jobs), parallel)}", flush=True)
    execute(jobs, settings, parallel, gpus, archive=archive, estimator=estimator)
    probes = wanted_probes(plan, settings.baselines_only)
    if probes:
        run_probes(probes, plan.probe_dir, settings, Checksums(plan.runs_dir / ".checksums.json"))
        for probe in probes if archive else ():  # a probe's result is archived like a run's (probes/RUN_ID)
            archive(plan.probe_dir[probe])


def slurm_dry_run(plan: Plan, settings: Settings) -> str:
    """--check with --executor slurm: the sbatch script of each unfinished run's job (the activation caches are not
    built by --check: the jobs' ELMO_CACHE is known only once they are, just before submission)."""
    todo = [r for r in wanted_runs(plan, settings.baselines_only)
            if load_result(plan.run_dir[r] / "result.json")[0] is None]
    return dry_run([job_for(r, plan.run_dir[r], {}, plan.profile, plan.cells, settings) for r in todo],
                   SlurmOptions.of(settings))
