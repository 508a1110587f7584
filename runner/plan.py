"""What one invocation of the runner works on: the profile and its sweeps expanded into cells and runs, checked with
the command line's flags (Plan, make_plan); which of them this invocation trains (wanted_runs, wanted_probes); where
they compute (device_plan)."""
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional

from elmo_module import device as devices
from runner.execution.probes import plan_probes
from runner.execution.training import gpu_slots
from runner.profile import Profile, SpecError
from runner.settings import Settings
from runner.spec import SWEEP_KINDS, check_only, expand_cells, load_sweeps, unique_runs
from tasks.knobs import KNOBS


def ignored_environment(profile_name: str) -> None:
    """A knob set in the environment steers `allennlp train` run by hand, not the runner's runs, whose knobs come
    from the profile (they are the runs' identity): say so rather than train silently without it."""

    # (allennlp sets every knob's default in its own environment, tasks/allennlp_plugin.py: only other values count)
    set_here = [f"{k}={os.environ[k]}" for k, default in KNOBS.items() if os.environ.get(k, default) != default]
    if set_here:
        print(f"warning: environment variable(s) {', '.join(set_here)} ignored: the runner takes every knob from the "
              f"profile '{profile_name}' (its 'knobs' or 'task_knobs', or a profile file of your own)",
              file=sys.stderr)


@dataclass
class Plan:
    """What one invocation works on: the profile, its sweeps' cells and runs, and where each goes."""
    profile: Profile  # as loaded, with the command line's knobs and device over its own
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


def make_plan(settings: Settings, loaded: Profile, profile_path: Path) -> Plan:
    """The profile (as loaded, with the command line's knobs and device over its own: a new Profile) and its sweeps,
    checked against the schema (SpecError), expanded into cells and runs."""
    knobs = dict(loaded.knobs)
    if settings.precision:  # a knob like any other: it enters the ELMo runs' identity (spec.py without_idle_knobs)
        knobs["ELMO_PRECISION"] = settings.precision
    if settings.task_precision:
        knobs["TASK_PRECISION"] = settings.task_precision
    profile = replace(loaded, knobs=knobs, device=settings.device)
    only = list(settings.only) if settings.only else None
    check_only(profile, only)
    # Results are always built for every sweep of the profile (summary.json and the tables stay in step);
    # --only picks the sweeps whose runs are trained.
    sweeps = load_sweeps(profile, profile_path)
    cells = expand_cells(profile, sweeps)
    _check_selects_runs(profile, sweeps, cells, only)
    probes = plan_probes(profile.knobs, sweeps)
    ignored_environment(profile.name)
    runs = unique_runs(cells)
    runs_dir, results_dir = settings.runs_dir, settings.results_dir
    return Plan(profile, profile_path, only, sweeps, cells, probes, runs, runs_dir, results_dir,
                {run: runs_dir / run.task / run.run_id for run in runs},
                {probe: runs_dir / "probes" / probe.run_id for probe in probes})


def _check_selects_runs(profile, sweeps, cells, only) -> None:
    """A profile (or --only) whose tasks are in none of its sweeps would do nothing and report success."""
    run_sweeps = [s["name"] for s in sweeps if "columns" in SWEEP_KINDS[s["kind"]] and (not only or s["name"] in only)]
    if run_sweeps and not any(c.sweep in run_sweeps for c in cells):
        tasks = list(profile.tasks) if profile.tasks is not None else None  # as the file writes them
        raise SpecError(f"profile '{profile.name}': key 'tasks': expected tasks of the sweeps "
                        f"{', '.join(run_sweeps)}, found {tasks!r}: no run to do")


def wanted_runs(plan: Plan, baselines_only: bool) -> list:
    """The runs this invocation trains (--only, --baselines-only), in the profile's "run_order": "tasks" (the
    default) one task's runs before the next's (the profile's task order; sweep order within a task), "sweeps" one
    sweep's runs before the next's (the profile's sweep order, a run shared by two sweeps going with the first; task
    order within a sweep). Either way a multi-session profile cut short by the end of a session leaves whole tables:
    of its first tasks, or its first sweeps over every task (the small profile: Table 1's six rows first)."""
    selected = unique_runs([c for c in plan.cells if not plan.only or c.sweep in plan.only])
    wanted = [r for r in selected if not (baselines_only and r.uses_elmo)]
    order = {task: i for i, task in enumerate(plan.profile.tasks or ())}
    if plan.profile.run_order == "sweeps":
        sweep_index = {name: i for i, name in enumerate(plan.profile.sweeps)}
        first = {}
        for cell in plan.cells:
            first[cell.run] = min(first.get(cell.run, len(sweep_index)), sweep_index.get(cell.sweep, len(sweep_index)))
        return sorted(wanted, key=lambda r: (first.get(r, len(sweep_index)), order.get(r.task, len(order))))
    return sorted(wanted, key=lambda r: order.get(r.task, len(order)))


def wanted_probes(plan: Plan, baselines_only: bool) -> list:
    """The probe sweeps this invocation runs: --only picks them as it picks task sweeps; --baselines-only none."""
    return [] if baselines_only else [p for p in plan.probes if not plan.only or p.sweep in plan.only]


def device_plan(settings: Settings):
    """(the GPU slots of the local executor, gpu_slots(); the device of the biLM stages and activation caches,
    which run in this process; a line saying where everything computes). Refuses (SpecError, one line) a GPU that
    torch cannot run kernels on (elmo_module/device.py)."""
    import torch


    if settings.device == "cpu":
        if settings.gpus_per_run:
            raise SpecError("--gpus-per-run needs --device cuda (or a profile with \"device\": \"cuda\")")
        return [], "cpu", devices.describe("cpu")
    if settings.executor in ("ray", "slurm"):  # (Settings.build makes --gpus-per-run 1 there unless it is given)
        if settings.gpus_per_run <= 0:
            raise SpecError(f"--device cuda with --executor {settings.executor} needs --gpus-per-run > 0, "
                            f"found {settings.gpus_per_run}")
        local = "cuda" if torch.cuda.device_count() and devices.cuda_problem(0) is None else "cpu"
        name, pins = ("Ray", "Ray pins each run to its GPU") if settings.executor == "ray" else (
            "SLURM", "each run's job is given its GPU")
        return [], local, (f"device cuda on {name}: {settings.gpus_per_run:g} GPU per run ({pins}); "
                           f"biLM stages and activation caches here on {devices.describe(local)}")
    count = torch.cuda.device_count()
    for index in range(max(count, 1)):
        problem = devices.cuda_problem(index)
        if problem:
            raise SpecError(f"device cuda: {problem}")
    slots = gpu_slots(count, settings.runs_per_gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
    names = "; ".join(devices.describe(f"cuda:{i}").split(": ", 1)[1] for i in range(count))
    return slots, "cuda", (f"device cuda: {count} GPU(s) ({names}), {len(slots)} run(s) at a time, "
                           f"{settings.runs_per_gpu} per "
                   f"GPU, each pinned to its GPU")
