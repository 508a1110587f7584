"""Results builder: run directories -> markdown tables, PNG figures and summary.json.

Knows nothing about task internals: it reads each run's result.json / failed.json (runner contract) and the paper's
numbers from results/paper_numbers.json. A partial sweep still builds: unfinished cells read "missing", crashed ones
"crashed (see <log>)". Every file is written via write-then-rename, so no half-written file ever looks complete.
A cell's runs read and its text: runner/analysis/cells.py; the claims: runner/analysis/claims_files.py.
"""
import io
import itertools
import json
import math
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from probes.report import markdown_body
from runner.analysis.cells import (
    aggregate,
    cell_text,
    difference_text,
    later_mark,
    later_seeds,
    paired_difference,
    seeds_text,
    split_later,
    with_later,
)
from runner.analysis.claims import encoder_columns, probe_line
from runner.analysis.claims_files import build_claims
from runner.analysis.provenance import TSV, provenance_lines, runs_made, runs_made_text, runs_made_tsv  # noqa: E402,F401
from runner.metrics import DECIMALS, mean_std_text
from runner.records import load_result, repo_relative, write_atomic  # noqa: E402
from runner.spec import PROBE_KINDS, Cell, x_axis  # noqa: E402,F401  (Cell: the cells the runner hands over; re-exported)


def at_cap_text(summary: list) -> str:
    """The runs that ran to their epoch cap (NUM_EPOCHS) without patience stopping them, cell by cell, with the epoch
    each kept; † where the dev score was still rising at the cap (runner/analysis/claims.py still_improving)."""
    if not any(r.get("epoch_cap") for entry in summary for r in entry["runs"]):
        return ""  # no finished run recorded its cap
    lines = []
    for entry in summary:
        runs = [r for r in entry["runs"] if r.get("at_cap")]
        if runs:
            where = "/".join(str(k) for k in (entry["task"], entry["column"], entry["x"]) if k is not None)
            lines.append(f"- {where}: " + "; ".join(
                f"seed {r['seed']}{' †' if r['still_improving'] else ''} (best epoch "
                f"{r['at_cap']['best_epoch'] or '?'} of {r['at_cap']['cap']})" for r in runs))
    return ("\n\n## Runs that ran to their epoch cap\n\n" + ("Patience did not stop these runs: each ran every epoch "
                                                             "its "
            "cap (NUM_EPOCHS) allows and kept its best dev epoch. † marks a dev score still rising at the cap (its "
            "claims "
            "are not decided, runner/analysis/claims.py still_improving); the others had levelled off.\n\n"
            + "\n".join(lines)
            if lines else "None: patience stopped every finished run before its cap."))


def _paper_number(value) -> Optional[float]:
    """Paper cells are numbers or strings like "91.93 ± 0.19"."""
    if isinstance(value, (int, float)):
        return float(value)
    return float(value.split("±")[0]) if isinstance(value, str) else None


def _paper_text(paper_table: dict, label: str, task: str, decimals: int) -> str:
    value = paper_table.get(label, {}).get(task)
    if value is None or isinstance(value, str):
        return value or "—"
    std = paper_table.get(f"{label}_std", {}).get(task)
    if std is None:
        return f"{value:.{decimals}f}"
    std_decimals = max(decimals, len(repr(float(std)).split(".")[1]))  # as printed in Table 1: ±0.17, ±0.10, ±0.5
    return f"{value:.{decimals}f} ± {std:.{std_decimals}f}"


def increase_text(baseline: Optional[float], elmo: Optional[float], decimals: int) -> str:
    """Table 1's INCREASE column: absolute / relative error reduction = (ELMo − baseline) / (100 − baseline)."""
    if baseline is None or elmo is None or baseline >= 100:
        return "—"
    return f"{elmo - baseline:.{decimals}f} / {100 * (elmo - baseline) / (100 - baseline):.1f}%"


