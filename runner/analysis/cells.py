"""A table's cells from their runs: one run read (its number of record, checked against its predictions), a cell's
seeds aggregated (mean ± sample std), the paired difference to the reference column, the text of a cell with its
numbered notes, and the seeds a profile added after the first results, labelled beside the declared seeds' cell
(never pooled unlabelled). runner/analysis/tables.py lays the cells out in tables and figures.
"""
import statistics
from pathlib import Path
from typing import Optional

from runner.analysis.claims import still_improving
from runner.execution.evidence import check_run, record_mismatch
from runner.metrics import SECOND_LABEL, SECOND_METRIC, mean_std_text
from runner.paths import REPO
from runner.records import load_result
from runner.spec import Cell, epoch_cap, ran_to_cap


def portable(path, keep: int = 2) -> str:
    """A path as committed results name it: relative to the repository, or (runs elsewhere, e.g. --runs-dir /tmp/x)
    its last ``keep`` parts (task/run id) under "<runs dir>", never an absolute path of the machine that made it."""
    path = Path(path)
    if path.is_absolute() and path.resolve().is_relative_to(REPO):
        return str(path.resolve().relative_to(REPO))
    return str(Path("<runs dir>", *path.parts[-keep:])) if path.is_absolute() else str(path)


def read_run(run_dir: Path, split: str, cell: Optional[Cell] = None) -> dict:
    """One run's state: ok (value in %, from `split`; test=null falls back to dev), crashed (log) or missing. With
    the ``cell`` it is read for, a record that is another run's (evidence.record_mismatch) or whose number is not its
    predictions' (evidence.check_run) is missing, with the problem: one number per run in every table and claim (the
    claims name each such run in one line)."""
    result_path, failed_path = Path(run_dir) / "result.json", Path(run_dir) / "failed.json"
    result, problem = load_result(result_path)
    if problem:  # empty or cut short (a full disk): unfinished, the runner redoes it and names it in a warning
        return {"status": "missing", "problem": problem}
    if result is not None and cell is not None:
        why = (record_mismatch(result, run_dir, cell.task, cell.seed, cell.run.knob_dict if cell.run else None)
               or check_run(result, run_dir)[0])
        if why:
            return {"status": "missing", "problem": why}
    if result is not None:  # a result wins over a failed.json left beside it by an earlier attempt
        value, dev_fallback = result.get(split), False
        if value is None and split == "test":
            value, dev_fallback = result.get("dev"), True
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{result_path}: key '{split}' (or 'dev'): expected a number, found {value!r}")
        # Metrics that are fractions are reported in % like the paper's tables.
        percent = 100.0 * value if value <= 1.0 else float(value)
        state = {"status": "ok", "value": percent, "dev_fallback": dev_fallback, "result": result,
                 "still_improving": still_improving(result)}
        # a run that ran to its cap (patience never stopped it) is named in its table (at_cap_text)
        state["epoch_cap"] = cap = epoch_cap(result.get("knobs"))
        best = (result.get("metrics") or {}).get("best_epoch")
        if ran_to_cap(result):
            state["at_cap"] = {"cap": cap, "best_epoch": best + 1 if isinstance(best, int) else None}
        dev = result.get("dev")
        if isinstance(dev, (int, float)) and not isinstance(dev, bool):  # the same run on dev, beside a test table
            state["dev"] = 100.0 * dev if dev <= 1.0 else float(dev)
        second = SECOND_METRIC.get(result.get("task"))
        metrics = result.get("metrics") or {}
        second_value = metrics.get(f"{'best_validation' if split == 'dev' or dev_fallback else 'test'}_{second}")
        if second and isinstance(second_value, (int, float)):
            state["second"] = 100.0 * second_value if second_value <= 1.0 else float(second_value)
        return state
    if failed_path.exists():
        failure, _ = load_result(failed_path)
        return {"status": "crashed", "log": str((failure or {}).get("log") or failed_path)}
    return {"status": "missing"}


def aggregate(cells: list, split: str) -> dict:
    """Mean ± sample std over the finished seeds of one (task, column, x) cell."""
    runs = [dict(read_run(c.run_dir, split, c), seed=c.seed, run_dir=portable(c.run_dir)) for c in cells]
    values = [r["value"] for r in runs if r["status"] == "ok"]
    for run in runs:
        if "log" in run:
            run["log"] = portable(run["log"], keep=3)  # task/run id/log.txt
    crashed = [r["log"] for r in runs if r["status"] == "crashed"]
    status = ("ok" if runs and len(values) == len(runs) else "partial" if values
              else "crashed" if crashed else "missing")
    seconds = [r["second"] for r in runs if "second" in r]
    return {"status": status, "seeds_planned": len(runs), "seeds_finished": len(values), "values": values,
            "mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) >= 2 else None,
            "second": {"metric": SECOND_METRIC.get(cells[0].task) if cells else None, "values": seconds,
                       "mean": statistics.fmean(seconds), "std": statistics.stdev(seconds) if len(seconds) >= 2
                       else None} if seconds else None,
            "by_seed": {r["seed"]: r["value"] for r in runs if r["status"] == "ok"},
            "dev_by_seed": {r["seed"]: r["dev"] for r in runs if "dev" in r},
            "dev_fallback": any(r.get("dev_fallback") for r in runs), "crashed_logs": crashed,
            "still_improving": [r["seed"] for r in runs if r.get("still_improving")],
            "runs": [{k: v for k, v in r.items() if k != "result"} for r in runs]}


