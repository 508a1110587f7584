"""Profiles (runner/profiles/<name>.json, or any path): the typed, frozen Profile, one field per key a profile file may
give with its default, and its schema, checked when the file is loaded (load_profile): an unknown key or a wrong
value is a SpecError, one line naming the file, the key, what was expected and what was found. Also what the
sweeps' schema (runner/spec.py) shares with it: reading a JSON file (load_json) and the checks of keys, tasks and
knob settings.
"""
import codecs
import difflib
import json
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Dict, Optional, Tuple

from runner.paths import REPO
from tasks.knobs import KNOBS

HERE = Path(__file__).parent


class SpecError(ValueError):
    """A profile or sweep file that cannot be used: the message names the file and key."""


# ---- The profile, typed: one field per key a profile file may give, its JSON type and its default in one place
# (``field(metadata={"json": ...})``). Built once by load_profile after check_profile; frozen: nothing writes into
# it (the command line's knobs and device make a new one: runner/plan.py make_plan). Its lists are tuples; the nested
# objects ("bilm", "vectors", "bilm_of_record", "sweep_overrides", "task_knobs", "slurm", ...) stay JSON objects, each
# checked at load (check_profile), read and never written: a function takes the one it reads.

def _key(json_type, default=None, factory=None):
    """A profile key: the JSON type its value must have, and its default (``factory``: a new empty object each)."""
    kind = {"metadata": {"json": json_type}}
    return field(default_factory=factory, **kind) if factory is not None else field(default=default, **kind)


@dataclass(frozen=True)
class Profile:
    name: str = field(metadata={"json": str})  # default: the file's name without .json
    sweeps: Tuple[str, ...] = field(metadata={"json": list})  # runner/sweeps/<name>.json, in the profile's order
    description: str = _key(str, "")
    tasks: Optional[Tuple[str, ...]] = _key(list)  # None: every task of its sweeps; the runs' order (run_order)
    knobs: Dict[str, str] = _key(dict, factory=dict)  # knob -> value for every run (tasks/knobs.py)
    task_knobs: Dict[str, Dict[str, str]] = _key(dict, factory=dict)  # task -> knob -> value, over "knobs"
    requires: Dict[str, str] = _key(dict, factory=dict)  # "KNOB" or "task.KNOB" -> where to get the file it names
    jobs: int = _key(int, 1)  # runs at a time on CPU (--jobs wins)
    cache: bool = _key(bool, True)  # the activation caches (--no-cache wins)
    archive_runs: bool = _key(bool, False)  # finished runs kept in results/<name>/runs (runner/execution/archive.py)
    device: str = _key(str, "cpu")  # cpu | cuda (--device wins)
    run_order: str = _key(str, "tasks")  # tasks | sweeps (runner/plan.py wanted_runs)
    replicates: Optional[str] = _key(str)  # the exploratory profile this one confirms (replication.md)
    bilm: Dict[str, dict] = _key(dict, factory=dict)  # {"pretrain": {out, args}, "finetune": {tasks, out, args, from}}
    vectors: Dict[str, object] = _key(dict, factory=dict)  # the baselines' word vectors: {out, train, dims, args}
    bilm_of_record: Dict[str, str] = _key(dict, factory=dict)  # {"from": kept in git, "to": the stage's output}
    sweep_overrides: Dict[str, dict] = _key(dict, factory=dict)  # sweep -> fields over its file's
    slurm: Dict[str, object] = _key(dict, factory=dict)  # --executor slurm's defaults (runner/settings.py)
    reuse_runs_from: Tuple[str, ...] = _key(list, ())  # results directories whose archived runs it may reuse

    @classmethod
    def of(cls, given: dict, path) -> "Profile":
        """A profile file's JSON object, checked (check_profile: SpecError, one line naming the file and the key)."""
        check_profile(given, path)
        values = {"name": Path(path).stem, **given}
        return cls(**{k: tuple(v) if PROFILE_KEYS[k] is list else v for k, v in values.items()})  # lists: tuples

    @property
    def pretrain(self) -> Optional[dict]:
        """bilm.pretrain: {out, args}, or None."""
        return self.bilm.get("pretrain")

    @property
    def finetune(self) -> dict:
        """bilm.finetune: {tasks, out, args, from} ({} without one)."""
        return self.bilm.get("finetune") or {}

    def raw_knob(self, task: str, name: str) -> str:
        """A knob as the profile writes it (with its ${VARIABLE}), "" where it gives none."""
        return str(self.task_knobs.get(task, {}).get(name, self.knobs.get(name, "")))

    def to_json(self) -> dict:
        """The keys that differ from their defaults, as a profile file writes them."""
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self)
                for v in [getattr(self, f.name)] if f.name in ("name", "sweeps") or v != _default(f)}