def _training_data(knobs: dict) -> tuple:
    """(share of the task's training file, its text): "all", or e.g. "3.6 %, epochs of 80 batches"."""
    fraction = float(knobs.get("TRAIN_FRACTION") or 1)
    batches = knobs.get("BATCHES_PER_EPOCH")
    return fraction, ("all" if fraction == 1.0 else f"{100 * fraction:.2g} %" +
                      (f", epochs of {batches} batches" if batches else ""))


def cost_markdown(results: list, parallel: int, header: list, tasks: Optional[list] = None) -> str:
    """cost.md of a multi-session profile: what its finished runs cost, by task, model (baseline, ELMo, another
    encoder) and share of the training set (each run's wall time counts its attempts across sessions up to the
    checkpoint the next one went on from: runner/execution/training.py), and the wall time that makes at
    ``parallel`` runs at a time. The stages before the runs are timed in vectors.md and bilm.md."""
    unfinished = sum(1 for r in results if not r)
    results = [r for r in results if r and r.get("wall_time_s")]
    order = {t: i for i, t in enumerate(tasks or [])}
    groups = {}
    for r in results:
        knobs = r.get("knobs") or {}
        encoder = knobs.get("ENCODER", "elmo")  # a transformer under ELMo's protocol is its own model here
        model = (0, "baseline") if knobs.get("ELMO", "none") == "none" else (1, "ELMo") if encoder == "elmo" else \
            (2, f"encoder {encoder}")
        key = (r.get("task"), model, *_training_data(knobs))
        groups.setdefault(key, []).append(r)
    rows = []
    for (task, (_, model), _fraction, data), runs in sorted(
            groups.items(), key=lambda g: (order.get(g[0][0], len(order)), g[0][0], g[0][1], -g[0][2], g[0][3])):
        minutes = [r["wall_time_s"] / 60 for r in runs]
        epochs = [len(r.get("epochs") or []) for r in runs]
        per_epoch = [m / e for m, e in zip(minutes, epochs) if e]
        rows.append(f"| {task} | {model} | {data} | {len(runs)} | {statistics.median(epochs):g} ({min(epochs)}–"
                    f"{max(epochs)}) | {statistics.median(per_epoch) if per_epoch else float('nan'):.2f} | "
                    f"{statistics.median(minutes):.0f} ({min(minutes):.0f}–{max(minutes):.0f}) | "
                    f"{sum(minutes) / 60:.1f} |")
    hours = sum(r["wall_time_s"] for r in results) / 3600
    machines = sorted({(r.get("made") or {}).get("hardware") or "a machine not recorded" for r in results})
    lines = ["# What the runs cost", ""] + header + [""]
    lines += ["| task | model | training data (of the task's file) | runs | epochs run, median (range) | minutes per "
              "epoch, median | "
              "minutes per run, median (range) | hours in all |", "|" + "---|" * 8] + rows
    lines += ["", f"{len(results)} finished runs, **{hours:.1f} h** of training in all; at {parallel} at a time "
              f"about **{hours / max(parallel, 1):.1f} h** of wall time"
              f"{f'; {unfinished} planned runs not finished yet' if unfinished else ''}. Made on: "
              f"{'; '.join(machines)}.", "",
              "A run's minutes count its attempts across sessions up to the checkpoint each next attempt went on from "
              "(runner/execution/training.py), with its dev pass per epoch and its test pass; a run that another "
              "machine made "
              "took the time it took there. The stages before the runs (word vectors, the biLM's pretraining and "
              "fine-tunings) are timed in vectors.md and bilm.md."]
    return "\n".join(lines) + "\n"


