"""Profiles and sweeps (data files) -> the runs to do and the table/figure cells they fill.

A sweep file (runner/sweeps/<name>.json) lists a table's or figure's runs as knob settings; a profile
(runner/profiles/<name>.json, or any path) says which sweeps to run, with which data, biLM and sizes. A run is
identified by its task and its complete knob settings, so a run shared by two sweeps (Table 1's baseline is Figure
1's baseline at 100 %) is trained once.
"""
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tasks.knobs import KNOBS

HERE = Path(__file__).parent
REPO = HERE.parent


# Every sweep kind with the keys its sweep file must have: a new kind is one line here, its builder in
# runner/results.py and, if it runs something other than task trainings, its runs' planning (as runner/probe_runs.py).
SWEEP_KINDS = {
    "table": ("columns",),        # Tables 1-3: task runs, one column per knob setting
    "curve": ("columns", "x"),    # Figure 1: task runs along a knob
    "mix_weights": ("from",),     # Figure 2: read from other sweeps' runs
    "neighbours": ("args",),      # Table 4: probes/ on the frozen biLM, no task training (Sec. 5.3)
    "wsd": ("args",),             # Table 5
    "pos": ("args",),             # Table 6
}
PROBE_KINDS = ("neighbours", "wsd", "pos")


class SpecError(ValueError):
    """A profile or sweep file that cannot be used: the message names the file and key."""


@dataclass(frozen=True)
class Run:
    task: str
    knobs: Tuple[Tuple[str, str], ...]  # every knob of tasks/knobs.py, sorted

    @property
    def knob_dict(self) -> Dict[str, str]:
        return dict(self.knobs)

    @property
    def run_id(self) -> str:
        digest = hashlib.sha1(json.dumps([self.task, self.knobs]).encode()).hexdigest()[:10]
        return f"{self.task}-{digest}"

    @property
    def seed(self) -> int:
        return int(self.knob_dict["SEED"])

    @property
    def cache_key(self) -> Tuple[str, ...]:
        """Runs with the same task, data and biLM share one activation cache."""
        k = self.knob_dict
        return (self.task, k["TRAIN_PATH"], k["DEV_PATH"], k["TEST_PATH"], k["ELMO_OPTIONS"], k["ELMO_WEIGHTS"])

    @property
    def uses_elmo(self) -> bool:
        return self.knob_dict["ELMO"] != "none"


@dataclass(frozen=True)
class Cell:
    """One planned run of a sweep: the run that fills it and, once the runner placed it, its directory."""
    sweep: str
    task: str
    column: str
    x: Optional[str]
    seed: int
    run_dir: Optional[Path] = None
    run: Optional[Run] = None


def _load_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise SpecError(f"{what} '{path}' does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SpecError(f"{what} '{path}' is not valid JSON: {e}") from None


def load_profile(name_or_path: str) -> Tuple[dict, Path]:
    path = Path(name_or_path)
    if not path.suffix:
        path = HERE / "profiles" / f"{name_or_path}.json"
    profile = _load_json(path, "profile")
    for key in ("sweeps",):
        if key not in profile:
            raise SpecError(f"profile '{path}': missing key '{key}'")
    profile.setdefault("name", path.stem)
    return profile, path


def load_sweeps(profile: dict, profile_path: Path, only: Optional[List[str]] = None) -> List[dict]:
    sweeps = []
    for name in profile["sweeps"]:
        if only and name not in only:
            continue
        sweep = _load_json(HERE / "sweeps" / f"{name}.json", "sweep")
        sweep = {**sweep, **profile.get("sweep_overrides", {}).get(name, {})}
        for key in ("name", "kind"):
            if key not in sweep:
                raise SpecError(f"sweep '{name}' (with overrides from '{profile_path}'): missing key '{key}'")
        if sweep["kind"] not in SWEEP_KINDS:
            raise SpecError(f"sweep '{name}': key 'kind': expected one of {', '.join(SWEEP_KINDS)}, "
                            f"found {sweep['kind']!r}")
        for key in SWEEP_KINDS[sweep["kind"]] + (() if sweep["kind"] in PROBE_KINDS else ("tasks",)):
            if key not in sweep:
                raise SpecError(f"sweep '{name}' (with overrides from '{profile_path}'): missing key '{key}'")
        sweeps.append(sweep)
    return sweeps


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str) -> str:
    """``${NAME}`` -> the environment variable NAME (profiles name the user's data and weights this way); an unset
    variable stays as written, and ``missing_inputs`` reports it."""
    return _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)


