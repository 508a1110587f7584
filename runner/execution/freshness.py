"""What a run read: the checksums of its data, biLM and GloVe files, part of the identity of a finished run.

A run's directory name comes from its knobs, so a data or weights file changed at the same path would otherwise leave
the old result looking current. The runner records these checksums with the result (``inputs`` in result.json) and
compares them on every later invocation (runner/execution/archive.py check_finished decides what to do with a stale
run). Hashing a 5 GB GloVe file takes a minute, so checksums are kept in a small file keyed by (path, size, mtime_ns): a
file is read again only when one of those changes.
"""
import functools
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Dict, Optional

from runner.paths import repo_path
from runner.records import load_result
from runner.spec import SpecError
from runner.task_configs import task_config
from tasks.knobs import KNOBS

# The knobs that name files a run reads; the ELMo ones only for runs with ELMo (a baseline never opens them).
INPUT_KNOBS = ("TRAIN_PATH", "DEV_PATH", "TEST_PATH", "GLOVE_PATH", "ELMO_OPTIONS", "ELMO_WEIGHTS")

FRESH_S = 2

# What an empty ELMO_OPTIONS/ELMO_WEIGHTS knob reads (jsonnet_configs/elmo.libsonnet:34-35).
BUNDLED_BILM = {"ELMO_OPTIONS": "elmo_module/bundled/tiny_options.json",
                "ELMO_WEIGHTS": "elmo_module/bundled/tiny_weights.hdf5"}


@functools.lru_cache(maxsize=None)
def bundled_data(task: str) -> Dict[str, str]:
    """What an empty TRAIN/DEV/TEST_PATH knob reads: the task's bundled sample, as its config names it (evaluated
    with the default knobs; '' where the config has no such split, as SQuAD's test)."""

    config = task_config(task, dict(KNOBS))
    return {"TRAIN_PATH": config.get("train_data_path", ""), "DEV_PATH": config.get("validation_data_path", ""),
            "TEST_PATH": config.get("test_data_path", "")}


def input_paths(task: str, knobs: Dict[str, str], uses_elmo: bool) -> Dict[str, str]:
    """Knob -> the file it makes the run read: the knob's value, or for an empty one the bundled file the config
    falls back to (the bundled sample data and biLM are files a user can edit too, so they are checksummed like any
    other input)."""
    paths = {}
    for name in INPUT_KNOBS:
        if name.startswith("ELMO_") and not uses_elmo:
            continue
        paths[name] = knobs.get(name, "") or {**BUNDLED_BILM, **bundled_data(task)}.get(name, "")
    encoder = knobs.get("ENCODER", "elmo")
    if uses_elmo and encoder != "elmo":  # a transformer's directory (every file below it); not the biLM's files
        paths = {k: v for k, v in paths.items() if not k.startswith("ELMO_")}
        if not encoder.startswith("hf:"):  # (a hub name is transformers' cache, not a file of the run's)
            from elmo_module.transformer import model_source  # (torch behind it: loaded for a transformer only)

            paths["ENCODER"] = model_source(encoder) if encoder.startswith("pkg:") else encoder
    return paths


class Checksums:
    """sha256 of files and directories (every file below, by relative path), cached in ``store`` (JSON)."""

    def __init__(self, store: Path):
        self.store = Path(store)
        try:
            self.known = json.loads(self.store.read_text())
        except (OSError, ValueError):  # none yet, or cut short: only costs hashing again
            self.known = {}
        self.changed = False

    def _file(self, path: Path) -> str:
        stat = path.stat()
        key = str(path.resolve())
        entry = self.known.get(key)
        if entry and entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns:
            return entry["sha256"]
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        # A file changed within a clock tick of its last change can keep its mtime (coarse file-system clocks):
        # like git's "racily clean" rule, a file younger than FRESH_S is hashed every time, never cached.
        if time.time_ns() - stat.st_mtime_ns > FRESH_S * 1e9:
            self.known[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest.hexdigest()}
            self.changed = True
        return digest.hexdigest()

    def of(self, path: Path) -> str:
        if not path.is_dir():
            return self._file(path)
        digest = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{f.relative_to(path)}\0{self._file(f)}\n".encode())
        return digest.hexdigest()

    def save(self) -> None:
        if not self.changed:
            return
        tmp = self.store.with_name(f".{self.store.name}.{os.getpid()}")
        try:
            self.store.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.known, indent=0))
            os.replace(tmp, self.store)
        except OSError:  # a cache only: a full disk here must not stop anything (the runs' own writes will say so)
            tmp.unlink(missing_ok=True)