def _default(f):
    return f.default_factory() if f.default_factory is not MISSING else f.default


PROFILE_KEYS = {f.name: f.metadata["json"] for f in fields(Profile)}


def load_profile(name_or_path: str) -> Tuple[Profile, Path]:
    """The profile (a name in runner/profiles/ or a path), checked against the schema (SpecError: one line)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = HERE / "profiles" / f"{name_or_path}.json"
    return Profile.of(load_json(path, "profile"), path), path


class _Twice(dict):
    """A JSON object that gives a key twice (json.loads keeps the last without a word): marked by ``_pairs`` and
    named by ``_twice`` once the whole file is read, with the path of keys to it."""

    def __init__(self, pairs, key):
        super().__init__(pairs)
        self.key, self.values = key, [v for k, v in pairs if k == key]


def _pairs(pairs) -> dict:
    keys = [k for k, _ in pairs]
    twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    return dict(pairs) if twice is None else _Twice(pairs, twice)


def _twice(value, path: str = ""):
    """(dotted key, its values) of the first object in ``value`` that gives a key twice, or None."""
    if isinstance(value, _Twice):
        return f"{path}.{value.key}" if path else value.key, value.values
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    else:
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value)) if isinstance(value, list) else ()
    return next((found for where, item in items for found in [_twice(item, where)] if found), None)


def load_json(path: Path, what: str) -> dict:
    """A profile or sweep file: UTF-8 (a byte-order mark is skipped), JSON, each key of an object once."""
    if not path.is_file():
        raise SpecError(f"{what} '{path}' does not exist")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        at = e.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        line = data[:at].count(b"\n") + 1
        raise SpecError(f"{what} '{path}': expected UTF-8 text, found byte 0x{data[at]:02x} at line {line}") from None
    try:
        loaded = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as e:
        raise SpecError(f"{what} '{path}' is not valid JSON: {e}") from None
    twice = _twice(loaded)
    if twice:
        key, values = twice
        shown = [repr(v) if len(repr(v)) <= 60 else repr(v)[:56] + " ..." for v in values]
        raise SpecError(f"{what} '{path}': key '{key}' given twice: expected each key once (JSON would keep only the "
                        f"last), found {' and '.join(shown)}")
    return loaded


# ---- The schema of profiles, checked before anything runs: a misspelt key or a wrong value is an error naming the
# key, what was expected and what was found, never a silently ignored setting.

TASKS = sorted(p.stem for p in (REPO / "jsonnet_configs").glob("*.jsonnet"))
SWEEP_NAMES = sorted(p.stem for p in (HERE / "sweeps").glob("*.json"))

RUN_ORDERS = ("tasks", "sweeps")  # runner/plan.py wanted_runs
BILM_KEYS = {"pretrain": {"out", "args"}, "finetune": {"tasks", "out", "args", "from"}}
VECTORS_KEYS = {"out", "train", "dims", "args"}  # runner/stages/word_vectors.py
OF_RECORD_KEYS = {"from", "to"}  # runner/stages/bilm_stages.py restore_of_record
DEVICES = ("cpu", "cuda")
JSON_TYPES = {str: "a string", list: "a list", dict: "an object", int: "an integer", bool: "true or false"}


def found_text(value) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}" if not isinstance(value, str) \
        else repr(value)


def key_error(where: str, key: str, expected: str, found) -> SpecError:
    return SpecError(f"{where}: key '{key}': expected {expected}, found {found_text(found)}")


def unknown_key(where: str, key: str, known, what: str) -> SpecError:
    leaf = re.split(r"[.\[\]']+", key.strip("]'"))[-1]  # 'tasks['nerr']' -> nerr, 'columns[0].knob' -> knob
    close = difflib.get_close_matches(leaf, list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return SpecError(f"{where}: key '{key}': not a {what}{hint}; expected one of {', '.join(sorted(known))}")


def check_keys(where: str, mapping: dict, known, what: str, prefix: str = "") -> None:
    for key in mapping:
        if key not in known:
            raise unknown_key(where, prefix + key, known, what)


def check_tasks(where: str, key: str, value) -> None:
    if not isinstance(value, list) or not value:
        raise key_error(where, key, f"a non-empty list of tasks ({', '.join(TASKS)})", value)
    for task in value:
        if not isinstance(task, str):
            raise key_error(where, key, f"a list of task names ({', '.join(TASKS)})", value)
        if task not in TASKS:
            raise unknown_key(where, f"{key}[{task!r}]", TASKS, "task")
    twice = sorted({t for t in value if value.count(t) > 1})
    if twice:  # each cell would average two copies of every seed (it once printed '51.50 ± 0.58' from runs of ± 0.71)
        raise key_error(where, key, "each task once", twice[0] if len(twice) == 1 else twice)


def check_knob_settings(where: str, key: str, settings, per_task: bool) -> None:
    """Knob name -> value (``per_task``: or a dict task -> value). Values are checked with every knob merged, in
    run_knobs; here the names, the shapes and SEED, which the runner sets per run from the sweep's 'seeds'."""
    if not isinstance(settings, dict):
        raise key_error(where, key, "an object of knob settings", settings)
    for name, value in settings.items():
        if name not in KNOBS:
            raise unknown_key(where, f"{key}.{name}", KNOBS, "knob of tasks/knobs.py")
        if name == "SEED":
            raise SpecError(f"{where}: key '{key}.SEED': the runner sets SEED per run (1..n, from the sweep's "
                            f"'seeds'), found {value!r}; remove it (a fixed seed would be replaced, or count one run "
                            f"as several seeds)")
        values = value.items() if per_task and isinstance(value, dict) else [(None, value)]
        for task, v in values:
            if task is not None and task not in TASKS:
                raise unknown_key(where, f"{key}.{name}.{task}", TASKS, "task")
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise key_error(where, f"{key}.{name}" + (f".{task}" if task else ""),
                                 "a string" + (" or an object task -> string" if per_task else ""), v)
            check_no_spaces(where, f"{key}.{name}" + (f".{task}" if task else ""), v)


