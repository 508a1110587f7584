"""Profiles and sweeps (data files) -> the runs to do and the table/figure cells they fill.

A sweep file (runner/sweeps/<name>.json) lists a table's or figure's runs as knob settings; a profile
(runner/profiles/<name>.json, or any path; read and checked by runner/profile.py) says which sweeps to run, with
which data, biLM and sizes. A run is
identified by its task and its complete knob settings, so a run shared by two sweeps (Table 1's baseline is Figure
1's baseline at 100 %) is trained once.
"""
import difflib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from runner.paths import VARIABLE, canonical, data_hint, expand, repo_path
from runner.profile import (
    SWEEP_NAMES,
    TASKS,
    Profile,
    SpecError,
    check_keys,
    check_knob_settings,
    check_no_spaces,
    check_tasks,
    key_error,
    load_json,
    unknown_key,
)
from tasks.knobs import KNOBS, knob_problems

HERE = Path(__file__).parent


# Every sweep kind with the keys its sweep file must have: a new kind is one line here, its builder in
# runner/analysis/tables.py and, if it runs something other than task trainings, its runs' planning (as
# runner/execution/probes.py).
PROBE_KINDS = ("neighbours", "wsd", "pos")  # Tables 4-6: probes/ on the frozen biLM, no task training (Sec. 5.3)

LATER_KNOBS = ("BATCHES_PER_EPOCH", "WORD_VECTORS", "ELMO_PRECISION", "TASK_PRECISION", "ENCODER", "ENCODER_POOLING")


@dataclass(frozen=True)
class Run:
    task: str
    knobs: Tuple[Tuple[str, str], ...]  # every knob of tasks/knobs.py, sorted

    @property
    def knob_dict(self) -> Dict[str, str]:
        return dict(self.knobs)

    @property
    def run_id(self) -> str:
        # a knob added after runs were archived (LATER_KNOBS) enters the identity only when it is set: adding one must
        # not orphan every run that a multi-session profile has archived (results/<profile>/runs/)
        knobs = [(k, canonical(v)) for k, v in self.knobs if not (k in LATER_KNOBS and v == KNOBS[k])]
        digest = hashlib.sha1(json.dumps([self.task, knobs]).encode()).hexdigest()[:10]
        return f"{self.task}-{digest}"

    @property
    def seed(self) -> int:
        return int(self.knob_dict["SEED"])

    @property
    def cache_key(self) -> Tuple[str, ...]:
        """Runs with the same task, data and biLM (or transformer encoder) share one activation cache."""
        k = self.knob_dict
        return (self.task, k["TRAIN_PATH"], k["DEV_PATH"], k["TEST_PATH"], k["ELMO_OPTIONS"], k["ELMO_WEIGHTS"],
                k["ELMO_PRECISION"], k.get("ENCODER", "elmo"), k.get("ENCODER_POOLING", "first"))

    @property
    def uses_elmo(self) -> bool:
        return self.knob_dict["ELMO"] != "none"

    @property
    def reads_bilm(self) -> bool:
        """ELMo from the biLM of ELMO_OPTIONS/ELMO_WEIGHTS (a transformer encoder reads neither)."""
        return self.uses_elmo and self.knob_dict.get("ENCODER", "elmo") == "elmo"


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


def load_sweeps(profile: Profile, profile_path: Path, only: Optional[List[str]] = None) -> List[dict]:
    check_only(profile, only)
    sweeps = []
    for name in profile.sweeps:
        if only and name not in only:
            continue
        sweep = load_json(HERE / "sweeps" / f"{name}.json", "sweep")
        sweep = {**sweep, **profile.sweep_overrides.get(name, {})}
        check_sweep(sweep, f"sweep '{name}' (runner/sweeps/{name}.json with the overrides of '{profile_path}')")
        sweeps.append(sweep)
    return sweeps


# ---- The schema of profiles and sweeps, checked before anything runs: a misspelt key or a wrong value is an error
# naming the key, what was expected and what was found, never a silently ignored setting.

