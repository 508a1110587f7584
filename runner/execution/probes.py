"""The probe sweeps' runs (Tables 4-6, kinds in runner.spec.PROBE_KINDS): one ``python -m probes <kind>`` per sweep.

A probe sweep names the probe command's arguments under ``args`` (flag names without ``--``; paths relative to the
repository) and may set ``knobs`` ELMO_OPTIONS / ELMO_WEIGHTS (default: the profile's knobs, else the bundled tiny
biLM). Like a task run, a probe run has its directory ``runs/<profile>/probes/<run_id>/`` with ``log.txt``, the probe's
``probe.json`` and, once finished, ``result.json`` (written last, atomically); a crash leaves ``failed.json``.
"""
import hashlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from runner.execution.freshness import changed_reads, reads, settle_stale
from runner.execution.training import last_error_line
from runner.paths import REPO, canonical, data_hint, expand, repo_path
from runner.records import write_json
from runner.settings import Settings
from runner.spec import PROBE_KINDS

PATH_ARGS = ("train", "dev", "test", "eval", "wordnet", "semcor", "glove")


@dataclass(frozen=True)
class ProbeRun:
    sweep: str
    kind: str
    args: Tuple[Tuple[str, Tuple[str, ...]], ...]  # (flag, values), sorted; biLM files included

    @property
    def arg_dict(self) -> Dict[str, Tuple[str, ...]]:
        return dict(self.args)

    @property
    def run_id(self) -> str:
        args = [(flag, tuple(canonical(v) for v in values)) for flag, values in self.args]  # as Run.run_id
        return f"{self.sweep}-{hashlib.sha1(json.dumps([self.kind, args]).encode()).hexdigest()[:10]}"

    def command(self, out: Path, threads: int, cache_dir: Optional[str]) -> List[str]:
        command = [sys.executable, "-m", "probes", self.kind, "--out", str(out), "--threads", str(threads)]
        for flag, values in self.args:
            if values:
                command += [f"--{flag}", *values] if flag != "source" else \
                    [item for v in values for item in ("--source", v)]
        return command + (["--cache-dir", cache_dir] if cache_dir else [])


def plan_probes(profile_knobs: Dict[str, str], sweeps: List[dict]) -> List[ProbeRun]:
    runs = []
    for sweep in sweeps:
        if sweep["kind"] not in PROBE_KINDS:
            continue
        knobs = {**profile_knobs, **sweep.get("knobs", {})}
        args = {"options": knobs.get("ELMO_OPTIONS", ""), "weights": knobs.get("ELMO_WEIGHTS", ""),
                **sweep["args"]}
        values = {flag: tuple(expand(str(v)) for v in (value if isinstance(value, list) else [value]))
                  for flag, value in args.items()}
        runs.append(ProbeRun(sweep["name"], sweep["kind"], tuple(sorted(values.items()))))
    return runs


def missing_probe_inputs(runs: List[ProbeRun], hints: Dict[str, str] = None) -> List[str]:
    """Files the probe runs name that do not exist, with the profile's hint (its 'requires', keyed by knob)."""
    hints, knob = hints or {}, {"options": "ELMO_OPTIONS", "weights": "ELMO_WEIGHTS"}
    missing = []
    for run in runs:
        for flag, values in run.args:
            if flag not in PATH_ARGS + ("options", "weights"):
                continue
            for value in values:
                if value and ("${" in value or not repo_path(value).exists()):
                    hint = hints.get(knob.get(flag, flag), data_hint(value))
                    missing.append(f"{run.sweep} --{flag} {value}: does not exist{'; ' + hint if hint else ''}")
    return missing


def probe_files(run: ProbeRun) -> List[str]:
    """The files (and folders: WordNet) a probe run reads, as named in its args."""
    return [value for flag, values in run.args if flag in PATH_ARGS + ("options", "weights")
            for value in values if value and "${" not in value]


def probe_reads(run: ProbeRun, checksums) -> Dict[str, Optional[str]]:
    """What the probe reads now, recorded as task runs record theirs (runner/execution/freshness.py reads), each
    path named as under the default data root (the same record whatever DATA_DIR is)."""
    return reads(probe_files(run), checksums, key=canonical)


def check_finished_probes(runs: List[ProbeRun], run_dir: Dict[ProbeRun, Path], checksums, redo: bool,
                          note: str = "runs again") -> None:
    """A finished probe run whose biLM or data changed since is stale, as a task run is (runner/execution/archive.py
    check_finished): listed with a SpecError, or with ``redo`` its result.json moved to result.stale.json and run
    again (``note``: what comes of it, as ``settle_stale`` prints). Without this a profile's remade biLM (another
    machine's bytes, other stage args) kept the old probe tables as if they were its own (the one rule of
    runner/execution/freshness.py changed_reads)."""

    stale = []
    for run in runs:
        path = run_dir[run] / "result.json"
        if not path.is_file():
            continue
        changed = changed_reads(json.loads(path.read_text()).get("reads"), probe_reads(run, checksums))
        if changed:
            stale.append((run, changed))
    checksums.save()
    settle_stale([(run_dir[run], changed) for run, changed in stale], redo, "probe runs", "run", note)


def execute_probe(run: ProbeRun, run_dir: Path, threads: int, cache_dir: Optional[str], checksums=None) -> dict:
    """Runs one probe (skips it if finished); returns its status like ``execute_run``."""
    result_path = run_dir / "result.json"
    if result_path.is_file():
        return {"status": "done", "skipped": True, **json.loads(result_path.read_text())}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "failed.json").unlink(missing_ok=True)
    probe_out = run_dir / "probe.json"  # the probe's own output; result.json (with the run's facts) is written last
    probe_out.unlink(missing_ok=True)
    command = run.command(probe_out, threads, cache_dir)
    log = run_dir / "log.txt"
    start = time.time()
    with open(log, "w") as out:
        out.write(f"# {' '.join(command)}\n")
        out.flush()
        returncode = subprocess.call(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    wall = round(time.time() - start, 1)
    if returncode != 0 or not probe_out.is_file():
        failure = {"sweep": run.sweep, "kind": run.kind, "returncode": returncode, "log": str(log),
                   "error": last_error_line(log), "wall_time_s": wall}
        write_json(run_dir / "failed.json", failure)
        return {"status": "crashed", **failure}
    result = json.loads(probe_out.read_text())
    result.update({"run_id": run_dir.name, "sweep": run.sweep, "wall_time_s": wall, "log": str(log),
                   "command": command})
    if checksums is not None:  # what it read, for check_finished_probes
        result["reads"] = probe_reads(run, checksums)
    write_json(result_path, result)
    return {"status": "done", "skipped": False, **result}


def run_probes(probes, probe_dir, settings: Settings, checksums) -> None:
    """The probe sweeps (Tables 4-6), one after the other, 1 CPU thread unless --threads; each is skipped once
    finished and current (a stale one stops the runner, or runs again with --redo-stale)."""
    check_finished_probes(probes, probe_dir, checksums, settings.redo_stale)
    threads = settings.threads or 1
    cache = str(settings.cache_dir) if settings.cache else None
    for i, probe in enumerate(probes, 1):
        status = execute_probe(probe, probe_dir[probe], threads, cache, checksums)
        what = (f"done ({status['wall_time_s']}s{', already finished' if status.get('skipped') else ''})"
                if status["status"] == "done" else f"CRASHED: {status.get('error', '')} -- log: {status.get('log')}")
        print(f"[probe {i}/{len(probes)}] {probe.sweep} ({probe.kind}): {what}", flush=True)