def _markdown(title: str, provenance: dict, header: list, rows: list, notes: list, extra: str = "") -> str:
    lines = [f"# {title}", ""] + provenance_lines(provenance) + [""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    lines += [""] + [f"- [{i}] {n}" for i, n in enumerate(notes, 1)] + ([""] if notes else []) + [extra]
    return "\n".join(lines).rstrip() + "\n"


def _groups(sweep: dict, cells: list) -> dict:
    """(task, column, x) -> that cell's planned runs, in the sweep's task/column/x order."""
    def xs(task):
        return x_axis(sweep, task)["values"] if sweep["kind"] == "curve" else [None]
    groups = {(t, c["label"], x): [] for t in sweep["tasks"] for c in sweep["columns"] for x in xs(t)}
    for cell in cells:
        groups.setdefault((cell.task, cell.column, cell.x), []).append(cell)
    return groups


def build_table(sweep: dict, cells: list, paper: dict, out_dir: Path, provenance: dict) -> list:
    """Tables 1-3: ours (mean ± std) beside the paper's value per column; Table 1 adds the increase columns."""
    split, labels, notes = sweep["split"], [c["label"] for c in sweep["columns"]], []
    paper_table = paper.get(sweep["name"], {})
    paper_only = [k for k, v in paper_table.items() if isinstance(v, dict) and k not in labels and "_std" not in k]
    with_increase = "baseline" in labels and "ELMo" in labels  # Table 1
    ours_only = set(encoder_columns(sweep))  # another encoder than ELMo: no number of the paper's to stand beside
    header = ["task"] + [f"{lab} ({who})" for lab in labels for who in ("ours", "paper")
                         if who == "ours" or lab not in ours_only]
    header += ["increase (ours)", "increase (paper)"] if with_increase else []
    header += [f"{k} (paper)" for k in paper_only]
    rows, summary, diff_rows = [], [], []
    groups = _groups(sweep, cells)
    reference = sweep.get("reference", "baseline")  # the column every other is differenced from, seed by seed
    others = [label for label in labels if label != reference] if reference in labels else []
    for task in sweep["tasks"]:
        decimals, row, means, aggs, pooled, marks = DECIMALS.get(task, 1), [task], {}, {}, {}, {}
        for label in labels:
            declared_cells, later = split_later(sweep, task, groups[(task, label, None)])
            agg = aggs[label] = aggregate(declared_cells, split)
            means[label] = agg["mean"]
            text = cell_text(agg, decimals, notes, f"{task}/{label}")
            entry = dict(task=task, column=label, x=None, paper=paper_table.get(label, {}).get(task), **agg)
            everything = aggregate(groups[(task, label, None)], split) if later else None
            if everything and everything["values"]:  # seeds added after the first results, beside, labelled
                pooled[label] = everything  # (none finished yet, as in a --build-only before any run: no pooled cell)
                declared, extra_seeds = sorted(agg["by_seed"]), sorted(set(everything["by_seed"]) - set(agg["by_seed"]))
                marks[label] = later_mark(later, declared, extra_seeds, notes, task)
                text = with_later(text, declared, extra_seeds, mean_std_text(everything["mean"], everything["std"],
                                                                              decimals), marks[label])
                entry.update(seeds_declared=declared, seeds_added_later=later_seeds(later, agg, everything))
            row += [text] + ([] if label in ours_only else [_paper_text(paper_table, label, task, decimals)])
            summary.append(entry)
        if others:
            diffs = {label: paired_difference(aggs[label], aggs[reference]) for label in others}
            key = "minus_baseline" if reference == "baseline" else f"minus {reference}"
            for entry in summary[-len(labels):]:
                entry[key] = diffs.get(entry["column"])
            cells_text = [difference_text(diffs[label], decimals) for label in others]
            for i, label in enumerate(others):
                over_all = paired_difference(pooled[label], pooled[reference]) \
                    if label in pooled and reference in pooled else None
                if over_all and diffs[label]:
                    entry = next(e for e in summary[-len(labels):] if e["column"] == label)
                    entry["seeds_added_later"][key] = over_all
                    extra_seeds = sorted(set(over_all["seeds"]) - set(diffs[label]["seeds"]))
                    cells_text[i] += (f"; with seeds {seeds_text(extra_seeds)} added later: "
                                      f"{difference_text(over_all, decimals)} {marks[label]}")
            diff_rows.append([task] + cells_text)
        if with_increase:
            paper_values = [_paper_number(paper_table.get(k, {}).get(task)) for k in ("baseline", "ELMo")]
            row += [increase_text(means["baseline"], means["ELMo"], decimals), increase_text(*paper_values, decimals)]
        rows.append(row + [_paper_text(paper_table, k, task, decimals) for k in paper_only])
    extra = f"Ours: {split} metric in %, mean ± sample std over finished seeds; n=k when fewer than planned."
    if paper_table.get("split", split) != split:
        extra += f" The paper's numbers are on {paper_table['split']}."
    if split == "test":  # the model selection's own split, so a reader can compare with the dev-only tables
        extra += ("\n\n## The same runs on dev\n\nDev metric in % (the epoch kept), mean ± sample std, and seed by "
                  "seed.\n\n| task | " + " | ".join(labels) + " |\n|" + "---|" * (len(labels) + 1))
        for entry in (e for e in summary if e["column"] == labels[0]):
            task, cols = entry["task"], []
            for label in labels:
                by_seed = next(e for e in summary if e["task"] == task and e["column"] == label)["dev_by_seed"]
                values, decimals = list(by_seed.values()), DECIMALS.get(task, 1)
                cols.append("—" if not values else mean_std_text(statistics.fmean(values), statistics.stdev(values)
                            if len(values) >= 2 else None, decimals) + " (" + ", ".join(
                            f"seed {k}: {v:.{decimals}f}" for k, v in sorted(by_seed.items())) + ")")
            extra += f"\n| {task} | " + " | ".join(cols) + " |"
    if others:
        extra += (f"\n\n## Difference to the {reference}, seed by seed\n\nMean ± sample std of (column − {reference}) "
                  "over the seeds where both runs finished (same SEED: the same random-number seeds and, on a training "
                  "subset, the same subset). The paired tests and verdicts of the paper's claims: claims.md.\n\n")
        extra += "\n".join(["| task | " + " | ".join(f"{label} − {reference}" for label in others) + " |",
                             "|" + "---|" * (len(others) + 1)] + ["| " + " | ".join(r) + " |" for r in diff_rows])
    extra += at_cap_text(summary)
    write_atomic(out_dir / f"{sweep['name']}.md",
                 _markdown(sweep.get("title", sweep["name"]), provenance, header, rows, notes, extra))
    return summary


def _describe(fig) -> list:
    """What was drawn, read back from the figure: per panel its title and each series' label and point count."""
    return [{"title": ax.get_title(), "series": [
        {"label": c.get_label(), "points": len(c) if hasattr(c, "patches") else len(c.lines[0].get_xdata())}
        for c in ax.containers]} for ax in fig.axes if ax.get_visible()]


def _save_png(fig, path: Path) -> list:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    drawn = _describe(fig)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
    return drawn


def _grid(n_rows: int, n_cols: int, width: float, height: float = 3.6):
    return plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False, layout="constrained")


