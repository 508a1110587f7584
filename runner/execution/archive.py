"""Which runs are finished: a multi-session profile's archive of finished runs restored into the runs directory
and kept as runs finish (restore_archived), and every finished run checked against the files it read
(check_finished: stale, cut short, or reading other bytes at one path than its neighbours)."""
import os
import shutil
import sys
from pathlib import Path

from runner.execution.freshness import Checksums, changed_reads, run_reads, settle_stale
from runner.execution.training import PREDICTIONS
from runner.paths import repo_path
from runner.records import load_result, repo_relative, write_json
from runner.spec import Run, SpecError, patience_twin

LEFT_OUT = "left out of the tables until trained again"  # what --build-only --redo-stale does with a stale run


def restore_archived(profile, runs, run_dir, results_dir: Path):
    """Profiles with ``"archive_runs": true`` (the multi-session mini profiles) keep a copy of every finished run's
    result.json in RESULTS/runs/TASK/RUN_ID.json, written as each run finishes. A fresh clone (runs/ is not in git) then
    resumes where the last session stopped: the copies go back into the runs directory here and count as finished once
    their recorded input checksums match this machine's files (else they are stale, as any finished run:
    check_finished). Of the profile's own biLM only the stages' records are kept, in RESULTS/bilm/
    (runner/stages/bilm_stages.py archive_bilm). Returns the function that archives one finished run directory, or
    None."""
    if not profile.archive_runs:
        return None
    archive_dir = results_dir / "runs"
    # another profile's archive, for runs of the same id (the same knobs: the same training) not archived here yet
    others = [repo_path(d) / "runs" for d in profile.reuse_runs_from]
    restored, unreadable, reused = 0, [], 0
    for run in runs:
        target = run_dir[run] / "result.json"
        copies = [d / run_dir[run].parent.name / f"{run.run_id}.json" for d in [archive_dir, *others]]
        copy = next((c for c in copies if c.is_file()), None)
        archived, problem = load_result(copy) if copy is not None and not target.is_file() else (None, None)
        if problem:  # a cut or damaged copy: never restored, never retrained without a word
            unreadable.append((copy, problem))
        if archived is not None and not set_aside(archived, target.with_name("result.stale.json")):
            if copy != copies[0]:  # said in the record, which this profile's archive then keeps
                archived, reused = {**archived, "reused_from": repo_relative(str(copy))}, reused + 1
            put_back(archived, copy.with_name(f"{run.run_id}.{PREDICTIONS}"), target)
            restored += 1
    if restored:
        print(f"restored {restored} finished runs from {archive_dir}" if not reused else
              f"restored {restored} finished runs, {reused} of them from another profile's archive "
              f"({', '.join(profile.reuse_runs_from)}: the same run ids, so the same knobs; their input checksums "
              f"are checked as any run's) and {restored - reused} from {archive_dir}", flush=True)
    for copy, problem in unreadable:
        print(f"warning: archived result not restored: {problem}; its run counts as not finished and trains again "
              f"unless the copy is put back (git checkout -- {copy})", file=sys.stderr, flush=True)
    restore_patience_twins(runs, run_dir, archive_dir)

    def archive(directory: Path) -> None:
        result, _ = load_result(directory / "result.json")
        if result is not None:
            (archive_dir / directory.parent.name).mkdir(parents=True, exist_ok=True)
            if (directory / PREDICTIONS).is_file():  # per-example predictions travel with the result
                target = archive_dir / directory.parent.name / f"{directory.name}.{PREDICTIONS}"
                shutil.copyfile(directory / PREDICTIONS, target.with_name(target.name + ".partial"))
                os.replace(target.with_name(target.name + ".partial"), target)
            write_json(archive_dir / directory.parent.name / f"{directory.name}.json", repo_relative(result))

    for run in runs:  # finished before this profile archived, or by --baselines-only
        if not (archive_dir / run_dir[run].parent.name / f"{run.run_id}.json").is_file():
            archive(run_dir[run])
    return archive