# Sweep kinds and the fields each may have besides SWEEP_COMMON. A new kind (e.g. a probe) is one more entry here
# (and its builder in runner/analysis/tables.py); a kind with "columns" expands to runs, one per column, x value and
# seed.
SWEEP_COMMON = {"name", "kind", "title", "tasks", "note"}
SWEEP_KINDS = {
    "table": {"split", "columns", "reference", "seeds", "first_seed", "seeds_added_later"},
    "curve": {"split", "columns", "reference", "seeds", "first_seed", "seeds_added_later", "x"},
    "mix_weights": {"from"},
    **{kind: {"args", "knobs"} for kind in PROBE_KINDS},  # runner/execution/probes.py
}
SPLITS = ("dev", "test")


def check_only(profile: Profile, only: Optional[List[str]]) -> None:
    for name in only or []:
        if name not in profile.sweeps:
            close = difflib.get_close_matches(name, profile.sweeps, n=1)
            raise SpecError(f"--only: '{name}' is not a sweep of profile '{profile.name}'"
                            f"{f' (did you mean {close[0]!r}?)' if close else ''}; expected some of "
                            f"{', '.join(profile.sweeps)}")


def check_sweep(sweep: dict, where: str) -> None:
    for key in ("name", "kind"):
        if key not in sweep:
            raise SpecError(f"{where}: missing key '{key}'")
    kind = sweep["kind"]
    if kind not in SWEEP_KINDS:
        raise key_error(where, "kind", f"one of {', '.join(SWEEP_KINDS)}", kind)
    required = "args" if kind in PROBE_KINDS else "tasks"  # probes read no task data (runner/execution/probes.py)
    if required not in sweep:
        raise SpecError(f"{where}: missing key '{required}'")
    check_keys(where, sweep, SWEEP_COMMON | SWEEP_KINDS[kind], f"field of a '{kind}' sweep")
    if "tasks" in sweep:
        check_tasks(where, "tasks", sweep["tasks"])
    if "split" in SWEEP_KINDS[kind] and sweep.get("split") not in SPLITS:
        raise key_error(where, "split", " or ".join(SPLITS), sweep.get("split"))
    if "columns" in SWEEP_KINDS[kind]:
        columns = sweep.get("columns")
        if not isinstance(columns, list) or not columns:
            raise key_error(where, "columns", "a non-empty list of {\"label\": ..., \"knobs\": {...}}", columns)
        labels = set()
        for i, column in enumerate(columns):
            if not isinstance(column, dict) or not isinstance(column.get("label"), str):
                raise key_error(where, f"columns[{i}]", "an object with a string 'label'", column)
            check_keys(where, column, ("label", "knobs"), "column key", prefix=f"columns[{i}].")
            if column["label"] in labels:  # one run would be counted as two seeds of one cell
                raise key_error(where, f"columns[{i}].label", "labels that differ between columns",
                                 column["label"])
            labels.add(column["label"])
            check_knob_settings(where, f"columns[{i}].knobs", column.get("knobs", {}), per_task=True)
        if "reference" in sweep and sweep["reference"] not in labels:  # the column the others are differenced from
            raise key_error(where, "reference", "the label of one of its columns (" + ", ".join(
                repr(c["label"]) for c in columns) + ")", sweep["reference"])
    seeds = sweep.get("seeds", {})
    if not isinstance(seeds, dict):
        raise key_error(where, "seeds", "an object task|'default' -> number of seeds", seeds)
    for task, n in seeds.items():
        if task != "default" and task not in TASKS:
            raise unknown_key(where, f"seeds.{task}", ["default", *TASKS], "task")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise key_error(where, f"seeds.{task}", "an integer >= 1", n)
    first = sweep.get("first_seed", 1)
    if not isinstance(first, int) or isinstance(first, bool) or first < 1:
        raise key_error(where, "first_seed", "an integer >= 1 (the seeds are first_seed .. first_seed + n - 1)", first)
    # runner/analysis/claims.py: shown, not in the verdict
    for task, entry in (sweep.get("seeds_added_later") or {}).items():
        wanted = sweep_seeds(sweep, task)
        if task not in TASKS:
            raise unknown_key(where, f"seeds_added_later.{task}", TASKS, "task")
        if not isinstance(entry, dict) or not isinstance(entry.get("seeds"), list) or not entry["seeds"] or any(
                not isinstance(s, int) or isinstance(s, bool) or s not in wanted for s in entry["seeds"]):
            raise key_error(where, f"seeds_added_later.{task}", f"{{\"seeds\": [some of this sweep's seeds "
                             f"{wanted[0]}..{wanted[-1]}], \"commit\": the commit that added them, \"why\": ...}}",
                             entry)
    if "x" in SWEEP_KINDS[kind]:
        x = sweep.get("x")
        if not isinstance(x, dict) or x.get("knob") not in KNOBS or x.get("knob") == "SEED":
            raise key_error(where, "x", "{\"knob\": a knob other than SEED, \"values\": a non-empty list}", x)
        check_keys(where, x, ("knob", "values", "full_percent", "xlabel", "knobs", "tasks"), "key of x", prefix="x.")
        per_task = x.get("tasks", {})  # e.g. Figure 1's SRL points: other fractions of its file than SNLI's
        if not isinstance(per_task, dict):
            raise key_error(where, "x.tasks", "an object task -> {values, full_percent, xlabel, knobs}", per_task)
        for task, axis in per_task.items():
            if task not in TASKS:
                raise unknown_key(where, f"x.tasks.{task}", TASKS, "task")
            if not isinstance(axis, dict):
                raise key_error(where, f"x.tasks.{task}", "an object with values, full_percent, xlabel, knobs", axis)
            check_keys(where, axis, ("values", "full_percent", "xlabel", "knobs"), f"key of x.tasks.{task}",
                        prefix=f"x.tasks.{task}.")
        for task in sweep.get("tasks", []):
            _check_x_axis(where, x_axis(sweep, task), sweep["columns"], f"x.tasks.{task}" if task in per_task else "x")
    for name in sweep.get("from", []) if "from" in SWEEP_KINDS[kind] else []:
        if name not in SWEEP_NAMES:
            raise unknown_key(where, f"from[{name!r}]", SWEEP_NAMES, "sweep")