def _round2(value: float) -> float:
    """Two significant digits (0.0999 -> 0.1, 1.789 -> 1.8, 100 -> 100): the axis's tick labels."""
    return float(f"{value:.2g}")


def _percent_text(x: str, percent: float, full: float) -> str:
    return f"{percent:g}%" if full == 100 else f"{_round2(percent):g}% ({x} of the training file)"


def build_curve(sweep: dict, cells: list, paper: dict, out_dir: Path, provenance: dict) -> tuple:
    """Figure 1: metric vs % of the training set (log x), one panel per task, one line per column."""
    split, labels, notes = sweep["split"], [c["label"] for c in sweep["columns"]], []
    # each task's knob is a fraction of its training file, which is full_percent % of the axis's training set
    axes_of = {task: x_axis(sweep, task) for task in sweep["tasks"]}
    groups, summary, rows, point_knobs = _groups(sweep, cells), [], [], ""
    n_cols = min(len(sweep["tasks"]), 4)
    fig, axes = _grid(math.ceil(len(sweep["tasks"]) / n_cols), n_cols, width=4.5)
    for ax in axes.flat[len(sweep["tasks"]):]:
        ax.set_visible(False)
    for task, ax in zip(sweep["tasks"], axes.flat):
        axis = axes_of[task]
        xs, full = axis["values"], axis.get("full_percent", 100)
        percents = {x: full * float(x) for x in xs}
        decimals, table = DECIMALS.get(task, 1), {x: [task, _percent_text(x, percents[x], full)] for x in xs}
        for label in labels:
            points = []
            for x in xs:
                declared_cells, later = split_later(sweep, task, groups[(task, label, x)])
                agg = aggregate(declared_cells, split)
                entry, text = dict(task=task, column=label, x=x, paper=None, **agg), cell_text(agg, decimals, notes,
                                                                                             f"{task}/{label}/{x}")
                if later:  # as in build_table: the declared seeds' cell, the later ones beside it, labelled
                    everything = aggregate(groups[(task, label, x)], split)
                    declared = sorted(agg["by_seed"])
                    extra_seeds = sorted(set(everything["by_seed"]) - set(declared))
                    text = with_later(text, declared, extra_seeds, mean_std_text(everything["mean"], everything["std"],
                                                                                  decimals),
                                      later_mark(later, declared, extra_seeds, notes, task))
                    entry.update(seeds_declared=declared, seeds_added_later=later_seeds(later, agg, everything))
                summary.append(entry)
                table[x].append(text)
                if agg["mean"] is not None:
                    points.append((percents[x], agg["mean"], agg["std"] or 0.0))
            if points:
                px, py, pe = zip(*points)
                ax.errorbar(px, py, yerr=pe, marker="o", capsize=3, label=label)
        rows += table.values()
        ax.set_xscale("log")
        ax.set_xticks([percents[x] for x in xs], [f"{_round2(percents[x]):g}%" for x in xs])
        ax.minorticks_off()
        ax.set(title=task, xlabel=axis.get("xlabel", "% of the training set"), ylabel=f"{split} metric (%)")
        if ax.containers:
            ax.legend()
        else:
            ax.text(0.5, 0.5, "no finished runs yet", transform=ax.transAxes, ha="center", va="center")
        point_knobs += "".join(f" {task} at {_percent_text(x, percents[x], full)}: the runs also set "
                               f"{', '.join(f'{k}={v}' for k, v in knobs.items())}."
                               for x, knobs in axis.get("knobs", {}).items())
        if full != 100:
            point_knobs += f" {task}: {axis.get('xlabel', '% of the training set')}."
    drawn = _save_png(fig, out_dir / f"{sweep['name']}.png")
    paper_note = paper.get(sweep["name"], {}).get("note", "—")
    extra = (f"Mean ± sample std over finished seeds ({split}, %).{point_knobs} Paper: {paper_note}"
             + at_cap_text(summary))
    write_atomic(out_dir / f"{sweep['name']}.md", _markdown(
        sweep.get("title", sweep["name"]), provenance,
        ["task", "training data"] + [f"{label} (ours)" for label in labels],
        rows, notes, extra))
    return summary, drawn


