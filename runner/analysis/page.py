"""The verdicts at a glance: claims.png/.svg (a forest plot of every counted claim) and index.html (one static page
per profile: the summary counts, the plot, the tables, the figures, the claims with a filter, the provenance).

Reads only what the table build already wrote in results/<profile>/: claims.json, summary.json, tableN.md,
figureN.png. A forest plot (one row per comparison, the effect with its confidence interval against a zero line) is
how meta-analyses show many effects at once (Lewis & Clarke 2001, "Forest plots: trying to see the wood and the
trees"). Older claims.json files without the families and adjusted p-values still render: the family comes from the
claim id, the p shown is the claim's unadjusted one, and the page says so.
"""
import html
import io
import json
import re
from pathlib import Path
from typing import List, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.lines import Line2D  # noqa: E402

from runner.records import write_atomic  # noqa: E402

TEMPLATES = Path(__file__).resolve().parent / "templates"
FAMILIES = ("Table 1", "Table 2", "Table 3", "Figure 1", "word vectors", "Sec. 5.4", "probes")
PREFIX_FAMILY = {"table1": "Table 1", "table2": "Table 2", "table3": "Table 3", "figure1": "Figure 1",
                 "word_vectors": "word vectors", "sec5.4": "Sec. 5.4", "table4": "probes", "table5": "probes",
                 "table6": "probes"}
# the unit of a family's differences: Sec. 5.4 counts epochs (runner/analysis/claims.py updates_claim), the rest metric
# points
UNIT = {"Sec. 5.4": "epochs (baseline's best − ELMo's epoch to reach it)"}
POINTS = "metric points (%)"
COLOURS = {"supports": "#1a7f37", "contradicts": "#c62828", "not decidable": "#757575",
           "leans against the paper": "#e07b00"}
VIEW_MARKS = {"seeds": ("o", +0.17, "over seeds (paired t-test), 95 % CI"),
              "examples": ("s", -0.17, "over examples (paired bootstrap), 95 % CI")}
PAGE_TABLES = ("table1", "table2", "table3", "table4", "table5", "table6", "word_vectors")
PAGE_FIGURES = ("figure1", "figure2")


class ReportError(ValueError):
    """A results file the page cannot be made from: the message names the file, what was expected and found."""


# ---- claims -----------------------------------------------------------------------------------------------------

def family_of(claim: dict) -> str:
    """The claim's family: its own field, else from its id's sweep prefix (older claims.json), else its section."""
    if claim.get("family"):
        return claim["family"]
    for prefix in sorted(PREFIX_FAMILY, key=len, reverse=True):
        if claim.get("id", "").startswith(prefix + "."):
            return PREFIX_FAMILY[prefix]
    return str(claim.get("section") or "other").split(" (")[0]


def view(claim: dict, name: str) -> Optional[dict]:
    return next((v for v in claim.get("views") or [] if v.get("view") == name), None)


def normalised(claim: dict) -> dict:
    """A claim with the optional fields of the current claims.json filled in for older files."""
    claim = dict(claim)
    claim["family"] = family_of(claim)
    claim.setdefault("counted", True)
    # older files: the larger p of the views that have one (runner/analysis/stats.py verdict)
    if claim.get("p") is None:
        ps = [v["p"] for v in claim.get("views") or [] if v.get("p") is not None]
        claim["p"] = max(ps) if ps else None
    verdict = claim.get("verdict", "not decidable")
    claim["colour_key"] = "leans against the paper" if claim.get("against_paper") and verdict == "not decidable" \
        else verdict
    return claim


def grouped(claims: list) -> list:
    """[(family, [claims])] in the paper's order of families, others after them in the order met."""
    order = list(FAMILIES) + [f for f in dict.fromkeys(c["family"] for c in claims) if f not in FAMILIES]
    return [(f, [c for c in claims if c["family"] == f]) for f in order if any(c["family"] == f for c in claims)]


def row_label(claim: dict) -> str:
    """The claim id without its sweep prefix (the panel names the family); probes keep it (two sweeps, one panel)."""
    cid = claim.get("id", "?")
    for prefix, family in PREFIX_FAMILY.items():
        if family != "probes" and cid.startswith(prefix + "."):
            return cid[len(prefix) + 1:]
    return cid