def run_knobs(profile: dict, task: str, settings: Dict[str, str], where: str) -> Dict[str, str]:
    knobs = dict(KNOBS)
    knobs.update(profile.get("knobs", {}))
    knobs.update(profile.get("task_knobs", {}).get(task, {}))
    for name, value in settings.items():
        if isinstance(value, dict):  # per-task value
            if task not in value:
                raise SpecError(f"{where}: knob '{name}' has no value for task '{task}'")
            value = value[task]
        knobs[name] = str(value)
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise SpecError(f"{where}: unknown knob(s) {unknown}; known: {sorted(KNOBS)}")
    return {k: expand(str(v)) for k, v in knobs.items()}


def expand_cells(profile: dict, sweeps: List[dict]) -> List[Cell]:
    """Every (sweep, task, column, x, seed) cell with the run that fills it."""
    cells = []
    tasks_allowed = profile.get("tasks")
    for sweep in sweeps:
        if "columns" not in SWEEP_KINDS[sweep["kind"]]:  # no task runs of its own
            continue
        xs = sweep.get("x", {}).get("values", [None])
        x_knob = sweep.get("x", {}).get("knob")
        for task in sweep["tasks"]:
            if tasks_allowed and task not in tasks_allowed:
                continue
            seeds = sweep.get("seeds", {})
            n_seeds = int(seeds.get(task, seeds.get("default", 1)))
            for column in sweep["columns"]:
                for x in xs:
                    for seed in range(1, n_seeds + 1):
                        settings = {**column.get("knobs", {}), "SEED": str(seed)}
                        if x is not None:
                            settings[x_knob] = str(x)
                        where = f"sweep '{sweep['name']}', column '{column['label']}'"
                        knobs = run_knobs(profile, task, settings, where)
                        run = Run(task, tuple(sorted(knobs.items())))
                        cells.append(Cell(sweep["name"], task, column["label"], x, seed, run=run))
    return cells


def unique_runs(cells: List[Cell]) -> List[Run]:
    seen, runs = set(), []
    for cell in cells:
        if cell.run not in seen:
            seen.add(cell.run)
            runs.append(cell.run)
    return runs


def repo_path(value: str) -> Path:
    """A path as profiles and knobs give it: absolute, or relative to the repository (where runs start)."""
    return Path(value) if os.path.isabs(value) else REPO / value


def bilm_outputs(profile: dict) -> List[Path]:
    """The directories the profile's own biLM stages write (runner/bilm.py)."""
    spec = profile.get("bilm") or {}
    outs = [spec["pretrain"]["out"]] if "pretrain" in spec else []
    fine = spec.get("finetune") or {}
    outs += [fine["out"].format(task=t) for t in fine.get("tasks", [])]
    return [repo_path(o) for o in outs]


def missing_inputs(profile: dict, runs: List[Run], exclude: List[Path] = ()) -> List[str]:
    """Data and weight files the runs name that do not exist, each with where to get it (profile 'requires');
    files under ``exclude`` (what the runner itself will write first) are not reported."""
    hints = profile.get("requires", {})  # "KNOB" or "task.KNOB" -> where to get it
    missing = {}
    for run in runs:
        for name in ("TRAIN_PATH", "DEV_PATH", "TEST_PATH", "ELMO_OPTIONS", "ELMO_WEIGHTS", "GLOVE_PATH"):
            value = run.knob_dict.get(name, "")
            if name.startswith("ELMO_") and not run.uses_elmo:
                continue
            path = repo_path(value)
            if any(path.is_relative_to(d) for d in exclude):
                continue
            if value and ("${" in value or not path.exists()):
                hint = hints.get(f"{run.task}.{name}", hints.get(name, ""))
                unset = [m.group(1) for m in _VAR.finditer(value)]
                what = f"environment variable {', '.join(unset)} is not set" if unset else "does not exist"
                missing[value] = f"{run.task} {name} = {value}: {what}{'; ' + hint if hint else ''}"
    return sorted(missing.values())
