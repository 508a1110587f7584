"""From each claim's tests to the verdicts a reviewer can accept: families and their correction, each piece of
evidence counted once, the dev claims confirmed on test, results against the paper and the seeds a claim would need.

- **Families** (``FAMILIES``): the claims of one table or figure of the paper (Table 1, Table 2, Table 3, Figure 1,
  the word-vectors ablation, Sec. 5.4's fewer updates, the probes' Tables 5-6) are one family. A claim's p is the
  larger of its required views' p (the intersection-union test of runner/analysis/stats.py: both views must reject, so
  the larger p is a valid p for the claim). **Holm–Bonferroni within each family decides the verdict** (family-wise
  error at 0.05 under any dependence); Benjamini–Hochberg over all counted claims of the profile is reported beside it.
  Each view's own p is shown raw and Holm-adjusted within the family too.
- **Each piece of evidence once**: claims resting on the same runs (the same run directories for every term, the
  same seeds) and the same contrast on the same split are one test (Table 2's λ = 0.001 against the baseline and
  Figure 1's full-data point when they are the same runs): the first in catalogue order is counted, the others list
  it as ``same_evidence_as``, show its verdict and enter no family and no total.
- **Test confirmation**: a dev claim's contrast on the test split (the same runs and seeds), Holm-corrected within
  its family the same way, with ``differs`` where the two verdicts differ.
- **Against the paper**: any view, on dev or test, giving p < 0.05 in the direction opposite to the paper flags the
  claim ``against_paper``, whatever its verdict.
- **Seeds needed**: for a claim not decidable, how many seeds the paired t-test over seeds would need for 80 % power
  at p < 0.05 / m (m: the claims of its family, Holm's strictest step, so the number holds after the correction), at
  the observed mean and spread of the per-seed differences (runner/analysis/stats.py seeds_needed), with its range
  over the spread's 95 % chi-square interval (seeds_needed_range): 3 seeds know their spread only within a factor 12.
- **Not computable** (runner/analysis/stats.py verdict): a required test without a value (per-seed differences equal
  on every seed): counted apart, in no family, never against the paper.
- **Consistent with the paper's size** (``paper_size``): for a claim whose paper prints both numbers, whether the
  paper's difference lies inside every 95 % interval we have (seeds and examples, dev and test). A second, separate
  judgement: the verdict rule (the paper's direction, declared before the runs) is unchanged; a claim can support
  the paper's direction with a much smaller effect, or be not decidable with an interval that excludes the paper's.
- **Sensitivity only** (``sensitivity``): how many verdicts would change under the same Holm rule with the paired
  t-test over seeds replaced by Welch's unpaired test, or with every view one-sided in the paper's direction. Never
  the verdicts: the paired two-sided tests were declared before the runs (runner/analysis/stats.py).
"""
from typing import Dict, List, Optional

from runner.analysis import stats

FAMILIES = {"table1": "Table 1", "table2": "Table 2", "table3": "Table 3", "figure1": "Figure 1",
            "word_vectors": "word vectors", "sec5": "Sec. 5.4", "table5": "probes", "table6": "probes",
            "encoders": "encoders (ours)"}
ADJUSTMENT = "Holm within its family (decides the verdict); Benjamini-Hochberg over all counted claims (reported)"
VERDICTS = ("supports", "contradicts", "not decidable", "not computable")  # the summary's counts, in this order
SENSITIVITY_LABEL = ("sensitivity only: how the counted claims' verdicts would read under other tests, with the same "
                     "Holm rule; the verdicts are the declared rule's (paired two-sided tests), not these")


def _fmt(p: Optional[float]) -> str:
    return "—" if p is None else f"{p:.2g}"


def family(claim: dict) -> str:
    head = claim["id"].split(".")[0]
    return FAMILIES.get(head, head)


def _required(claim: dict) -> List[dict]:
    """The views the claim's verdict needs (probes: examples only; Sec. 5.4: seeds only; else both)."""
    return [v for v in claim["views"] if v["view"] in ("seeds", "examples")]


def claim_p(views: List[dict]) -> Optional[float]:
    ps = [v.get("p") for v in views]
    return None if not ps or any(p is None for p in ps) else max(ps)


def evidence_key(claim: dict, runs) -> Optional[tuple]:
    """The runs and contrast behind a task claim's verdict: per term, its coefficient and run directories over the
    claim's seeds; with the split. None for claims without terms (probes, Sec. 5.4)."""
    if "terms" not in claim or not claim.get("seeds"):
        return None
    terms = []
    for coefficient, key in claim["terms"]:
        group = runs.groups[tuple(key)]
        terms.append((coefficient, tuple(str(group[s]["run_dir"]) for s in claim["seeds"])))
    return claim["split"], tuple(sorted(terms))


def _opposite(view: dict, direction: int) -> bool:
    p, diff = view.get("p"), view.get("diff")
    return p is not None and diff is not None and p < stats.ALPHA and diff * direction < 0