def p_text(p) -> str:
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_is(p) -> str:
    """"p = 0.052", "p < 0.001"."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def read_claims(out_dir: Path) -> dict:
    """claims.json as {"summary", "rule", "claims"} with every claim normalised; ReportError names a bad file."""
    path = Path(out_dir) / "claims.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: expected the claims file the table build writes (JSON), found: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ReportError(f"{path}: key 'claims': expected a list of claims, found "
                          f"{type(data.get('claims') if isinstance(data, dict) else data).__name__}")
    claims = [normalised(c) for c in data["claims"]]
    summary = data.get("summary") or {"claims": len(claims), "counted": sum(c["counted"] for c in claims),
                                      **{v: sum(c.get("verdict") == v for c in claims if c["counted"])
                                         for v in ("supports", "contradicts", "not decidable")}}
    return {"summary": summary, "rule": data.get("rule"), "claims": claims,
            "adjusted": any(c.get("p_holm") is not None for c in claims)}


# ---- the forest plot --------------------------------------------------------------------------------------------

def _clipped(lo: float, hi: float, bound: float) -> tuple:
    return max(lo, -bound), min(hi, bound), lo < -bound, hi > bound


def _panel(ax, family: str, rows: list, adjusted: bool) -> None:
    """One family: a row per claim (top to bottom), both views' differences with their intervals, the paper's."""
    points = [abs(x) for c in rows for x in [c.get("paper_diff")] + [(view(c, n) or {}).get("diff") for n in VIEW_MARKS]
              if isinstance(x, (int, float))]
    bound = 2.5 * max(points + [0.5])  # an interval reaching past it is cut there, with an arrowhead at the cut
    lows, highs = [0.0], [0.0]
    for y, claim in enumerate(rows):
        colour = COLOURS.get(claim["colour_key"], COLOURS["not decidable"])
        if y % 2:
            ax.axhspan(y - 0.5, y + 0.5, color="#f3f3f3", zorder=0, clip_on=False)  # unclipped: stable SVG ids
        for name, (marker, dy, _) in VIEW_MARKS.items():
            v = view(claim, name) or {}
            if not isinstance(v.get("diff"), (int, float)):
                continue
            if v.get("ci"):
                lo, hi, cut_lo, cut_hi = _clipped(v["ci"][0], v["ci"][1], bound)
                ax.plot([lo, hi], [y - dy] * 2, color=colour, lw=1.6, zorder=2)
                for cut, x, head in ((cut_lo, lo, "<"), (cut_hi, hi, ">")):
                    if cut:
                        ax.plot([x], [y - dy], marker=head, color=colour, ms=5, zorder=3)
                lows.append(lo), highs.append(hi)
            ax.plot([v["diff"]], [y - dy], marker=marker, color=colour, ms=5.5, zorder=4,
                    gid=f"claim-row-{claim['id']}-{name}")
            lows.append(v["diff"]), highs.append(v["diff"])
        if isinstance(claim.get("paper_diff"), (int, float)):
            ax.plot([claim["paper_diff"]], [y], marker="D", mfc="none", mec="black", ms=6.5, mew=1.2, zorder=5)
            lows.append(claim["paper_diff"]), highs.append(claim["paper_diff"])
        p = claim.get("p_holm") if adjusted else claim.get("p")
        ax.text(1.01, y, p_text(p), transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=8,
                color=colour)
    pad = 0.06 * (max(highs) - min(lows) or 1.0)
    ax.set_xlim(min(lows) - pad, max(highs) + pad)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.axvline(0, color="black", lw=0.9, zorder=1.8)  # above the grid
    ax.set_yticks(range(len(rows)), [row_label(c) for c in rows], fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    splits = sorted({c.get("split") for c in rows if c.get("split")})
    where = f" ({', '.join(splits)})" if splits else ""
    ax.set_title(f"{family}{where}: difference in {UNIT.get(family, POINTS)}",
                 fontsize=9, loc="left")
    ax.text(1.01, -0.5, "p (Holm)" if adjusted else "p", transform=ax.get_yaxis_transform(), va="bottom",
            ha="left", fontsize=8, weight="bold")


def _figure(groups: list, adjusted: bool):
    if not groups:
        fig, ax = plt.subplots(figsize=(7, 1.2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no counted claim in this profile", ha="center", va="center")
        return fig
    heights = [len(rows) + 1.4 for _, rows in groups]  # a panel's title and axis take about 1.4 rows
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 0.26 * sum(heights) + 0.9), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    for ax, (family, rows) in zip(axes[:, 0], groups):
        _panel(ax, family, rows, adjusted)
    claims = [c for _, rows in groups for c in rows]  # the legend names only what is drawn
    handles = [Line2D([], [], marker=m, color="#444444", lw=1.6, label=label) for name, (m, _, label)
               in VIEW_MARKS.items()
               if any(isinstance((view(c, name) or {}).get("diff"), (int, float)) for c in claims)]
    if any(isinstance(c.get("paper_diff"), (int, float)) for c in claims):
        handles.append(Line2D([], [], marker="D", mfc="none", mec="black", lw=0, label="the paper's difference"))
    handles += [Line2D([], [], marker="s", color=c, lw=0, ms=8, label=v) for v, c in COLOURS.items()
                if any(claim["colour_key"] == v for claim in claims)]
    fig.legend(handles=handles, loc="outside upper center", ncol=3, fontsize=8, frameon=False)
    return fig


def forest_plot(claims: list, out_dir: Path) -> List[str]:
    """claims.png and claims.svg in out_dir: one row per counted claim, grouped by family (one panel each, its own
    unit), the difference over seeds and over examples with their 95 % intervals, zero, the paper's difference
    (hollow diamond) where it gives one, colour by verdict, the claim's p (Holm-adjusted within its family when the
    claims carry it) at the right. Returns the ids of the rows drawn, top to bottom."""
    claims = [normalised(c) for c in claims]
    adjusted = any(c.get("p_holm") is not None for c in claims)
    groups = grouped([c for c in claims if c["counted"]])
    # the same SVG for the same claims (no random ids, no date), its text as text (searchable, a tenth of the size)
    with plt.rc_context({"svg.hashsalt": "claims", "svg.fonttype": "none"}):
        fig = _figure(groups, adjusted)
        for fmt in ("png", "svg"):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
            data = buffer.getvalue()
            if fmt == "svg":  # clip ids hash the clip box's floats, which vary in their last bits: numbered instead
                ids = {}
                data = re.sub(rb'(?<=[#"])p[0-9a-f]{10}(?=[)"])',  # the lambda runs at once, in this iteration
                              lambda m: ids.setdefault(m.group(0), b"clip%d" % len(ids)), data)  # noqa: B023
            write_atomic(Path(out_dir) / f"claims.{fmt}", data)
    plt.close(fig)
    return [c["id"] for _, rows in groups for c in rows]


def forest_markdown_line(out_dir: Path) -> str:
    """The line that puts the forest plot at the top of claims.md (empty when there is none)."""
    return "![claims](claims.png)" if (Path(out_dir) / "claims.png").is_file() else ""


# ---- markdown tables to HTML ------------------------------------------------------------------------------------

def inline(text: str) -> str:
    """The markdown the runner's tables use inside a line: **bold**, *italic*, `code`, relative [links](x)."""
    text = html.escape(text, quote=True)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", text)
    return re.sub(r"\[([^\]]+)\]\(([^):\s]+)\)", r'<a href="\2">\1</a>', text)  # no scheme: relative links only