def x_axis(sweep: dict, task: str) -> dict:
    """A curve's x axis for one task: the keys of ``x``, with those of ``x.tasks.<task>`` in their place (Figure 1's SRL
    points are other fractions of its training file than SNLI's: the two files are other shares of the real sets)."""
    axis = {k: v for k, v in sweep["x"].items() if k != "tasks"}
    axis.update(sweep["x"].get("tasks", {}).get(task, {}))
    return axis


def _check_x_axis(where: str, x: dict, columns: list, px: str) -> None:
    """One task's x axis (``px``: where its keys were written, 'x' or 'x.tasks.<task>')."""
    if not isinstance(x.get("values"), list) or not x["values"]:
        raise key_error(where, f"{px}.values", "a non-empty list", x.get("values"))
    # knobs: more knobs for the runs at some x values, e.g. {"0.055883": {"BATCHES_PER_EPOCH": "172"}}
    point_knobs = x.get("knobs", {})
    if not isinstance(point_knobs, dict):
        raise key_error(where, f"{px}.knobs", "an object x value -> {knob: value}", point_knobs)
    values = [str(v) for v in x["values"]]
    for i, value in enumerate(values):
        check_no_spaces(where, f"{px}.values[{i}]", x["values"][i])
        if value in values[:i] or any(_same_number(value, v) for v in values[:i]):
            # one run would count as two seeds of one point (± 0.00) and the row would outgrow its header
            raise key_error(where, f"{px}.values[{i}]", "values that differ", x["values"][i])
    for i, column in enumerate(columns):
        if x["knob"] in column.get("knobs", {}):  # the x value would replace it without a word
            raise key_error(where, f"columns[{i}].knobs.{x['knob']}", f"no {x['knob']} in a column (the x axis "
                             f"sets it at each point)", column["knobs"][x["knob"]])
    for value, knobs in point_knobs.items():
        if value not in values:
            raise key_error(where, f"{px}.knobs.{value}", f"one of {px}.values ({', '.join(map(str, x['values']))})",
                             value)
        if not isinstance(knobs, dict) or x["knob"] in knobs:
            raise key_error(where, f"{px}.knobs.{value}", f"an object of knobs other than {x['knob']}", knobs)
        check_knob_settings(where, f"{px}.knobs.{value}", knobs, per_task=True)
        for column in columns:
            both = sorted(set(knobs) & set(column.get("knobs", {})))
            if both:  # the point's value would win, and e.g. the baseline cell be filled by an ELMo run
                raise key_error(where, f"{px}.knobs.{value}.{both[0]}", f"knobs that no column sets (column "
                                 f"'{column['label']}' sets {both[0]})", knobs[both[0]])
    # full_percent: what % of the axis's 100 % the whole training file is (SNLI small: 9,842 of the real
    # 550,152 pairs = 1.789), so that a TRAIN_FRACTION point is drawn at fraction x full_percent (Figure 1)
    full = x.get("full_percent", 100)
    if isinstance(full, bool) or not isinstance(full, (int, float)) or not 0 < full <= 100:
        raise key_error(where, f"{px}.full_percent", "a number in (0, 100]", full)
    if x.get("knob") != "TRAIN_FRACTION" and ("full_percent" in x or "xlabel" in x):
        raise key_error(where, "x.knob", "TRAIN_FRACTION with full_percent or xlabel", x.get("knob"))
    if not isinstance(x.get("xlabel", ""), str):
        raise key_error(where, f"{px}.xlabel", "a string", x["xlabel"])