def _correct(claims: List[dict], get) -> None:
    """Holm within each family over the claims' p (``get(claim)``: the dict holding its views, required views and,
    written here, p, p_holm, p_bh and family_size) and BH over all of them; each view's own p Holm-adjusted within
    the family too (``p_holm`` on the view)."""
    parts = [(c, get(c)) for c in claims if get(c) is not None]
    for _, part in parts:
        part["p"] = claim_p([v for v in part["views"] if v["view"] in part["required"]])
    for (_, part), q in zip(parts, stats.benjamini_hochberg([part["p"] for _, part in parts])):
        part["p_bh"] = q
    for name in sorted({family(c) for c, _ in parts}):
        members = [part for c, part in parts if family(c) == name]
        size = sum(part["p"] is not None for part in members)
        for part, adjusted in zip(members, stats.holm([part["p"] for part in members])):
            part["p_holm"], part["family_size"] = adjusted, size
        for view_name in ("seeds", "examples"):
            views = [next((v for v in part["views"] if v["view"] == view_name), None) for part in members]
            for v, adjusted in zip(views, stats.holm([v.get("p") if v else None for v in views])):
                if v is not None and adjusted is not None:
                    v["p_holm"] = adjusted


def _decide(part: dict) -> None:
    """The raw verdict of ``part`` kept as ``verdict_raw``; a support or contradiction whose Holm-adjusted p is not
    below ALPHA becomes not decidable."""
    part["verdict_raw"] = part["verdict"]
    if part["verdict"] in ("supports", "contradicts") and part.get("p_holm") is not None \
            and part["p_holm"] >= stats.ALPHA:
        part["why"] = (f"p = {part['p']:.3g} before correction, {part['p_holm']:.3g} after Holm within its family "
                       f"({part['family_size']} claims): ≥ {stats.ALPHA:g}")
        part["verdict"] = "not decidable"


def paper_size(claim: dict) -> Optional[dict]:
    """Whether the paper's difference (``paper_diff``, in the claim's own contrast) lies inside each 95 % interval of
    the claim's views, dev and test: ``consistent`` when inside every one, False when outside any, None when there is
    no interval (the randomization test has none). None for a claim whose paper gives no number."""
    target = claim.get("paper_diff")
    if not isinstance(target, (int, float)) or claim.get("kind", "better") != "better":
        return None
    split = claim.get("split") or "dev"
    sides = [(split, claim.get("views") or [])]
    if claim.get("test_view"):
        sides.append((claim["test_view"].get("split", "test"), claim["test_view"].get("views") or []))
    intervals = {f"{where} {v['view']}": v["ci"] for where, views in sides for v in views if v.get("ci")}
    outside = [name for name, (lo, hi) in intervals.items() if not lo <= target <= hi]
    above = {target > intervals[name][1] for name in outside}  # the paper's difference above ours: ours smaller
    ours = None if not outside else "smaller" if above == {True} else "larger" if above == {False} else "mixed"
    return {"paper_diff": target, "intervals": intervals, "outside": outside, "ours": ours,
            "inside": [name for name in intervals if name not in outside],
            "consistent": (not outside) if intervals else None}


def size_text(claim: dict) -> str:
    """One phrase for claims.md: "consistent with the paper's +0.7" or "not consistent: +3.3 outside dev seeds, ..."."""
    size = claim.get("paper_size")
    if not size:
        return f"— ({claim.get('paper_size_note') or 'no paper number'})"
    if size["consistent"] is None:
        return f"— (no 95 % interval to hold the paper's {size['paper_diff']:+g})"
    if size["consistent"]:
        return f"consistent: the paper's {size['paper_diff']:+g} inside every interval"
    ours = {"smaller": " (ours smaller)", "larger": " (ours larger)"}.get(size.get("ours"), "")
    return f"**not consistent**{ours}: the paper's {size['paper_diff']:+g} outside " + ", ".join(size["outside"])


