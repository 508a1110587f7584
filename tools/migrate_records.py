"""Bring the archived records under results/ to the current format, once, so that the runner reads one format only.

What it rewrites (each record only where it differs; a second run changes nothing):
- every JSON record of a profile's archive (``results/PROFILE/{runs,bilm,vectors}/**.json``) without an absolute
  path of the checkout that made it (runner/records.py repo_relative): the runner used to rewrite such records at
  every build (``make_portable``);
- a task run archived with per-example predictions but without them as its number of record gets them
  (runner/execution/evidence.py adopt), allennlp's numbers kept as ``reported``: the runner used to do it when it
  restored or built (``adopt_record``). A predictions file that is not the run's own is named and left as it is
  (the claims then leave the run out).

Usage: ``.venv/bin/python tools/migrate_records.py [RESULTS_DIR ...]`` (default: every folder of results/); prints
what it changed and exits 0, or 1 when a record could not be read.
"""
import argparse
import json
import sys
from pathlib import Path

from runner.execution.evidence import PREDICTIONS, adopt
from runner.paths import REPO
from runner.records import repo_relative, write_json


def migrate(results_dir: Path) -> tuple:
    """(records rewritten, problems) for one profile's results folder."""
    changed, problems = 0, []
    for path in sorted(p for sub in ("runs", "bilm", "vectors") for p in (results_dir / sub).rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{path}: expected a JSON record, found {str(e)[:120]}")
            continue
        new = repo_relative(data)
        if path.parent.parent.name == "runs" and isinstance(new, dict) and "probe" not in new:
            predictions = path.with_name(f"{path.stem}.{PREDICTIONS}")
            if predictions.is_file():  # adopt reads RUN_DIR/predictions.json.gz: the archive keeps it beside
                try:
                    new = _adopted(new, predictions) or new
                except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
                    problems.append(f"{path}: predictions not made its number of record: {str(e)[:200]}")
        if new != data:
            write_json(path, new)
            changed += 1
    return changed, problems


def _adopted(result: dict, predictions: Path):
    import tempfile  # adopt() reads the run directory's own file name

    with tempfile.TemporaryDirectory() as run_dir:
        (Path(run_dir) / PREDICTIONS).write_bytes(predictions.read_bytes())
        return adopt(result, Path(run_dir))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/migrate_records.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dirs", nargs="*", type=Path, help="default: every folder of results/")
    args = parser.parse_args(argv)
    folders = args.results_dirs or sorted(p for p in (REPO / "results").iterdir() if p.is_dir())
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