def paired_difference(column: dict, baseline: dict) -> Optional[dict]:
    """(column − baseline) seed by seed, over the seeds where both finished: a difference with its own error bar
    (the same SEED seeds both runs' random streams and, on a training subset, picks the same subset)."""
    seeds = sorted(set(column["by_seed"]) & set(baseline["by_seed"]))
    diffs = [column["by_seed"][s] - baseline["by_seed"][s] for s in seeds]
    if not diffs:
        return None
    return {"seeds": seeds, "values": diffs, "mean": statistics.fmean(diffs),
            "std": statistics.stdev(diffs) if len(diffs) >= 2 else None}


def difference_text(diff: Optional[dict], decimals: int) -> str:
    if diff is None:
        return "—"
    text = f"{diff['mean']:+.{decimals}f}" + (f" ± {diff['std']:.{decimals}f}" if diff["std"] is not None else "")
    return text + f" (n={len(diff['values'])})"


def _note(notes: list, text: str) -> str:
    if text not in notes:
        notes.append(text)
    return f"[{notes.index(text) + 1}]"


def cell_text(agg: dict, decimals: int, notes: list, where: str) -> str:
    if not agg["values"]:
        return f"crashed (see {', '.join(agg['crashed_logs'])})" if agg["crashed_logs"] else "missing"
    text = mean_std_text(agg["mean"], agg["std"], decimals)
    if agg.get("second"):
        label = SECOND_LABEL.get(agg["second"]["metric"], agg["second"]["metric"].upper())
        text += f" ({label} {mean_std_text(agg['second']['mean'], agg['second']['std'], decimals)})"
    if agg["seeds_finished"] < agg["seeds_planned"]:
        text += f" (n={agg['seeds_finished']})"
    if agg["dev_fallback"]:
        text += " " + _note(notes, f"{where}: result.json has test = null; the dev value is reported")
    if agg["crashed_logs"]:
        text += " " + _note(notes, f"{where}: crashed seeds, see {', '.join(agg['crashed_logs'])}")
    if agg["still_improving"]:  # its claims are not decided (runner/analysis/stats.py verdict)
        text += " † " + _note(notes, f"{where}: still improving at the epoch cap (dev score rising) for seed(s) "
                                     f"{', '.join(map(str, agg['still_improving']))}")
    return text


def seeds_text(seeds) -> str:
    """1, 2, 3 -> "1–3"; 1, 3 -> "1, 3"."""
    seeds = sorted(seeds)
    contiguous = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}–{seeds[-1]}" if contiguous or (len(seeds) == 2 and seeds[1] == seeds[0] + 1) \
        else ", ".join(map(str, seeds))


def split_later(sweep: dict, task: str, cells: list) -> tuple:
    """(the cells of the seeds declared before the sweep's first results, the profile's ``seeds_added_later`` entry
    for ``task`` or None). The tables show the declared seeds' cell, as the claims judge them
    (runner/analysis/claims.py evaluate), and the seeds added later beside it, labelled: never pooled unlabelled."""
    entry = (sweep.get("seeds_added_later") or {}).get(task)
    later = set((entry or {}).get("seeds") or [])
    if not later or not any(c.seed in later for c in cells):
        return cells, None
    return [c for c in cells if c.seed not in later], entry


def later_seeds(entry: dict, declared: dict, pooled: dict) -> dict:
    """summary.json's record of a cell's seeds added later, apart from its declared cell: their values and the cell
    over all seeds."""
    later = sorted(s for s in pooled["by_seed"] if s not in declared["by_seed"])
    return {"seeds": later, "commit": entry.get("commit"), "why": entry.get("why"),
            "by_seed": {s: pooled["by_seed"][s] for s in later},
            "runs": [r for r in pooled["runs"] if r.get("seed") in later],
            "all_seeds": {"n": len(pooled["values"]), "seeds": sorted(pooled["by_seed"]), "values": pooled["values"],
                          "mean": pooled["mean"], "std": pooled["std"]}}


def later_mark(entry: dict, declared: list, later: list, notes: list, where: str) -> str:
    """"‡ [n]", with note n: which seeds were added after the first results, when and why (one note per task:
    ``where``)."""
    when = f" ({entry['commit']}" + (f": {entry['why']}" if entry.get("why") else "") + ")" if entry.get("commit") \
        else ""
    return "‡ " + _note(notes, f"{where}: seeds {seeds_text(later)} added after the first results were read{when}; "
                              f"each cell is seeds {seeds_text(declared)}, declared before the runs, as claims.md "
                              "judges them; the cell over all seeds beside it is shown, not judged")


def with_later(text: str, declared: list, later: list, pooled_text: str, mark: str) -> str:
    """"61.3 ± 0.3 (seeds 1–3; with seeds 4–5 added later: 61.1 ± 0.4 ‡ [1])"."""
    return f"{text} (seeds {seeds_text(declared)}; with seeds {seeds_text(later)} added later: {pooled_text} {mark})"
