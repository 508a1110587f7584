"""claims.md and claims.json: every claim of a profile gathered (runner/analysis/claims.py: the catalogue, each claim's
tests and its verdict before correction), corrected within its family and reviewed (runner/analysis/verdicts.py), and
written: the verdict rule's text, a table of claims per family with the paper's numbers, ours, both views, the test
split beside a dev claim and the paper's size, the seeds added later, the sensitivity-only section, and the line that
says when the profile was declared against when its first run started (from git).
"""
import calendar
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from runner.analysis import stats
from runner.analysis.claims import (
    IMPROVING_MIN_RISE,
    IMPROVING_P,
    Runs,
    catalogue,
    evaluate,
    probe_claim,
    untestable,
    updates_claim,
    view_text,
)
from runner.analysis.verdicts import review, sensitivity, size_text
from runner.paths import REPO
from runner.records import write_atomic


def _ours(claim: dict) -> str:
    if "ours" in claim:
        return claim["ours"]
    means = claim["means"]
    if any(m is None for m in means):
        return "missing runs"
    text = " vs ".join(f"{m:.1f}" for m in means)
    if len(means) == 4:  # a difference of gains (Figure 1): (ELMo − baseline) at one size against another
        text = f"gain {means[0] - means[1]:+.1f} vs {means[2] - means[3]:+.1f}"
    if claim.get("rer") and len(means) == 2 and means[1] < 100:
        text = (f"{means[1]:.1f} → {means[0]:.1f} ({means[0] - means[1]:+.1f}, relative error reduction "
                f"{100 * (means[0] - means[1]) / (100 - means[1]):.1f} %)")
    return text + f" ({claim['split']}, mean of {len(claim['seeds'])} seed(s) in both)"


RULE = ("Verdict rule (runner/analysis/stats.py and runner/analysis/verdicts.py, after Berg-Kirkpatrick et al. 2012, "
        "Dror et al. 2018 "
        "and Holm 1979): a claim's p is the larger of its required views' p (trained models: the paired t-test over "
        "the seeds declared before its runs *and* the paired bootstrap over examples, which recomputes the task's "
        "metric on each resample; probes: the bootstrap alone; Sec. 5.4: the seeds alone). *supports* when the "
        "difference has the paper's direction in every required view and the claim's p, **Holm-adjusted within its "
        "family** (the claims of one table or figure), is below 0.05; *contradicts*, the opposite direction by the "
        "same standard; otherwise *not decidable*, which includes a missing view and any run still improving when its "
        f"epochs ran out (least-squares slope over its last epochs, one-sided p < {IMPROVING_P}, a fitted rise of "
        f"{IMPROVING_MIN_RISE} points or more); *not computable* when a required test has no value on the runs there "
        "are (per-seed differences equal on every seed: std 0, t = 0/0 or ±∞), which decides nothing and enters no "
        "family. Benjamini-Hochberg over all counted claims is reported beside. Claims "
        "resting on the same runs and contrast are one test, counted once (under the first heading that makes it). "
        "Seeds a profile added after results of a comparison were read are shown as an extension, never pooled into "
        "the verdict. A dev claim's same contrast on the test split is shown beside it, corrected the same way. "
        "*Leans against the paper*: some view, dev or test, gives p < 0.05 in the opposite direction. Seeds needed: "
        "for the t-test over seeds to reach p < 0.05 / m (m claims in its family: Holm's strictest step) with 80 % "
        "power "
        "at the observed mean and spread (noncentral t), with its range over the spread's 95 % chi-square interval. "
        "*Paper's size*, a second judgement beside the verdict (the rule above is unchanged): whether the paper's "
        "difference lies inside every 95 % interval we have, dev and test. "
        f"Over seeds: df = seeds - 1. Over examples: "
        f"{stats.BOOTSTRAP_DRAWS:,} draws, seeds averaged; "
        f"under {stats.MIN_UNITS} units (LitBank's 10 test documents) the exact paired randomization test instead. "
        "Every number of a run is the metric of its archived predictions (runner/execution/evidence.py). Differences "
        "in metric "
        "points (%), 95 % intervals in brackets.")


def _p(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2g}"


def _verdict_cell(claim: dict) -> str:
    if not claim["counted"]:
        return f"**{claim['verdict']}** (the same test as {claim['same_evidence_as']}, counted there)"
    text = f"**{claim['verdict']}**" + (f" ({claim['why']})" if claim["verdict"] in ("not decidable", "not computable")
                                         else "")
    if claim.get("against_paper"):
        text += "; **leans against the paper**"
    if claim.get("seeds_needed_why"):
        text += f"; seeds needed: {claim['seeds_needed_why']}"
    return text