def _mix_entries(result_path: Path, result: dict) -> list:
    """The checked mix_weights entries of one result.json (null for baseline runs)."""
    entries = []
    for module, mix in (result.get("mix_weights") or {}).items():
        weights = mix.get("weights") if isinstance(mix, dict) else None
        if not isinstance(weights, list) or abs(sum(weights) - 1.0) > 1e-3 or "placement" not in mix:
            raise ValueError(f"{result_path}: key 'mix_weights.{module}': expected placement and softmax weights "
                             f"summing to 1, found {mix!r}")
        entries.append(dict(mix, module=module))
    return entries


def build_mix_weights(sweep: dict, cells: list, out_dir: Path, provenance: dict) -> tuple:
    """Figure 2: softmax-normalised layer weights per task and placement, averaged over the finished ELMo runs
    (mode "weighted" only) of the sweeps named in `from`."""
    groups, used_dirs, excluded = {}, set(), 0
    for cell in cells:
        run_dir = Path(cell.run_dir).resolve()
        result = load_result(run_dir / "result.json")[0] if cell.sweep in sweep["from"] else None
        if result is None or run_dir in used_dirs:
            continue
        used_dirs.add(run_dir)  # a run shared by two sweeps counts once
        for mix in _mix_entries(run_dir / "result.json", result):
            if mix.get("mode", "weighted") != "weighted":
                excluded += 1
                continue
            groups.setdefault((cell.task, mix["placement"]), []).append(dict(
                mix, sweep=cell.sweep, column=cell.column, seed=cell.seed, run_id=result.get("run_id"),
                lam=result.get("knobs", {}).get("ELMO_LAMBDA")))
    task_order = {t: i for i, t in enumerate(sweep.get("tasks") or sorted({t for t, _ in groups}))}
    keys = sorted(groups, key=lambda k: (task_order.get(k[0], len(task_order)), k[0], k[1]))
    summary, rows, listing = [], [], []
    # Laid out like the paper's Figure 2: a row per placement, a column per task.
    tasks, placements = list(dict.fromkeys(k[0] for k in keys)), sorted({k[1] for k in keys})
    fig, axes = _grid(max(1, len(placements)), max(1, len(tasks)), width=3.0)
    for (row, placement), (col, task) in itertools.product(enumerate(placements), enumerate(tasks)):
        axes[row][col].set_visible((task, placement) in groups)
    for task, placement in keys:
        ax = axes[placements.index(placement)][tasks.index(task)]
        runs = groups[(task, placement)]
        n_layers = len(runs[0]["weights"])
        if any(len(r["weights"]) != n_layers for r in runs):
            raise ValueError(f"{task}/{placement}: runs have different numbers of biLM layers")
        weights = [statistics.fmean(r["weights"][j] for r in runs) for j in range(n_layers)]
        gammas = [r["gamma"] for r in runs if r.get("gamma") is not None]
        gamma = statistics.fmean(gammas) if gammas else None
        gamma_text = f"{gamma:.2f}" if gamma is not None else "—"
        ax.bar(range(n_layers), weights, label=f"{task} {placement}")
        ax.set_xticks(range(n_layers), ["0 (token)"] + [str(j) for j in range(1, n_layers)])
        ax.set(title=f"{task} · {placement}  γ={gamma_text}", xlabel="biLM layer", ylim=(0, 1),
               ylabel="softmax weight")
        used = [f"{r['sweep']}/{r['column']}/seed {r['seed']} ({r['run_id']}" + (f", λ={r['lam']}" if r["lam"] else "")
                + ")" for r in runs]
        rows.append([task, placement] + [f"{w:.3f}" for w in weights] + [gamma_text, len(runs)])
        listing.append(f"- {task} · {placement}: " + "; ".join(used))
        summary.append({"task": task, "placement": placement, "mode": "weighted", "weights": weights,
                        "gamma": gamma, "runs": [{k: r[k] for k in ("sweep", "column", "seed", "run_id", "module")}
                                                 for r in runs]})
    if not keys:
        axes[0][0].text(0.5, 0.5, "no finished ELMo runs with weighted mixes yet", ha="center", va="center")
        axes[0][0].set_axis_off()
    drawn = _save_png(fig, out_dir / f"{sweep['name']}.png")
    n_layers = max((len(s["weights"]) for s in summary), default=3)
    header = ["task", "placement"] + [f"layer {j}" for j in range(n_layers)] + ["γ", "runs"]
    extra = (f"Softmax-normalised weights averaged over the finished runs of {', '.join(sweep['from'])} "
             f"(mode weighted; mixes of other modes left out: {excluded}). Runs used:\n" + "\n".join(listing))
    write_atomic(out_dir / f"{sweep['name']}.md",
                 _markdown(sweep.get("title", sweep["name"]), provenance, header, rows, [], extra))
    return summary, drawn


