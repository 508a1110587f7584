"""Bring the records of an earlier version to the current format, once, so that the runner reads one format only.

What it rewrites (each record only where it differs; a second run changes nothing):
- **the freshness records** (runner/execution/freshness.py: ``settings``, ``reads``, ``writes``):
  - a task run's ``"inputs": {KNOB: sha256}`` (result.json, its attempts, inputs.json) becomes
    ``"reads": {path: sha256}``, each knob's path as runner/execution/freshness.py input_paths gives it from the
    run's own knobs (inputs.json becomes reads.json);
  - a probe run's ``"inputs": {path: sha256}`` becomes ``"reads"``, as it is;
  - a biLM stage's stage_args.json ``{args, inputs, outputs}`` becomes ``{settings, reads, writes}``;
  - a vectors.json's ``inputs`` becomes ``reads`` and each file's sha256 moves to ``writes``. A vectors record that
    never kept what it read (one archived before they did) gets its training files with None, "not checked", and
    says so in ``reads_not_recorded``: nothing is made up;
- every JSON record without an absolute path of the checkout that made it
  (runner/records.py repo_relative);
- a task run archived with per-example predictions but without them as its number of record gets them
  (runner/execution/evidence.py adopt), allennlp's numbers kept as ``reported``. A predictions file that is not the
  run's own is named and left as it is (the claims then leave the run out).

Usage: ``.venv/bin/python -m tools.migrate_records [FOLDER ...]`` (default: every folder of results/, runs/ and
artifacts/); prints what it changed and exits 0, or 1 when a record could not be read.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from runner.execution.evidence import PREDICTIONS, adopt
from runner.execution.freshness import input_paths
from runner.paths import REPO
from runner.records import READS_FILE, repo_relative, write_json
from tasks.knobs import KNOBS

STAGE_KEYS = {"args": "settings", "inputs": "reads", "outputs": "writes"}


def run_reads(inputs: dict, task: str, knobs: dict) -> dict:
    """A task run's {KNOB: sha256} as {path: sha256}: the path each knob names for this run (its knobs)."""
    uses_elmo = any(k.startswith("ELMO_") or k == "ENCODER" for k in inputs)
    paths = input_paths(task, {**KNOBS, **knobs}, uses_elmo)
    return {paths[k]: digest for k, digest in inputs.items() if paths.get(k)}


def fresh_format(data, path: Path, run: dict = None):
    """``data`` (one record read from ``path``) in the one freshness format; ``run``: the task run's own record
    (its task and knobs) for an inputs.json or attempts.json beside it."""
    if isinstance(data, list):  # a run's attempts.json
        return [fresh_format(a, path, run) for a in data]
    if not isinstance(data, dict):
        return data
    if path.name == "stage_args.json" and "args" in data:
        return {STAGE_KEYS.get(k, k): v for k, v in data.items()}
    if path.name == "vectors.json" and "settings" in data and "reads" not in data:
        new = {"settings": data["settings"], "reads": data.get("inputs"), **data}
        new.pop("inputs", None)
        if new["reads"] is None:
            new["reads"] = {str(p): None for p in data["settings"]["train"]}
            new["reads_not_recorded"] = "made before the stage kept what it read: not checked"
        new["writes"] = {f["path"]: f["sha256"] for f in data["files"].values()}
        new["files"] = {dim: {k: v for k, v in f.items() if k != "sha256"} for dim, f in data["files"].items()}
        return new
    if "inputs" in data and "reads" not in data:
        inputs, new = data["inputs"], {k: v for k, v in data.items() if k != "inputs"}
        if inputs is None or "probe" in data:
            new["reads"] = inputs
        else:
            task, knobs = (run or data)["task"], (run or data)["knobs"]
            new["reads"] = run_reads(inputs, task, knobs)
        return new
    return data


def migrate(folder: Path) -> tuple:
    """(records rewritten, problems) for one folder (a profile's results, runs or artifacts)."""
    changed, problems = 0, []
    for path in sorted(folder.rglob("*.json")):
        if path.name.startswith(".") or "model" in path.relative_to(folder).parts:
            continue  # the checksum cache; allennlp's own files of a run
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{path}: expected a JSON record, found {str(e)[:120]}")
            continue
        try:
            new = _migrated(data, path)
        except (KeyError, TypeError, ValueError, OSError, EOFError) as e:
            problems.append(f"{path}: not brought up to date: {type(e).__name__} {str(e)[:200]}")
            continue
        target = path.with_name(READS_FILE) if path.name == "inputs.json" else path
        if new != data or target != path:
            write_json(target, new)
            if target != path:
                os.remove(path)
            changed += 1
    return changed, problems


def _migrated(data, path: Path):
    run = None
    if path.name in ("inputs.json", "attempts.json"):  # beside the run's result.json, or its first attempt's knobs
        result = path.with_name("result.json")
        run = json.loads(result.read_text()) if result.is_file() else None
        if path.name == "inputs.json" and run is None:
            return data  # a run not finished: its inputs.json is written again (as reads.json) when it starts
        if path.name == "inputs.json":
            return run_reads(data, run["task"], run["knobs"])
    new = repo_relative(fresh_format(data, path, run))
    if path.parent.parent.name == "runs" and isinstance(new, dict) and "probe" not in new:
        predictions = path.with_name(f"{path.stem}.{PREDICTIONS}")
        if predictions.is_file():  # adopt reads RUN_DIR/predictions.json.gz: the archive keeps it beside
            new = _adopted(new, predictions) or new
    return new


def _adopted(result: dict, predictions: Path):
    with tempfile.TemporaryDirectory() as run_dir:  # adopt() reads the run directory's own file name
        (Path(run_dir) / PREDICTIONS).write_bytes(predictions.read_bytes())
        return adopt(result, Path(run_dir))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.migrate_records", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path,
                        help="default: every folder of results/, runs/ and artifacts/")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p for top in ("results", "runs", "artifacts") if (REPO / top).is_dir()
                                     for p in (REPO / top).iterdir() if p.is_dir())
    status = 0
    for folder in folders:
        changed, problems = migrate(folder)
        print(f"{folder}: {changed} record(s) rewritten")
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