def _test_cell(claim: dict) -> str:
    test = claim.get("test_view")
    if not test:
        return "—"
    views = {v["view"]: v for v in test["views"]}
    parts = [f"{v['view']}: {v['diff']:+.2f}, p = {_p(v.get('p'))}" for v in views.values() if v.get("p") is not None]
    text = "; ".join(parts) or "no view"
    return text + f"; Holm p = {_p(test.get('p_holm'))}: {test['verdict']}" + (" — **differs from dev**"
                                                                                if test.get("differs") else "")


def sensitivity_markdown(result: dict) -> List[str]:
    """claims.md's section "Sensitivity only" (runner/analysis/verdicts.py sensitivity)."""
    declared = result["declared"]
    lines = ["", "## Sensitivity only: other tests under the same Holm rule (not the verdicts)", "",
             f"*{result['label']}.* Of {result['claims']} counted claims the declared rule gives "
             f"{declared['supports']} supported, {declared['contradicts']} contradicted, {declared['not decidable']} "
             f"not decidable, {declared['not computable']} not computable.", "",
             "| test instead | supports | contradicts | not decidable | not computable | verdicts that would change |",
             "|---|---|---|---|---|---|"]
    for alternative in result["alternatives"]:
        counts, changed = alternative["counts"], alternative["changed"]
        listed = "; ".join(f"{c['id']}: {c['verdict']} → {c['would_be']}" for c in changed) or "none"
        lines.append(f"| {alternative['name']} ({alternative['how']}) | {counts['supports']} | "
                     f"{counts['contradicts']} | {counts['not decidable']} | {counts['not computable']} | "
                     f"{len(changed)}: {listed} |")
    return lines + ["", f"Not run: {result['not_run']}."]


def claims_markdown(claims: List[dict], summary: dict, provenance_lines: List[str], untested: List[str],
                    sensitive: Optional[dict] = None) -> str:
    lines = ["# Claims of the paper that this profile tests", ""] + provenance_lines + [
        "", f"{summary['claims']} claims listed, {summary['counted']} tests counted (the others repeat a counted "
            f"test): "
            f"**{summary['supports']} supported, {summary['contradicts']} contradicted, {summary['not decidable']} not "
            f"decidable at this scale, {summary['not computable']} not computable; "
            f"{summary['leans against the paper']} leaning against the paper; "
            f"{summary['differs on test']} dev verdict(s) differing on test** (Holm within each family).", "",
        "![every counted claim: the difference with its 95 % intervals over seeds and examples, by family "
        "(runner/analysis/page.py; also in index.html)](claims.png)", "", RULE]
    extensions, notes = [], []
    for name in dict.fromkeys(c["family"] for c in claims):
        members = [c for c in claims if c["family"] == name]
        size = next((c.get("family_size") for c in members if c.get("family_size")), 0)
        lines += ["", f"## {name}: {len(members)} claims, {sum(c['counted'] for c in members)} counted, Holm over "
                      f"{size} tested", "",
                  "| claim | paper | ours | over seeds | over examples | p: raw / Holm / BH | verdict | the paper's "
                  "size | same contrast on test |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for claim in members:
            views = {v["view"]: v for v in claim["views"]}
            lines.append(
                f"| {claim['section']}: {claim['text']} | {claim['paper']} | {_ours(claim)} | "
                f"{view_text(views['seeds']) if 'seeds' in views else '— no seeds (one fixed biLM)'} | "
                f"{view_text(views['examples']) if 'examples' in views else '—'} | "
                f"{_p(claim.get('p'))} / {_p(claim.get('p_holm'))} / {_p(claim.get('p_bh'))} | {_verdict_cell(claim)} "
                f"| {size_text(claim)} | {_test_cell(claim)} |")
            if claim.get("extension"):
                ext = claim["extension"]
                views_text = "; ".join(view_text(v) for v in ext["views"])
                extensions.append(f"- {claim['id']}: seeds {', '.join(map(str, ext['seeds']))} (declared "
                                  f"{', '.join(map(str, claim['seeds_declared']))}; added after the first results: "
                                  f"{', '.join(map(str, claim['seeds_added_later']))}): {views_text}; uncorrected "
                                  f"verdict {ext['verdict']}")
            if claim.get("still_improving"):
                notes.append(f"- {claim['id']}: still rising at the epoch cap: " + ", ".join(claim["still_improving"]))
    if extensions:
        lines += ["", "## Seeds added after the first results (shown, not in the verdicts)", ""] + extensions
    if notes:
        lines += ["", "Runs still improving when their epochs ran out (their claims are not decided):", ""] + notes
    if untested:
        lines += ["", "Claims of the paper this profile cannot test:", ""] + [f"- {u}" for u in untested]
    if sensitive:
        lines += sensitivity_markdown(sensitive)
    return "\n".join(lines) + "\n"


def _started(result: dict) -> Optional[tuple]:
    """(when, commit) a run started: its first attempt's record, or, for a run made in one go before attempts were
    recorded, the time it finished less its wall time and the commit that made it."""
    if result.get("attempts"):
        return result["attempts"][0]["started"], result["attempts"][0]["commit"]
    made = result.get("made") or {}
    try:
        finished = calendar.timegm(time.strptime(made["finished"], "%Y-%m-%d %H:%M:%S UTC"))
        return finished - float(result.get("wall_time_s") or 0), made["git_commit"]
    except (KeyError, TypeError, ValueError):
        return None


def declaration(profile_file: str, results: List[dict], repo: Path) -> Optional[str]:
    """When the profile was written against when its runs started, from git (a confirmatory profile is declared by the
    commit that adds it, before any of its runs): one line for claims.md, or None where git has no history of the
    file (a tarball, a profile outside the repository)."""
    import subprocess

    try:
        log = subprocess.check_output(["git", "log", "--format=%h %ct", "--", profile_file], cwd=repo, text=True,
                                      stderr=subprocess.DEVNULL).split("\n")
    except (OSError, subprocess.CalledProcessError):
        return None
    commits = [(c, int(t)) for c, t in (line.split() for line in log if line.strip())]
    if not commits:
        return None
    starts = sorted(filter(None, map(_started, results)))
    day = lambda t: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))  # noqa: E731
    (added, added_t), (last, last_t) = commits[-1], commits[0]
    text = f"- **declared**: `{profile_file}` added at {added} ({day(added_t)})"
    text += f", last changed at {last} ({day(last_t)})" if last != added else ", unchanged since"
    if not starts:  # no trained run (yet, or a profile of probes, whose runs keep no attempts)
        return text
    first_t, first_commit = starts[0]
    text += f"; first run started at {first_commit} ({day(first_t)}): "
    later = [c for c, t in commits if t > first_t]
    return text + ("every change to the profile precedes every run" if not later else
                   f"changed {len(later)} time(s) since (git log)")