def review(claims: List[dict], runs=None) -> Dict[str, int]:
    """Adds family, counted/same_evidence_as, adjusted p's, the corrected verdict, test_view's verdict and
    ``differs``, against_paper and seeds_needed to every claim (in place); returns the summary counts."""
    seen: Dict[tuple, str] = {}
    for claim in claims:
        claim["family"] = family(claim)
        key = evidence_key(claim, runs) if runs is not None else None
        claim["same_evidence_as"] = seen.get(key) if key is not None else None
        claim["counted"] = claim["same_evidence_as"] is None
        if key is not None and key not in seen:
            seen[key] = claim["id"]
        claim["required"] = [v["view"] for v in claim["views"]] if claim["id"].startswith(("table5", "table6")) \
            else ["seeds"] if claim["id"].startswith("sec5.4") else ["seeds", "examples"]
    counted = [c for c in claims if c["counted"] and c.get("kind", "better") == "better"]
    _correct(counted, lambda c: c)
    for claim in counted:
        _decide(claim)
    with_test = [c for c in counted if c.get("test_view")]
    for claim in with_test:
        claim["test_view"]["required"] = claim["required"]
    _correct(with_test, lambda c: c["test_view"])
    for claim in with_test:
        _decide(claim["test_view"])
        claim["test_view"]["differs"] = claim["test_view"]["verdict"] != claim["verdict"]
    by_id = {c["id"]: c for c in claims}
    for claim in claims:
        twin = by_id.get(claim["same_evidence_as"]) if claim["same_evidence_as"] else None
        if twin is not None:  # the same test, shown under this heading too
            for field in ("views", "p", "p_holm", "p_bh", "verdict", "why", "test_view", "family_size"):
                if field in twin:
                    claim[field] = twin[field]
        if claim.get("test_view"):  # a claim outside the correction (an "≈" claim): its test verdict as it is
            claim["test_view"].setdefault("differs", claim["test_view"]["verdict"] != claim["verdict"])
        claim["adjustment"] = ADJUSTMENT
        direction = claim.get("direction", 1)
        views = list(claim["views"]) + list((claim.get("test_view") or {}).get("views", []))
        claim["against_paper"] = claim.get("kind", "better") == "better" and not claim.get("ours_only") and \
            any(_opposite(v, direction) for v in views)
        claim["paper_size"] = paper_size(claim)
        claim.setdefault("seeds_declared", [])  # a probe: no seeds (one fixed biLM, a deterministic classifier)
        claim["seeds_needed"], claim["seeds_needed_why"], claim["seeds_needed_range"] = None, None, None
        seed_view = next((v for v in claim["views"] if v["view"] == "seeds"), None)
        if claim["verdict"] == "not decidable" and seed_view and seed_view.get("values"):
            size = max(1, claim.get("family_size") or 1)  # Holm's strictest step: 0.05 / m, what a claim must plan for
            claim["seeds_needed"], why = stats.seeds_needed(seed_view["values"], direction, stats.ALPHA / size)
            low, high, span = stats.seeds_needed_range(seed_view["values"], direction, stats.ALPHA / size)
            if span:
                claim["seeds_needed_range"] = [low, high]
                why += f"; {span} over the 95 % interval of that spread"
            examples = next((v for v in claim["views"] if v["view"] == "examples"), None)
            if claim["seeds_needed"] is not None and examples and (examples.get("p") or 1) >= stats.ALPHA:
                why += f"; the view over examples (p = {_fmt(examples.get('p'))}) must reach p < 0.05 as well"
            claim["seeds_needed_why"] = why
    final = [c for c in claims if c["counted"]]
    return {"claims": len(claims), "counted": len(final),
            **{v: sum(c["verdict"] == v for c in final) for v in VERDICTS},
            "leans against the paper": sum(c["against_paper"] for c in final),
            "differs on test": sum(bool((c.get("test_view") or {}).get("differs")) for c in final)}


def _welch(claim: dict) -> dict:
    """The claim's views with the paired t-test over seeds replaced by Welch's unpaired one (``welch``, computed by
    runner/analysis/claims.py from the same runs); a claim without one keeps its own."""
    welch = claim.get("welch")
    return {"views": [welch if welch and v["view"] == "seeds" else v for v in claim["views"]]}


def _one_sided(claim: dict) -> dict:
    return {"views": [stats.one_sided(v, claim.get("direction", 1)) for v in claim["views"]]}


ALTERNATIVES = (("Welch's unpaired t-test over seeds", _welch,
                 "the runs of each system as independent samples (Welch 1947), the seeds' pairing dropped; the view "
                 "over examples unchanged"),
                ("one-sided tests in the paper's direction", _one_sided,
                 "every view's p halved where the difference has the paper's direction, 1 − p/2 where not"))


def sensitivity(claims: List[dict]) -> dict:
    """Sensitivity only (never the verdicts): the counted "better" claims re-judged under each ALTERNATIVES test by
    the same rule (runner/analysis/stats.py verdict, Holm within each family at 0.05): the counts and every claim
    whose verdict would change. Call after ``review``. Almost stochastic order (Dror et al. 2019, deepsig) is not
    run: it needs a package this project does not install, and over 3 seeds it has little to resample."""
    counted = [c for c in claims if c.get("counted") and c.get("kind", "better") == "better"]
    out = {"label": SENSITIVITY_LABEL, "claims": len(counted),
           "declared": {v: sum(c["verdict"] == v for c in counted) for v in VERDICTS}, "alternatives": [],
           "not_run": "almost stochastic order (Dror et al. 2019, the deepsig package): not run, it needs a package "
                      "this project does not install"}
    for name, transform, how in ALTERNATIVES:
        copies = []
        for claim in counted:
            copy = {"id": claim["id"], "required": claim["required"], **transform(claim)}
            copy.update(stats.verdict(claim.get("direction", 1), copy["views"], claim["required"],
                                      claim.get("still_improving") or ()))
            copies.append(copy)
        _correct(copies, lambda c: c)
        for copy in copies:
            _decide(copy)
        changed = [{"id": c["id"], "verdict": c["verdict"], "would_be": copy["verdict"]}
                   for c, copy in zip(counted, copies) if copy["verdict"] != c["verdict"]]
        out["alternatives"].append({"name": name, "how": how,
                                    "counts": {v: sum(c["verdict"] == v for c in copies) for v in VERDICTS},
                                    "changed": changed})
    return out