def restore_patience_twins(runs, run_dir, archive_dir: Path) -> None:
    """A run not archived under its own id whose training is archived under another epoch cap (runner/spec.py
    patience_twin: patience stopped it before either cap) gets that result, its knobs saying the new cap and its
    ``same_training_as`` the archived run; the archive then keeps it under its own id too (the caller's loop)."""
    by_task, answered = {}, []
    for run in (r for r in runs if isinstance(r, Run)):  # task runs, not probes
        task_dir = archive_dir / run_dir[run].parent.name
        target = run_dir[run] / "result.json"
        if target.is_file() or (task_dir / f"{run.run_id}.json").is_file():
            continue
        if task_dir not in by_task:
            by_task[task_dir] = [dict(r, run_id=r.get("run_id") or p.stem)
                                 for p, r in ((p, load_result(p)[0]) for p in sorted(task_dir.glob("*.json"))) if r]
        twin = patience_twin(run, by_task[task_dir])
        if twin is None:
            continue
        result = dict(twin, run_id=run.run_id, knobs={**twin["knobs"], "NUM_EPOCHS": run.knob_dict["NUM_EPOCHS"]},
                      same_training_as={"run_id": twin["run_id"], "NUM_EPOCHS": twin["knobs"]["NUM_EPOCHS"],
                                        "epochs": len(twin["epochs"]),
                                        "why": "patience stopped it before either cap (runner/spec.py patience_twin)"})
        if set_aside(result, target.with_name("result.stale.json")):
            continue
        put_back(result, task_dir / f"{twin['run_id']}.{PREDICTIONS}", target)
        answered.append(f"{run.run_id} <- {twin['run_id']}")
    if answered:
        print(f"{len(answered)} run(s) answered by their training under another epoch cap, which patience ended "
              f"before either cap: {', '.join(answered)}", flush=True)


def put_back(result: dict, predictions: Path, target: Path) -> None:
    """An archived result into the runs directory as ``target`` (result.json), its predictions (if archived) first:
    a run with a result.json is finished, so it must be complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if predictions.is_file():
        shutil.copyfile(predictions, target.with_name(PREDICTIONS))
    write_json(target, result)


def set_aside(archived: dict, stale: Path) -> bool:
    """Whether the archived result is the one --redo-stale moved aside to ``stale`` (the same training: its `made`
    record), which restoring would undo: the run counted as finished again, with the bytes it was stale for."""
    made = (load_result(stale)[0] or {}).get("made") if stale.is_file() else None
    return made is not None and made == archived.get("made")


def check_finished(runs, run_dir, runs_dir: Path, redo_stale: bool, build_only: bool = False, mixed: bool = True):
    """(what each run reads now, the runs that are finished and current). A result.json that is empty or cut short
    is not finished (warning naming it; redone). A finished run whose record of what it read (``reads``) differs from
    today's files is *stale* (runner/execution/freshness.py changed_reads): the runner stops and lists them (a
    silently redone run could throw away days of GPU time over an innocent change, a silently kept one mixes old
    results into new tables); ``--redo-stale`` moves their result.json aside to result.stale.json and trains them
    again. ``mixed``: refuse runs that read different bytes at one path (_check_same_bytes)."""

    checksums = Checksums(runs_dir / ".checksums.json")
    reads, finished, stale, read = {}, set(), [], {}
    for run in runs:
        reads[run] = run_reads(run, checksums)
        result, problem = load_result(run_dir[run] / "result.json")
        if not build_only and (run_dir[run] / "result.json").is_dir():  # a training could not write its result
            raise SpecError(f"{problem}: remove it, and the run is trained again")
        if problem:
            print(f"warning: {problem}: counted as " + ("missing (run the runner without --build-only to redo it)"
                                                       if build_only else "unfinished, it runs again"), file=sys.stderr)
        if result is None:
            continue
        changed = changed_reads(result.get("reads"), reads[run])
        if changed:
            stale.append((run, changed))
        else:
            finished.add(run)
            read[run_dir[run]] = {p: v for p, v in result["reads"].items() if v}
    checksums.save()
    settle_stale([(run_dir[run], changed) for run, changed in stale], redo_stale, "runs", "train",
                 LEFT_OUT if build_only else "runs again")
    if mixed:
        _check_same_bytes(read)
    return reads, finished


def _check_same_bytes(read: dict) -> None:
    """Finished runs that read one path must have read the same bytes: a profile's tables mix nothing else. The
    stale check above compares each run with the files here; this one compares the runs with each other, which is
    what is left to check where the files are not (a fresh clone's --build-only: the profile's own vectors and biLM
    stay out of git) and what a move to another machine breaks (its CPU trains other bytes from the same recipe).
    ``read``: run directory -> {path: the sha256 its result.json recorded}."""
    seen = {}  # path -> checksum -> the runs that read it
    for directory, sums in read.items():
        for path, digest in sums.items():
            seen.setdefault(path, {}).setdefault(digest, []).append(directory)
    mixed = {path: by_sum for path, by_sum in seen.items() if len(by_sum) > 1}
    if mixed:
        lines = [f"  - {path}: " + "; ".join(f"{len(dirs)} run(s) read sha256 {digest[:12]} (e.g. {dirs[0]})"
                                              for digest, dirs in sorted(by_sum.items(), key=lambda kv: -len(kv[1])))
                 for path, by_sum in sorted(mixed.items())]
        raise SpecError("finished runs read different files at the same path, so their results cannot share a "
                        "table:\n" + "\n".join(lines) + "\nput the files the runs should share here and run again "
                        "with --redo-stale (the others are trained anew)")