def check_no_spaces(where: str, key: str, value) -> None:
    """A knob value is its run's identity: " 1" passes NUM_EPOCHS' rule as 1 epoch but makes another run id than "1"
    (the same training twice, never matched with the archive)."""
    if isinstance(value, str) and value != value.strip():
        raise key_error(where, key, "a value without spaces around it (a knob value is part of its run's id)", value)


def check_profile(given, path) -> None:
    """A profile file's JSON object against the schema (Profile's fields): SpecError, one line naming the file, the
    key, what was expected and what was found."""
    where = f"profile '{path}'"
    if not isinstance(given, dict):
        raise SpecError(f"{where}: expected a JSON object, found {found_text(given)}")
    check_keys(where, given, PROFILE_KEYS, "profile key")
    if "sweeps" not in given:
        raise SpecError(f"{where}: missing key 'sweeps' (a list of: {', '.join(SWEEP_NAMES)})")
    for key, kind in PROFILE_KEYS.items():
        if key in given and (not isinstance(given[key], kind) or (kind is int and isinstance(given[key], bool))):
            raise key_error(where, key, JSON_TYPES[kind], given[key])
    if not given["sweeps"]:
        raise key_error(where, "sweeps", f"a non-empty list of: {', '.join(SWEEP_NAMES)}", given["sweeps"])
    for name in given["sweeps"]:
        if not isinstance(name, str):
            raise key_error(where, "sweeps", f"a list of sweep names ({', '.join(SWEEP_NAMES)})", given["sweeps"])
        if name not in SWEEP_NAMES:
            raise unknown_key(where, f"sweeps[{name!r}]", SWEEP_NAMES, "sweep (runner/sweeps/*.json)")
    if "tasks" in given:
        check_tasks(where, "tasks", given["tasks"])
    check_knob_settings(where, "knobs", given.get("knobs", {}), per_task=False)
    for task, knobs in given.get("task_knobs", {}).items():
        if task not in TASKS:
            raise unknown_key(where, f"task_knobs.{task}", TASKS, "task")
        check_knob_settings(where, f"task_knobs.{task}", knobs, per_task=False)
    for key, hint in given.get("requires", {}).items():
        knob = key.split(".", 1)[-1]
        if knob not in KNOBS or ("." in key and key.split(".", 1)[0] not in TASKS) or not isinstance(hint, str):
            raise key_error(where, f"requires.{key}", "'KNOB' or 'task.KNOB' -> a hint string", hint)
    if given.get("jobs", 1) < 1:
        raise key_error(where, "jobs", "an integer >= 1", given["jobs"])
    if given.get("run_order", "tasks") not in RUN_ORDERS:
        raise key_error(where, "run_order", " or ".join(RUN_ORDERS), given["run_order"])
    if "replicates" in given and not (REPO / "results" / given["replicates"] / "claims.json").is_file():
        raise key_error(where, "replicates", "the name of a profile whose results/<name>/claims.json exists (the "
                         "exploratory verdicts this profile's are shown beside: runner/analysis/replication.py)",
                         given["replicates"])
    if given.get("device", "cpu") not in DEVICES:
        raise key_error(where, "device", " or ".join(DEVICES), given["device"])
    for stage, spec in given.get("bilm", {}).items():
        if stage not in BILM_KEYS:
            raise unknown_key(where, f"bilm.{stage}", BILM_KEYS, "biLM stage")
        if not isinstance(spec, dict):
            raise key_error(where, f"bilm.{stage}", "an object", spec)
        check_keys(where, spec, BILM_KEYS[stage], f"key of bilm.{stage}", prefix=f"bilm.{stage}.")
        if not isinstance(spec.get("out"), str):
            raise key_error(where, f"bilm.{stage}.out", "a directory (a string)", spec.get("out"))
        _check_strings(where, f"bilm.{stage}.args", spec.get("args", []) if stage == "finetune" else spec.get("args"),
                       "a list of the stage's command-line arguments (strings)")
        if stage == "finetune" and "tasks" in spec:
            check_tasks(where, "bilm.finetune.tasks", spec["tasks"])
    if "vectors" in given:
        check_keys(where, given["vectors"], VECTORS_KEYS, "key of vectors", prefix="vectors.")
        for key, kind in (("out", str), ("train", list), ("dims", list), ("args", list)):
            if key in given["vectors"] and not isinstance(given["vectors"][key], kind):
                raise key_error(where, f"vectors.{key}", JSON_TYPES[kind], given["vectors"][key])
        for key in ("train", "dims", "args"):
            _check_strings(where, f"vectors.{key}", given["vectors"].get(key, []), "a list of strings")
        for key in ("out", "train"):
            if key not in given["vectors"]:
                raise key_error(where, f"vectors.{key}", "present (runner/stages/word_vectors.py)", None)
    if "bilm_of_record" in given:
        check_keys(where, given["bilm_of_record"], OF_RECORD_KEYS, "key of bilm_of_record", "bilm_of_record.")
        for key, value in sorted({k: given["bilm_of_record"].get(k) for k in OF_RECORD_KEYS}.items()):
            if not isinstance(value, str):
                raise key_error(where, f"bilm_of_record.{key}", "a path (a string)", value)
    _check_strings(where, "reuse_runs_from", given.get("reuse_runs_from", []),
                   "a list of results directories (strings, e.g. \"results/small\")")
    for results in given.get("reuse_runs_from", []):  # (archived with this profile's results: archive_runs)
        if not (REPO / results / "runs").is_dir() or not given.get("archive_runs"):
            raise key_error(where, "reuse_runs_from", "results directories with archived runs (e.g. results/small)"
                            ", with \"archive_runs\": true", results)
    check_slurm(given.get("slurm", {}))
    for name, override in given.get("sweep_overrides", {}).items():
        if name not in given["sweeps"]:
            raise unknown_key(where, f"sweep_overrides.{name}", given["sweeps"], "sweep of this profile's 'sweeps'")
        if not isinstance(override, dict):
            raise key_error(where, f"sweep_overrides.{name}", "an object of sweep fields", override)


