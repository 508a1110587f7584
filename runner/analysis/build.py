"""The runner's last step: every table and figure of a profile from the runs there are (runner/analysis/tables.py), with
how they were made.

A build is atomic as a whole: every file it writes (tables, figures, claims, the page, bilm.md, vectors.md, cost.md,
replication.md) goes to a staging folder RESULTS/.building-*; only when all are there is a manifest COMPLETE.json
written into it (by rename), then the files are moved into place and the folder removed. A build that fails before
the manifest leaves the previous build's files as they were; one killed while moving leaves the manifest, and the
next invocation on that results directory (under its lock) finishes the move first (``finish_interrupted``), so the
files always come from one build. A staging folder with no manifest is a build that never finished: removed."""
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from runner.analysis.page import ReportError, write_report  # the verdicts at a glance: claims.png/.svg, index.html
from runner.analysis.replication import write_replication
from runner.analysis.tables import build_results, cost_markdown, provenance_lines, runs_made
from runner.execution.freshness import sha256_of
from runner.paths import REPO
from runner.records import git_commit, hardware, load_result, write_atomic
from runner.settings import Settings
from runner.spec import Cell, SpecError
from runner.stages.bilm_stages import bilm_markdown, bilm_report
from runner.stages.word_vectors import write_report as write_vectors_report


def build_tables(plan, settings: Settings, started: float) -> int:
    """Every table and figure of the profile from the runs there are, with how they were made; 1 if a run crashed."""

    profile, runs, run_dir, probes, results_dir = plan.profile, plan.runs, plan.run_dir, plan.probes, plan.results_dir
    results = {r: load_result(run_dir[r] / "result.json")[0] for r in runs}
    aside = [r for r in runs if results[r] is None and (run_dir[r] / "result.stale.json").is_file()]
    provenance = {
        "command": " ".join([os.environ.get("ELMO_MAIN_COMMAND", "python -m runner"),
                             *(settings.argv or sys.argv[1:])]),
        "profile": str(plan.profile_path.relative_to(REPO) if plan.profile_path.is_relative_to(REPO)
                       else plan.profile_path),
        "description": profile.description,
        "data": {r.task: {k: r.knob_dict[k] or f"bundled sample (tasks/{r.task}/sample_data)"
                          for k in ("TRAIN_PATH", "DEV_PATH", "TEST_PATH")} for r in runs} |
                {p.sweep: {flag: " ".join(v) for flag, v in p.args if flag not in ("options", "weights")}
                 for p in probes},
        "weights": sorted({f"{r.knob_dict['ELMO_OPTIONS'] or 'bundled tiny'} + "
                           f"{r.knob_dict['ELMO_WEIGHTS'] or 'bundled tiny'}"
                           for r in runs if r.uses_elmo} |
                          {f"{p.arg_dict['options'][0] or 'bundled tiny'} + "
                           f"{p.arg_dict['weights'][0] or 'bundled tiny'}"
                           for p in probes}),
        "hardware": hardware(), "executor": settings.executor, "git_commit": git_commit(),
        "runs_made": runs_made(list(results.values())),
        **({"stale_runs_set_aside": f"{len(aside)} (their inputs changed since they ran: missing here until trained "
                                    f"again; runner/execution/freshness.py settle_stale)"} if aside else {}),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "wall_time_s": round(time.time() - started, 1),
        "run_wall_time_s": round(sum(float(result.get("wall_time_s") or 0) for result in results.values() if result)
                                 + sum(float((load_result(d / "result.json")[0] or {}).get("wall_time_s") or 0)
                                       for d in plan.probe_dir.values()), 1),
    }
    paper = json.loads((REPO / "results" / "paper_numbers.json").read_text())
    result_cells = [replace(c, run_dir=run_dir[c.run]) for c in plan.cells]
    result_cells += [Cell(p.sweep, p.kind, "probe", None, 0, run_dir=plan.probe_dir[p]) for p in probes]
    lines = provenance_lines(provenance)
    try:
        with staged(results_dir, obsolete=["runs_made.tsv"] if provenance["runs_made"] == [] else []) as out:
            report = None
            if profile.bilm:
                report = bilm_report(profile.bilm, results_dir / "bilm" if profile.archive_runs else None)
                write_atomic(out / "bilm.md", bilm_markdown(report, lines))
            if profile.vectors:
                write_vectors_report(profile.vectors, profile.archive_runs, results_dir, lines, out)
            build_results(plan.sweeps, result_cells, paper, out, provenance, {"bilm": report} if report else None)
            if profile.archive_runs and runs:  # a profile made over many sessions says what its runs cost
                write_atomic(out / "cost.md", cost_markdown(list(results.values()), profile.jobs, lines,
                                                            profile.tasks))
            if profile.replicates:  # a confirmatory profile: its verdicts beside the exploratory profile's
                write_replication(out, profile.replicates, REPO, lines)
            write_report(out, plan.profile_path.stem)
    except (SpecError, ReportError, BuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"results in {results_dir} ({provenance['wall_time_s']:.0f} s)")
    crashed = [r for r in runs if not results[r] and (run_dir[r] / "failed.json").is_file()]
    return 1 if crashed else 0


STAGING = ".building-"
MANIFEST = "COMPLETE.json"


class BuildError(Exception):
    """A build that cannot be moved into place (one line; the previous build is left as it was)."""


@contextmanager
def staged(results_dir: Path, obsolete=()):
    """A staging folder for one build's files, moved into results_dir as a whole when the block ends without an
    error (the module's docstring); ``obsolete``: earlier builds' files this build does not make, removed with it."""
    finish_interrupted(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=results_dir))
    try:
        yield staging
        names = sorted(p.name for p in staging.iterdir() if p.is_file())
        for name in names:  # renames cannot fail half-way for want of space; these can: checked before any moves
            if (results_dir / name).is_dir() and not (results_dir / name).is_symlink():
                raise BuildError(f"{results_dir / name}: expected a file the build replaces, found a directory: "
                                 f"remove it and build again (the previous build's files are left as they were)")
        if not os.access(results_dir, os.W_OK):
            raise BuildError(f"{results_dir}: the results directory is not writable (the previous build's files are "
                             f"left as they were)")
        write_atomic(staging / MANIFEST, json.dumps({"files": {n: sha256_of(staging / n) for n in names},
                                                     "obsolete": list(obsolete)}, indent=1) + "\n")
        _move_in(staging, results_dir)
    finally:
        if not (staging / MANIFEST).is_file():  # a finished build's folder is gone; a half-moved one stays for the next
            shutil.rmtree(staging, ignore_errors=True)


def finish_interrupted(results_dir: Path) -> None:
    """The staging folders a killed build left: one with its manifest is moved in (the build had finished), one
    without is removed (it had not)."""
    for staging in sorted(Path(results_dir).glob(STAGING + "*")):
        if (staging / MANIFEST).is_file():
            print(f"runner: {results_dir}: moving in the build interrupted while it moved its files ({staging.name})",
                  file=sys.stderr)
            _move_in(staging, Path(results_dir))
        else:
            shutil.rmtree(staging, ignore_errors=True)


def _move_in(staging: Path, results_dir: Path) -> None:
    manifest = json.loads((staging / MANIFEST).read_text())
    for name in manifest["files"]:
        if (staging / name).is_file():  # (one moved before an interruption is in place already)
            os.replace(staging / name, results_dir / name)
    for name in manifest["obsolete"]:
        (results_dir / name).unlink(missing_ok=True)
    (staging / MANIFEST).unlink()
    shutil.rmtree(staging, ignore_errors=True)