def run_inputs(paths: Dict[str, str], checksums: Checksums, resolve) -> Dict[str, Optional[str]]:
    """Knob -> sha256 of the file it names (``paths``: input_paths); None for an empty one (no GloVe) or a path that
    is not here (--build-only on another machine, an hf: dataset: not checked). ``resolve`` turns a knob value into
    a path (relative to the repository)."""
    inputs = {}
    for name, value in paths.items():
        path = resolve(value) if value and "${" not in value else None
        inputs[name] = checksums.of(path) if path is not None and path.exists() else None
    return inputs


def stale_inputs(recorded: Optional[dict], current: Dict[str, Optional[str]], paths: Dict[str, str]) -> list:
    """The inputs that changed since a run finished: 'KNOB (path)' for each checksum that differs. Inputs not
    checkable now (None on either side: runs recorded before the bundled files were checked, too) are not
    reported."""
    return [f"{name} ({paths.get(name, '')})" for name, digest in current.items()
            if digest and (recorded or {}).get(name) and recorded[name] != digest]


def settle_stale(stale: list, redo: bool, what: str, verb: str, note: str = "runs again") -> None:
    """``stale``: (run directory, changed inputs) of finished ``what`` (task runs, probe runs). Without ``redo``, a
    SpecError lists them; with it, each result.json is moved to result.stale.json so that the run ``verb``s again
    (``note``: what the line printed for each says comes of it)."""
    import os


    if stale and not redo:
        lines = [f"  - {directory}: {', '.join(changed)}" for directory, changed in stale]
        raise SpecError(f"{len(stale)} finished {what} read files that have changed since (stale results):\n" +
                        "\n".join(lines) + f"\nrun again with --redo-stale to {verb} them anew (the old result.json "
                        "is kept as result.stale.json), or put the old files back")
    for directory, changed in stale:
        os.replace(directory / "result.json", directory / "result.stale.json")
        print(f"stale, {note}: {directory} ({', '.join(changed)} changed)")


# ---------------------------------------------------------------- what a stage read and wrote

# The stages (runner/stages/word_vectors.py, runner/stages/bilm_stages.py) are keyed as runs are: on the bytes of the
# files they read. Their
# records keep {path: sha256}; the checksums are computed in this process, kept by (size, mtime) while it lives.
_IN_PROCESS = Checksums(Path(os.devnull))  # never saved (a stage's corpus is hashed once per runner invocation)


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory (every file below, by relative path): Checksums.of."""
    return _IN_PROCESS.of(Path(path))


def stage_sums(paths, resolve) -> Dict[str, Optional[str]]:
    """Path as given -> its sha256 (None for one not here): what a stage reads, recorded with its output."""
    return {str(p): (sha256_of(resolve(str(p))) if resolve(str(p)).exists() else None) for p in paths}


def changed_sums(recorded: Dict[str, Optional[str]], current: Dict[str, Optional[str]]) -> list:
    """The paths whose bytes differ between a stage's record and today's files; a path read then and not now, or
    now and not then, counts (another file); one not here now (None: a source no longer needed) is not checked."""
    return [path for path in sorted(set(recorded) | set(current))
            if recorded.get(path) != current.get(path) and not (path in current and current[path] is None)]


def unfinished_or_stale(runs, run_dir, runs_dir: Path) -> list:
    """The runs with no finished result, or whose result recorded other bytes than today's files (the test of
    runner/execution/archive.py check_finished, settling nothing): what --redo-stale will train, so the stages they read
    are brought up to date before (a run found stale after them would train again on their old outputs)."""

    checksums, todo = Checksums(runs_dir / ".checksums.json"), []
    for run in runs:
        result = load_result(run_dir[run] / "result.json")[0]
        paths = input_paths(run.task, run.knob_dict, run.uses_elmo)
        if result is None or stale_inputs(result.get("inputs"), run_inputs(paths, checksums, repo_path), paths):
            todo.append(run)
    checksums.save()
    return todo