def build_probe(sweep: dict, cells: list, paper: dict, out_dir: Path, provenance: dict) -> dict:
    """Tables 4-6: the probe's table (probes/report.py) beside the paper's values, under the provenance block."""

    run_dir = Path(cells[0].run_dir) if cells else None
    result = load_result(run_dir / "result.json")[0] if run_dir is not None else None  # None: missing or cut short
    if result is not None:
        body = markdown_body(result, paper.get(sweep["name"], {}), probe_line)
        status = {"status": "ok", "result": result}
    elif run_dir is not None and (run_dir / "failed.json").exists():
        log = (load_result(run_dir / "failed.json")[0] or {}).get("log")
        body, status = [f"crashed (see {log})"], {"status": "crashed", "log": log}
    else:
        body, status = ["missing: the probe has not run yet"], {"status": "missing"}
    lines = [f"# {sweep.get('title', sweep['name'])}", ""] + provenance_lines(provenance) + [""] + body
    write_atomic(out_dir / f"{sweep['name']}.md", "\n".join(lines).rstrip() + "\n")
    return status


def build_results(sweeps: list, cells: list, paper: dict, out_dir: Path, provenance: dict,
                  extra: Optional[dict] = None) -> dict:
    """Builds every sweep's outputs under out_dir and writes summary.json (with ``extra``'s keys added); returns
    the summary. Every file is written in a staging folder inside out_dir first and moved into place only once all
    of them are built: a build that fails leaves the previous files as they were, never a mix of old and new."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=out_dir))
    try:
        summary = _build_results(sweeps, cells, paper, staging, provenance, extra)
        for path in sorted(staging.iterdir()):
            os.replace(path, out_dir / path.name)
        if provenance.get("runs_made") == []:  # no finished run: no list of them (nor an earlier build's)
            (out_dir / TSV).unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary


def _build_results(sweeps: list, cells: list, paper: dict, out_dir: Path, provenance: dict,
                   extra: Optional[dict]) -> dict:
    summary = {"provenance": provenance, "sweeps": {}}
    rows = provenance.get("runs_made")  # runner/analysis/provenance.py: in full in runs_made.tsv, summarised elsewhere
    if isinstance(rows, list):
        if rows:
            write_atomic(out_dir / TSV, runs_made_tsv(rows))
        summary["provenance"] = {**provenance, "runs_made": runs_made_text(rows)}
    for sweep in sweeps:
        name, kind = sweep.get("name"), sweep.get("kind")
        if sweep.get("split") not in ("dev", "test") and kind not in ("mix_weights", *PROBE_KINDS):
            raise ValueError(f"sweep {name}: key 'split': expected 'dev' or 'test', found {sweep.get('split')!r}")
        own = [c for c in cells if c.sweep == name]
        entry = {"kind": kind, "title": sweep.get("title", name), "split": sweep.get("split"),
                 "files": [f"{name}.md"] + ([f"{name}.png"] if kind != "table" else [])}
        if kind == "table":
            entry["cells"] = build_table(sweep, own, paper, out_dir, provenance)
        elif kind == "curve":
            entry["cells"], entry["figure"] = build_curve(sweep, own, paper, out_dir, provenance)
        elif kind == "mix_weights":
            entry["groups"], entry["figure"] = build_mix_weights(sweep, cells, out_dir, provenance)
        elif kind in PROBE_KINDS:
            entry["files"] = [f"{name}.md"]
            entry["probe"] = build_probe(sweep, own, paper, out_dir, provenance)
        else:
            raise ValueError(f"sweep {name}: key 'kind': expected table, curve, mix_weights or one of "
                             f"{', '.join(PROBE_KINDS)}, found {kind!r}")
        summary["sweeps"][name] = entry

    probe_results = {name: (e["probe"].get("result") if e["probe"]["status"] == "ok" else None)
                     for name, e in summary["sweeps"].items() if "probe" in e}
    claims = build_claims(sweeps, cells, paper, out_dir, provenance_lines(provenance), probe_results,
                          provenance.get("profile"))
    summary["claims"] = {"files": ["claims.md", "claims.json"],
                         "verdicts": {c["id"]: c["verdict"] for c in claims}}
    for entry in summary["sweeps"].values():  # per-example units live in the runs, not in the summary
        if entry.get("probe", {}).get("result"):
            entry["probe"]["result"] = {k: v for k, v in entry["probe"]["result"].items() if k != "units"}
    summary.update(extra or {})
    portable = repo_relative(json.loads(json.dumps(summary, default=str)))
    write_atomic(out_dir / "summary.json", json.dumps(portable, indent=1) + "\n")
    return summary