def _same_number(a: str, b: str) -> bool:
    """'1' and '1.0' on an x axis of numbers are one point."""
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def run_knobs(profile: Profile, task: str, settings: Dict[str, str], where: str) -> Dict[str, str]:
    knobs, origin = dict(KNOBS), {}
    layers = [("key 'knobs'", profile.knobs), (f"key 'task_knobs.{task}'", profile.task_knobs.get(task, {}))]
    for source, layer in layers + [(where, settings)]:
        for name, value in layer.items():
            if isinstance(value, dict):  # per-task value
                if task not in value:
                    raise SpecError(f"{where}: knob '{name}' has no value for task '{task}'")
                value = value[task]
            knobs[name], origin[name] = str(value), source
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise SpecError(f"{where}: unknown knob(s) {unknown}; known: {sorted(KNOBS)}")
    knobs = {k: expand(str(v)) for k, v in knobs.items()}
    for problem in knob_problems(knobs):  # the value each run would train with, checked before any run starts
        name = problem.split()[1]
        raise SpecError(f"profile '{profile.name}', {origin.get(name, 'default')}, task {task}: {problem}")
    return knobs


def without_idle_knobs(knobs: Dict[str, str]) -> Dict[str, str]:
    """A run's knobs with those that cannot change it at their defaults, so that they do not enter its identity: a
    baseline (ELMO=none) runs no biLM, and `--precision bfloat16` gave every baseline a new run id (each trained
    twice, the same numbers). Only ELMO_PRECISION (a LATER_KNOBS knob, absent from every archived id): the other ELMo
    knobs stay, as archived baselines' ids hold them."""
    if knobs.get("ELMO") == "none":
        return {**knobs, **{k: KNOBS[k] for k in ("ELMO_PRECISION", "ENCODER", "ENCODER_POOLING")}}
    return knobs


def sweep_seeds(sweep: dict, task: str) -> List[int]:
    """The seeds of a task in a sweep: 'seeds' (per task, else 'default', else 1) counted from 'first_seed' (default 1;
    a confirmatory profile declares fresh seeds, e.g. 4..8, so that its runs share none with an earlier profile's)."""
    seeds = sweep.get("seeds", {})
    first = int(sweep.get("first_seed", 1))
    return list(range(first, first + int(seeds.get(task, seeds.get("default", 1)))))


def expand_cells(profile: Profile, sweeps: List[dict]) -> List[Cell]:
    """Every (sweep, task, column, x, seed) cell with the run that fills it."""
    cells = []
    tasks_allowed = profile.tasks
    for sweep in sweeps:
        if "columns" not in SWEEP_KINDS.get(sweep["kind"], ()):
            continue
        for task in sweep["tasks"]:
            if tasks_allowed and task not in tasks_allowed:
                continue
            axis = x_axis(sweep, task) if "x" in sweep else {"values": [None]}
            for column in sweep["columns"]:
                for x in axis["values"]:
                    for seed in sweep_seeds(sweep, task):
                        settings = {**column.get("knobs", {}), "SEED": str(seed)}
                        if x is not None:
                            settings.update(axis.get("knobs", {}).get(str(x), {}), **{axis["knob"]: str(x)})
                        where = f"sweep '{sweep['name']}', column '{column['label']}'"
                        knobs = without_idle_knobs(run_knobs(profile, task, settings, where))
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


