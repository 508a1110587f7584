"""The runner's last step: every table and figure of a profile from the runs there are (runner/analysis/tables.py), with
how they were made."""
import json
import os
import sys
import time
from dataclasses import replace

from runner.analysis.replication import write_replication
from runner.analysis.tables import build_results, cost_markdown, provenance_lines, runs_made
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
        "description": profile.get("description", ""),
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
    report = None
    if profile.get("bilm"):
        report = bilm_report(profile, results_dir / "bilm" if profile.get("archive_runs") else None)
        results_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(results_dir / "bilm.md", bilm_markdown(report, provenance_lines(provenance)))
    if profile.get("vectors"):
        write_vectors_report(profile, results_dir, provenance_lines(provenance))
    build_results(plan.sweeps, result_cells, paper, results_dir, provenance, {"bilm": report} if report else None)
    if profile.get("archive_runs") and runs:  # a profile made over many sessions says what its runs cost
        write_atomic(results_dir / "cost.md", cost_markdown(list(results.values()), int(profile.get("jobs", 1)),
                                                            provenance_lines(provenance), profile.get("tasks")))
    if profile.get("replicates"):  # a confirmatory profile: its verdicts beside the exploratory profile's
        try:
            write_replication(results_dir, profile["replicates"], REPO, provenance_lines(provenance))
        except SpecError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    from runner.analysis.page import (  # the verdicts at a glance: claims.png/.svg and index.html
        ReportError,
        write_report,
    )

    try:
        write_report(results_dir, plan.profile_path.stem)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"results in {results_dir} ({provenance['wall_time_s']:.0f} s)")
    crashed = [r for r in runs if not results[r] and (run_dir[r] / "failed.json").is_file()]
    return 1 if crashed else 0