def build_claims(sweeps: List[dict], cells: list, paper: dict, out_dir: Path, provenance_lines: List[str],
                 probe_results: Dict[str, Optional[dict]], profile_file: Optional[str] = None) -> List[dict]:
    """Writes claims.md and claims.json; returns the claims. ``profile_file`` (repository-relative): the line saying
    when the profile was committed against when its first run started (``declaration``)."""

    split_of = {s["name"]: s.get("split") for s in sweeps if s.get("split") in ("dev", "test")}
    runs = Runs(cells, split_of)
    added_later = {(s["name"], task): set(entry.get("seeds", [])) for s in sweeps
                   for task, entry in (s.get("seeds_added_later") or {}).items()}
    for label, why in runs.excluded.items():
        print(f"warning: {label} left out of the claims and the tables: {why}", file=sys.stderr, flush=True)
    claims = [evaluate(c, runs, added_later) for c in catalogue(sweeps, paper, runs)]
    if "table1" in split_of:
        table1 = next(s for s in sweeps if s["name"] == "table1")
        claims += [c for c in (updates_claim(t, runs, added_later) for t in table1["tasks"]) if c]
    probes = {"table5": ("second LSTM layer", "first LSTM layer", "WSD"),
              "table6": ("first LSTM layer", "second LSTM layer", "POS tagging")}
    for sweep, result in probe_results.items():
        if sweep in probes:
            claims.append(probe_claim(sweep, result, paper.get(sweep, {}), *probes[sweep]))
    summary = review(claims, runs)
    sensitive = sensitivity(claims)
    declared = profile_file and declaration(profile_file, [run["result"] for group in runs.groups.values()
                                                          for run in group.values()], REPO)
    lines = provenance_lines + ([declared] if declared else [])
    write_atomic(out_dir / "claims.md", claims_markdown(claims, summary, lines, untestable(sweeps), sensitive))
    write_atomic(out_dir / "claims.json", json.dumps({"summary": summary, "rule": RULE, "claims": claims,
                                                      "sensitivity": sensitive}, indent=1, default=str) + "\n")
    return claims