def epoch_cap(knobs: dict) -> Optional[int]:
    """A run's epoch cap (its NUM_EPOCHS knob) as recorded in its result, or None where none was recorded."""
    cap = str((knobs or {}).get("NUM_EPOCHS", ""))
    return int(cap) if cap.isdigit() else None


def ran_to_cap(result: dict) -> Optional[bool]:
    """Whether a finished run trained every epoch its cap allows (patience never stopped it); None where its result
    recorded no cap."""
    cap = epoch_cap(result.get("knobs"))
    return None if cap is None else len(result.get("epochs") or []) >= cap


def cap_free_id(task: str, knobs: dict) -> str:
    """The identity of a training apart from its epoch cap: runs equal here differ in NUM_EPOCHS alone."""
    return Run(task, tuple(sorted({**knobs, "NUM_EPOCHS": "*"}.items()))).run_id


def patience_twin(run: Run, archived: List[dict]) -> Optional[dict]:
    """An archived result that is ``run``'s training under another epoch cap: same task and every other knob, and
    patience stopped it after k epochs, under its own cap, with k no more than ``run``'s cap. Every config's
    NUM_EPOCHS sets the trainer's num_epochs and nothing else (jsonnet_configs/elmo.libsonnet ``trainer``), and no
    config's learning-rate schedule reads it (reduce_on_plateau, staircase_exponential or none), so under any cap of
    at least k the training is the same, epoch for epoch. A raised cap then retrains only the runs that ran to the old
    one (the small profile's SNLI: 20 -> 40, docs/small_scale.md)."""
    cap = epoch_cap(run.knob_dict)
    if cap is None:
        return None
    key = cap_free_id(run.task, run.knob_dict)
    for result in archived:
        epochs = len(result.get("epochs") or [])
        if (result.get("task") == run.task and ran_to_cap(result) is False and 0 < epochs <= cap
                and cap_free_id(run.task, result.get("knobs") or {}) == key):
            return result
    return None


def bilm_outputs(profile: Profile) -> List[Path]:
    """The directories the profile's own stages write: its biLM (runner/stages/bilm_stages.py) and word vectors
    (runner/stages/word_vectors.py)."""
    outs = [profile.pretrain["out"]] if profile.pretrain else []
    outs += [profile.vectors["out"]] if profile.vectors else []
    fine = profile.finetune
    outs += [fine["out"].format(task=t) for t in fine.get("tasks", [])]
    return [repo_path(o) for o in outs]


def missing_inputs(hints: Dict[str, str], runs: List[Run], exclude: List[Path] = ()) -> List[str]:
    """Data and weight files the runs name that do not exist, each with where to get it (``hints``: the profile's
    'requires', "KNOB" or "task.KNOB" -> where to get it); files under ``exclude`` (what the runner itself will write
    first) are not reported."""
    missing = {}
    for run in runs:
        for name in ("TRAIN_PATH", "DEV_PATH", "TEST_PATH", "ELMO_OPTIONS", "ELMO_WEIGHTS", "GLOVE_PATH"):
            value = run.knob_dict.get(name, "")
            if name.startswith("ELMO_") and not run.reads_bilm:
                continue
            path = repo_path(value)
            if any(path.is_relative_to(d) for d in exclude):
                continue
            if value and ("${" in value or not path.exists()):
                hint = hints.get(f"{run.task}.{name}", hints.get(name, data_hint(value)))
                unset = [m.group(1) for m in VARIABLE.finditer(value)]
                what = f"environment variable {', '.join(unset)} is not set" if unset else "does not exist"
                missing[value] = f"{run.task} {name} = {value}: {what}{'; ' + hint if hint else ''}"
    return sorted(missing.values())