def _check_strings(where: str, key: str, value, expected: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise key_error(where, key, expected, value)


SLURM_KEYS = {"partition": str, "account": str, "qos": str, "time_min": int, "mem_gb": (int, float), "sbatch": list,
              "max_jobs": int, "retries": int}  # the profile's "slurm" object: each its --slurm-* flag's default
SLURM_EXPECTED = {"partition": "a string", "account": "a string", "qos": "a string", "time_min": "an integer >= 1",
                  "mem_gb": "a number > 0", "sbatch": "a list of sbatch options such as \"--constraint=a100\"",
                  "max_jobs": "an integer >= 1", "retries": "an integer >= 0"}


def check_slurm(given) -> None:
    """The profile's "slurm" object (runner/settings.py slurm_fields reads it)."""
    where = "profile key 'slurm'"
    if not isinstance(given, dict):
        raise SpecError(f"{where}: expected an object, found {type(given).__name__}")
    for key, value in given.items():
        kind = SLURM_KEYS.get(key)
        if kind is None:
            raise SpecError(f"{where}: unknown key {key!r} (expected: {', '.join(SLURM_KEYS)})")
        if not isinstance(value, kind) or isinstance(value, bool) or (
                key in ("time_min", "max_jobs") and value < 1) or (key == "retries" and value < 0) or (
                key == "mem_gb" and value <= 0) or (key == "sbatch" and not all(
                    isinstance(o, str) and o.startswith("--") for o in value)):
            raise SpecError(f"{where}: '{key}' must be {SLURM_EXPECTED[key]}, found {value!r}")
