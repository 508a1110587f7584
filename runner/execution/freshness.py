"""Is an artifact current? One record and one rule for task runs, probe runs, the biLM stages and the word vectors.

Every artifact the runner makes records what it read, ``"reads": {path as given: sha256}`` (None for a path that
cannot be checked here: an ``hf:`` name, a file not present), and a stage also what it made it with
(``"settings"``) and what it wrote (``"writes": {name: sha256}``):

- a task or probe run: in its result.json (and, while it trains, in reads.json and its attempts);
- a biLM stage: in stage_args.json beside its output (runner/stages/bilm_stages.py);
- the word vectors: in vectors.json (runner/stages/word_vectors.py).

``changed_reads`` is the one rule: a path whose bytes differ, or that is read now and was not then (or was then and
is not now), makes the artifact stale; a checksum that is None on either side is not compared; a record that names
no reads at all is not current. A run's directory name comes from its knobs, so a data or weights file changed at
the same path would otherwise leave the old result looking current (runner/execution/archive.py check_finished
decides what to do with a stale run). Hashing a 5 GB GloVe file takes a minute, so checksums are kept in a small
file keyed by (path, size, mtime_ns): a file is read again only when one of those changes.
"""
import functools
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elmo_module.errors import ElmoInputError
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
        paths["ENCODER"] = encoder  # (pkg:/hf: as given: resolve)
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


def resolve(given: str) -> Optional[Path]:
    """The file or directory a recorded path names here: relative to the repository, or an installed package's
    directory for ``pkg:`` (elmo_module/transformer.py model_source); None where there is nothing here to hash (an
    ``hf:`` name is transformers' cache, a ``${...}`` left unexpanded, a package not installed)."""
    if not given or "${" in given or given.startswith("hf:"):
        return None
    if given.startswith("pkg:"):
        from elmo_module.transformer import model_source  # (torch behind it: transformer runs only)

        try:
            return Path(model_source(given))
        except ElmoInputError:
            return None
    return repo_path(given)


def reads(paths, checksums: Optional[Checksums] = None, key=str) -> Dict[str, Optional[str]]:
    """key(path as given) -> sha256 of its bytes now (None where it cannot be checked here: ``resolve``): what an
    artifact reads, as its record keeps it. Empty paths (a knob set to nothing: no GloVe) read nothing. ``key``: how
    the record names a path (the probes: runner/paths.py canonical, the same under any DATA_DIR)."""
    checksums = checksums or _IN_PROCESS
    sums = {}
    for given in filter(None, map(str, paths)):
        path = resolve(given)
        sums[key(given)] = checksums.of(path) if path is not None and path.exists() else None
    return sums


def run_reads(run, checksums: Optional[Checksums] = None) -> Dict[str, Optional[str]]:
    """What a task run reads (its data, word vectors, biLM or transformer): ``reads`` of ``input_paths``."""
    return reads(input_paths(run.task, run.knob_dict, run.uses_elmo).values(), checksums)


MIGRATE = "python -m tools.migrate_records"  # brings records of an earlier version to this format, once
NOT_RECORDED = f"(what it read: not recorded; a record of an earlier version is brought up to date by {MIGRATE})"


def in_format(record: dict, path: Path) -> dict:
    """A stage's ``record`` (read from ``path``) if it is in the one format (it names its reads); else a one-line
    SpecError naming the migration tool: an older record is never taken for a stale one (its stage made again)."""
    if record and "reads" not in record:
        raise SpecError(f"{path}: expected a record with 'reads' (the one format of runner/execution/freshness.py), "
                        f"found one of an earlier version ({', '.join(sorted(record))}): run {MIGRATE} once")
    return record


def changed_reads(recorded: Optional[Dict[str, Optional[str]]], current: Dict[str, Optional[str]]) -> List[str]:
    """The one rule of freshness: the paths whose bytes differ between an artifact's record and today's files. A path
    read then and not now, or now and not then, counts (another file); a checksum that is None on either side (not
    checkable there: an hf: name, a file not present) is not compared. A record with no reads is not current."""
    if recorded is None:
        return [NOT_RECORDED]
    both = sorted(set(recorded) | set(current))
    return [p for p in both if recorded.get(p, "") is not None and current.get(p, "") is not None
            and recorded.get(p) != current.get(p)]


MISSING = "(missing)"  # what changed_writes finds of an output that is not there


def changed_writes(record: dict, out: Path) -> List[Tuple[str, Optional[str], str]]:
    """(name, recorded sha256, sha256 now or MISSING) of each file a stage's record says it wrote into ``out``
    that is not those bytes now: a cut or replaced output, which a stage refuses rather than reuse."""
    found = {name: sha256_of(out / name) if (out / name).is_file() else MISSING for name in record["writes"]}
    return [(name, digest, found[name]) for name, digest in record["writes"].items() if found[name] != digest]


def settle_stale(stale: list, redo: bool, what: str, verb: str, note: str = "runs again") -> None:
    """``stale``: (run directory, changed inputs) of finished ``what`` (task runs, probe runs). Without ``redo``, a
    SpecError lists them; with it, each result.json is moved to result.stale.json so that the run ``verb``s again
    (``note``: what the line printed for each says comes of it)."""
    if stale and not redo:
        lines = [f"  - {directory}: {', '.join(changed)}" for directory, changed in stale]
        raise SpecError(f"{len(stale)} finished {what} read files that have changed since (stale results):\n" +
                        "\n".join(lines) + f"\nrun again with --redo-stale to {verb} them anew (the old result.json "
                        "is kept as result.stale.json), or put the old files back")
    for directory, changed in stale:
        os.replace(directory / "result.json", directory / "result.stale.json")
        print(f"stale, {note}: {directory} ({', '.join(changed)} changed)")


# The stages' checksums are computed in this process, kept by (size, mtime) while it lives.
_IN_PROCESS = Checksums(Path(os.devnull))  # never saved (a stage's corpus is hashed once per runner invocation)


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory (every file below, by relative path): Checksums.of."""
    return _IN_PROCESS.of(Path(path))


def unfinished_or_stale(runs, run_dir, runs_dir: Path) -> list:
    """The runs with no finished result, or whose result recorded other bytes than today's files (the test of
    runner/execution/archive.py check_finished, settling nothing): what --redo-stale will train, so the stages they read
    are brought up to date before (a run found stale after them would train again on their old outputs)."""

    checksums, todo = Checksums(runs_dir / ".checksums.json"), []
    for run in runs:
        result = load_result(run_dir[run] / "result.json")[0]
        if result is None or changed_reads(result.get("reads"), run_reads(run, checksums)):
            todo.append(run)
    checksums.save()
    return todo
