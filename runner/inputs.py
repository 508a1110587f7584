"""What a run read: the checksums of its data, biLM and GloVe files, part of the identity of a finished run.

A run's directory name comes from its knobs, so a data or weights file changed at the same path would otherwise
leave the old result looking current. The runner records these checksums with the result (``inputs`` in
result.json) and compares them on every later invocation (runner/__main__.py decides what to do with a stale run).
Hashing a 5 GB GloVe file takes a minute, so checksums are kept in a small file keyed by (path, size, mtime_ns):
a file is read again only when one of those changes.
"""
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Dict, Optional

# The knobs that name files a run reads; the ELMo ones only for runs with ELMo (a baseline never opens them).
INPUT_KNOBS = ("TRAIN_PATH", "DEV_PATH", "TEST_PATH", "GLOVE_PATH", "ELMO_OPTIONS", "ELMO_WEIGHTS")

FRESH_S = 2


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


def run_inputs(knobs: Dict[str, str], uses_elmo: bool, checksums: Checksums, resolve) -> Dict[str, Optional[str]]:
    """Knob -> sha256 of the file it names; None for an empty knob (the task's bundled sample or the bundled biLM,
    which change only with the code: see git_commit in the provenance) or a path that is not here (--build-only on
    another machine: not checked). ``resolve`` turns a knob value into a path (relative to the repository)."""
    inputs = {}
    for name in INPUT_KNOBS:
        if name.startswith("ELMO_") and not uses_elmo:
            continue
        value = knobs.get(name, "")
        path = resolve(value) if value and "${" not in value else None
        inputs[name] = checksums.of(path) if path is not None and path.exists() else None
    return inputs


def stale_inputs(recorded: Optional[dict], current: Dict[str, Optional[str]], knobs: Dict[str, str]) -> list:
    """The inputs that changed since a run finished: 'KNOB (path)' for each checksum that differs. Inputs not
    checkable now (None on either side) are not reported."""
    return [f"{name} ({knobs.get(name, '')})" for name, digest in current.items()
            if digest and (recorded or {}).get(name) and recorded[name] != digest]