def _cells(line: str) -> list:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _block_html(lines: list) -> str:
    if all(line.lstrip().startswith("|") for line in lines) and len(lines) >= 2:
        head = "".join(f"<th>{inline(c)}</th>" for c in _cells(lines[0]))
        body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(row)) + "</tr>" for row in lines[2:])
        return f'<table class="md"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    if all(line.lstrip().startswith("- ") or line.startswith("  ") for line in lines):
        return "<ul>" + "".join(f"<li>{inline(line.lstrip()[2:])}</li>" for line in lines) + "</ul>"
    return "<p>" + inline(" ".join(lines)) + "</p>"


def markdown_page(text: str) -> dict:
    """A results markdown file the runner writes as {"title", "main": html, "sections": [(heading, html)]}: its
    provenance block (shown once, at the page's bottom) left out, each '## ' section apart so the page can fold it."""
    lines = text.splitlines()
    title = lines[0][2:].strip() if lines and lines[0].startswith("# ") else ""
    lines = lines[1:] if title else lines
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith("- **"):  # the provenance block (runner/analysis/tables.py provenance_lines)
        while lines and lines[0].strip():
            lines.pop(0)
    parts, block = [("", [])], []
    for line in lines + [""]:
        if line.strip() and not line.startswith("## "):
            block.append(line)
            continue
        if block:
            parts[-1][1].append(_block_html(block))
            block = []
        if line.startswith("## "):
            parts.append((line[3:].strip(), []))
    return {"title": title, "main": "".join(parts[0][1]),
            "sections": [(inline(h), "".join(blocks)) for h, blocks in parts[1:]]}


# ---- the page ---------------------------------------------------------------------------------------------------

def _flat(value) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def _view_text(v: Optional[dict]) -> str:
    """One view in the claims table: difference [interval], p (Holm) — or why it is missing."""
    if not v:
        return "—"
    if v.get("p") is None:
        return "— " + str(v.get("unavailable", "not computed"))
    ci = f" [{v['ci'][0]:+.2f}, {v['ci'][1]:+.2f}]" if v.get("ci") else ""
    holm = f" (Holm: {p_is(v['p_holm'])})" if v.get("p_holm") is not None else ""
    n = f"{v['n']:,} {v.get('units', 'seeds' if v.get('view') == 'seeds' else 'units')}: " if v.get("n") else ""
    return f"{n}{v['diff']:+.2f}{ci}, {p_is(v['p'])}{holm}"


def _per_seed(claim: dict) -> dict:
    """{"seeds": [...], "rows": [(label, [value or None per seed])]} from per_seed, else the seeds view's values."""
    per_seed = claim.get("per_seed") or {}
    seeds = sorted({str(s) for cells in per_seed.values() for s in cells}, key=lambda s: (len(s), s))
    rows = [(label, [cells.get(s) for s in seeds]) for label, cells in per_seed.items()]
    seeds_view = view(claim, "seeds") or {}
    if seeds_view.get("values") and seeds_view.get("seeds"):
        by_seed = dict(zip((str(s) for s in seeds_view["seeds"]), seeds_view["values"]))
        seeds = seeds or list(by_seed)
        rows.append(("difference", [by_seed.get(s) for s in seeds]))
    return {"seeds": seeds, "rows": rows}


OPTIONAL = {"section": "", "text": "", "paper": "", "split": None, "why": None, "against_paper": False,
            "same_evidence_as": None, "adjustment": None, "seeds_declared": None, "seeds_added_later": None,
            "seeds_needed": None, "seeds_needed_why": None}  # absent from older claims.json files


def _claim_row(claim: dict) -> dict:
    test = claim.get("test_view") or None
    return {**OPTIONAL, **claim, "label": row_label(claim), "seeds_text": _view_text(view(claim, "seeds")),
            "examples_text": _view_text(view(claim, "examples")), "p_text": p_text(claim.get("p")),
            "p_holm_text": p_text(claim.get("p_holm")), "p_bh_text": p_is(claim.get("p_bh")),
            "ours_text": claim.get("ours") or " vs ".join(f"{m:.1f}" if isinstance(m, (int, float)) else "missing"
                                                          for m in claim.get("means") or []),
            "per_seed_table": _per_seed(claim),
            "test": test and {**test, "views_text": [(v.get("view"), _view_text(v)) for v in test.get("views") or []],
                              "p_holm_text": p_is(test.get("p_holm"))}}


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError as e:
        raise ReportError(f"{path}: expected JSON, found: {e}") from None


def write_report(out_dir: Path, profile_name: Optional[str] = None) -> Path:
    """results/<profile>/index.html, self-contained (inline CSS and script, images by relative path), and the
    forest plot it shows (claims.png, claims.svg). Written after claims.json and summary.json."""
    import jinja2

    out_dir = Path(out_dir)
    data = read_claims(out_dir)
    summary = _json(out_dir / "summary.json")
    provenance = summary.get("provenance") or {}
    profile_name = profile_name or Path(str(provenance.get("profile") or out_dir.name)).stem
    plotted = forest_plot(data["claims"], out_dir)
    tables = [{"name": name, **markdown_page((out_dir / f"{name}.md").read_text(encoding="utf-8"))}
              for name in PAGE_TABLES if (out_dir / f"{name}.md").is_file()]
    figures = [{"name": name, "title": markdown_page((out_dir / f"{name}.md").read_text(encoding="utf-8"))["title"]
                if (out_dir / f"{name}.md").is_file() else name} for name in PAGE_FIGURES
               if (out_dir / f"{name}.png").is_file()]
    shown = {f"{t['name']}.md" for t in tables}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    page = env.get_template("index.html.j2").render(
        profile=profile_name, description=provenance.get("description", ""), date=provenance.get("date", ""),
        commit=provenance.get("git_commit", ""), counts=data["summary"], rule=data["rule"],
        adjusted=data["adjusted"], plotted=len(plotted), claims=[_claim_row(c) for c in data["claims"]],
        families=[f for f, _ in grouped(data["claims"])],
        verdicts=list(dict.fromkeys(c.get("verdict", "not decidable") for c in data["claims"])),
        any_against=any(c.get("against_paper") for c in data["claims"]),
        tables=tables, figures=figures, colours=COLOURS,
        other_files=sorted(p.name for p in [*out_dir.glob("*.md"), *out_dir.glob("runs_made.tsv")]
                           if p.name not in shown),
        provenance=[(k, _flat(v)) for k, v in provenance.items()])
    write_atomic(out_dir / "index.html", page)
    return out_dir / "index.html"
