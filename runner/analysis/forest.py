"""The forest plot of the counted claims: one row per claim, its difference with an interval against a zero line (Lewis
& Clarke 2001, "Forest plots: trying to see the wood and the trees"), drawn twice from the same rows: as inline SVG
for index.html (forest_html: text stays text, the page's width decides the layout) and as claims.png/.svg for
claims.md (forest_plot, matplotlib).

Both encode the verdict by shape *and* colour, with the Okabe & Ito (2008) colour-blind-safe palette plus a neutral
grey (tests/runner/test_report.py simulates deuteranopia and protanopia on it), and draw each interval *corrected* as
the verdict is: at level 1 - 0.05 p / p_Holm, so that a bar is clear of zero exactly when the view's Holm-adjusted p
is below 0.05 (over seeds the t interval itself; over examples a normal approximation scaled from the bootstrap's 95 %
interval). The right of zero is always the paper's direction (the claims' differences are in the claim's contrast).
"""
import html
import io
import math
import re
from pathlib import Path
from typing import List, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.lines import Line2D  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402

from runner.records import write_atomic  # noqa: E402

FAMILIES = ("Table 1", "Table 2", "Table 3", "Figure 1", "word vectors", "Sec. 5.4", "probes")
# the unit of a family's differences: Sec. 5.4 counts epochs (runner/analysis/claims.py updates_claim), the rest metric
# points; one x-scale per unit, zero at the same place in both
UNIT = {"Sec. 5.4": "epochs"}
POINTS = "metric points (%)"
UNIT_LONG = {"epochs": "epochs (the baseline's best epoch − ELMo's epoch to reach that score)", POINTS: POINTS}
# Okabe & Ito (2008) blue, vermillion, orange; neutral greys for the undecided
COLOURS = {"supports": "#0072B2", "contradicts": "#D55E00", "leans against the paper": "#E69F00",
           "not decidable": "#949494", "not computable": "#C8C8C8"}
# shape per verdict, a path around (0, 0) of about 5 px radius; hollow ones drawn with a white fill
SHAPES = {"supports": ("M5,0A5,5 0 1,1 -5,0A5,5 0 1,1 5,0Z", False),  # circle
          "contradicts": ("M-4.5,-4.5H4.5V4.5H-4.5Z", False),  # square
          "leans against the paper": ("M0,-5.5L5.5,4.5H-5.5Z", False),  # triangle
          "not decidable": ("M0,-5.5L5.5,0L0,5.5L-5.5,0Z", True),  # hollow diamond
          "not computable": ("M-4,-4L4,4M4,-4L-4,4", True)}  # cross
MPL_MARKERS = {"supports": "o", "contradicts": "s", "leans against the paper": "^", "not decidable": "D",
               "not computable": "x"}
TASKS = {"squad": "SQuAD", "snli": "SNLI", "srl": "SRL", "coref": "Coref", "ner": "NER", "sst": "SST-5",
         "table5": "WSD", "table6": "POS"}
SYSTEMS = {"last_only": "top layer", "lambda=1": "all layers λ=1", "lambda=0.001": "all layers λ=0.001"}
Z95 = 1.959963984540054


# ---- claims -----------------------------------------------------------------------------------------------------

def view(claim: dict, name: str) -> Optional[dict]:
    return next((v for v in claim.get("views") or [] if v.get("view") == name), None)


def normalised(claim: dict) -> dict:
    """A claim of claims.json with the key its colour is drawn from (a not-decidable claim that leans against the
    paper has its own)."""
    claim = dict(claim)
    verdict = claim.get("verdict", "not decidable")
    claim["colour_key"] = "leans against the paper" if claim.get("against_paper") and verdict == "not decidable" \
        else verdict
    return claim


def grouped(claims: list) -> list:
    """[(family, [claims])] in the paper's order of families, others after them in the order met."""
    order = list(FAMILIES) + [f for f in dict.fromkeys(c["family"] for c in claims) if f not in FAMILIES]
    return [(f, [c for c in claims if c["family"] == f]) for f in order if any(c["family"] == f for c in claims)]


def unit_of(family: str) -> str:
    return UNIT.get(family, POINTS)


def row_label(claim: dict) -> str:
    """The claim in words: task, contrast (plus term minus minus term), the share of the training data."""
    task = TASKS.get(claim.get("task"), claim.get("task") or "")
    text = claim.get("text") or claim.get("id", "?")
    terms = claim.get("terms") or []
    shares = re.findall(r"(\d+(?:\.\d+)? ?%)", text)
    if len(terms) == 4 and len(shares) >= 2:
        return f"{task}: gain at {shares[0]} − gain at {shares[1]} of the data"
    if len(terms) == 2:
        plus, minus = (SYSTEMS.get(t[1][2], t[1][2]) for t in terms)
        where = f", {shares[0]} of the data" if terms[0][1][3] is not None and shares else ""
        return f"{task}: {plus} − {minus}{where}"
    if claim.get("family") == "Sec. 5.4" or str(claim.get("id", "")).startswith("sec5.4."):
        return f"{task}: epochs saved, baseline − ELMo"
    text = re.sub(r"^[^:]{1,20}: ", "", text)
    return f"{task}: {text}" if task and task.lower() not in text.lower() else text


def p_text(p) -> str:
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_is(p) -> str:
    """"p = 0.052", "p < 0.001"."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def num(x: float, digits: int = 2) -> str:
    """+1.23 / −1.23 with a true minus sign."""
    return f"{x:+.{digits}f}".replace("-", "−")


# ---- what a row draws -------------------------------------------------------------------------------------------

def corrected_interval(v: dict) -> Optional[list]:
    """The view's interval at level 1 - 0.05 p / p_Holm (clear of zero exactly when p_Holm < 0.05); its 95 % one
    when it carries no adjusted p."""
    ci, p, p_holm = v.get("ci"), v.get("p"), v.get("p_holm")
    if not ci or p is None or p_holm is None or p <= 0 or p_holm <= p:
        return ci
    alpha = 0.05 * p / min(p_holm, 1.0)
    diff = v.get("diff", (ci[0] + ci[1]) / 2)
    if v.get("view") == "seeds" and v.get("std") is not None and (v.get("n") or 0) >= 2:
        half = scipy_stats.t.ppf(1 - alpha / 2, v["n"] - 1) * v["std"] / math.sqrt(v["n"])
        return [diff - half, diff + half]
    scale = scipy_stats.norm.ppf(1 - alpha / 2) / Z95
    return [diff - (diff - ci[0]) * scale, diff + (ci[1] - diff) * scale]


def deciding_view(views: list, required) -> Optional[dict]:
    """The required view with the largest (Holm) p: the one the verdict rests on; else the first with a difference."""
    usable = [v for v in views if isinstance(v.get("diff"), (int, float))]
    needed = [v for v in usable if not required or v.get("view") in required]
    with_p = [v for v in needed if v.get("p") is not None]
    if with_p:
        return max(with_p, key=lambda v: (v.get("p_holm") if v.get("p_holm") is not None else v["p"]))
    return (needed or usable or [None])[0]


def lines_of(claim: dict) -> list:
    """[{split, verdict, diff, ci95, ci, p_holm, p}] for the claim's split and, if it has one, its test twin."""
    out = []
    for split, part, verdict in ((claim.get("split") or "dev", claim, claim["colour_key"]),
                                 ("test", claim.get("test_view"), (claim.get("test_view") or {}).get("verdict"))):
        if not part or (part is not claim and claim.get("split") == "test"):
            continue
        v = deciding_view(part.get("views") or [], claim.get("required"))
        out.append({"split": split, "verdict": verdict or "not decidable", "view": v,
                    "diff": v and v.get("diff"), "ci95": v and v.get("ci"), "ci": v and corrected_interval(v),
                    "p_holm": part.get("p_holm"), "p": part.get("p")})
    return out


def scales(groups: list) -> dict:
    """unit -> (lo, hi): one x-scale per unit, padded, zero at the same fraction of the width in every scale; an
    interval past 2.5 times the largest point is cut (an arrowhead at the cut)."""
    spans = {}
    for family, rows in groups:
        unit = unit_of(family)
        points = [abs(x) for c in rows for x in [c.get("paper_diff")] + [ln["diff"] for ln in lines_of(c)]
                  if isinstance(x, (int, float))]
        bound = 2.5 * max(points + [0.5])
        lo, hi, old_bound = spans.get(unit, (0.0, 0.0, 0.0))
        bound = max(bound, old_bound)
        for c in rows:
            for ln in lines_of(c):
                for x in (ln["ci"] or []) + [ln["diff"], c.get("paper_diff")]:
                    if isinstance(x, (int, float)):
                        lo, hi = min(lo, max(x, -bound)), max(hi, min(x, bound))
        spans[unit] = (lo, hi, bound)
    zero = min(0.6, max([0.12] + [-lo / (hi - lo) for lo, hi, _ in spans.values() if hi > lo]))
    out = {}
    for unit, (lo, hi, bound) in spans.items():
        width = max(-lo / zero, hi / (1 - zero), 1.0) * 1.06
        out[unit] = (-zero * width, (1 - zero) * width, bound)
    return out


def ticks(lo: float, hi: float) -> list:
    step = 10 ** math.floor(math.log10((hi - lo) / 5))
    step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 7)
    return [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


# ---- inline SVG for the page ------------------------------------------------------------------------------------

def symbol_defs() -> str:
    """The shapes, once per page (<use href="#shape-...">)."""
    paths = "".join(f'<path id="shape-{key.replace(" ", "-")}" d="{d}"/>' for key, (d, _) in SHAPES.items())
    return (f'<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>{paths}'
            '<path id="shape-cut-right" d="M0,-4L6,0L0,4Z"/><path id="shape-cut-left" d="M0,-4L-6,0L0,4Z"/>'
            "</defs></svg>")


def mark(verdict: str, x: str, y: float, title: str = "") -> str:
    _, hollow = SHAPES.get(verdict, SHAPES["not decidable"])
    colour = COLOURS.get(verdict, COLOURS["not decidable"])
    fill = "#fff" if hollow else colour
    tip = f"<title>{html.escape(title)}</title>" if title else ""
    return (f'<use href="#shape-{verdict.replace(" ", "-")}" x="{x}" y="{y}" fill="{fill}" stroke="{colour}" '
            f'stroke-width="{2 if hollow else 1}">{tip}</use>')


def legend_html() -> str:
    """The legend's items as inline SVG + text (shared by the plot's caption and the tiles)."""
    items = [f'<span class="key">{swatch(v)} {html.escape(v)}</span>' for v in COLOURS]
    items.append('<span class="key"><svg width="14" height="16" aria-hidden="true"><line x1="7" x2="7" y1="1" '
                 'y2="15" stroke="#000" stroke-width="2.5"/></svg> the paper\'s difference</span>')
    return "".join(items)


def swatch(verdict: str) -> str:
    return f'<svg class="swatch" width="14" height="14" aria-hidden="true">{mark(verdict, "7", 7)}</svg>'


def _strip(claim: dict, scale: tuple, lines: list) -> str:
    lo, hi, bound = scale
    pct = lambda x: f"{100 * (x - lo) / (hi - lo):.2f}%"  # noqa: E731
    height = 16 * len(lines) + 4
    parts = [f'<svg class="strip" width="100%" height="{height}" role="img" '
             f'aria-label="{html.escape(row_label(claim))}">']
    parts += [f'<line x1="{pct(t)}" x2="{pct(t)}" y1="0" y2="{height}" class="grid"/>' for t in ticks(lo, hi) if t]
    parts.append(f'<line x1="{pct(0)}" x2="{pct(0)}" y1="0" y2="{height}" class="zero"/>')
    if isinstance(claim.get("paper_diff"), (int, float)):
        parts.append(f'<line x1="{pct(claim["paper_diff"])}" x2="{pct(claim["paper_diff"])}" y1="1" '
                     f'y2="{height - 1}" class="paper"><title>the paper: {num(claim["paper_diff"], 1)}</title></line>')
    for i, ln in enumerate(lines):
        y = 10 + 16 * i
        colour = COLOURS.get(ln["verdict"], COLOURS["not decidable"])
        if ln["ci"]:
            a, b = max(ln["ci"][0], -bound, lo), min(ln["ci"][1], bound, hi)
            dash = ' stroke-dasharray="5 3"' if ln["split"] == "test" and claim.get("split") != "test" else ""
            parts.append(f'<line x1="{pct(a)}" x2="{pct(b)}" y1="{y}" y2="{y}" stroke="{colour}" '
                         f'stroke-width="2.5"{dash}/>')
            for cut, x, head in ((ln["ci"][0] < a, a, "left"), (ln["ci"][1] > b, b, "right")):
                if cut:
                    parts.append(f'<use href="#shape-cut-{head}" x="{pct(x)}" y="{y}" fill="{colour}"/>')
        if isinstance(ln["diff"], (int, float)):
            parts.append(mark(ln["verdict"], pct(min(max(ln["diff"], lo), hi)), y,
                              f"{ln['split']}: {ln['verdict']}, {num(ln['diff'])}"))
    return "".join(parts) + "</svg>"


def _row(claim: dict, scale: tuple, adjusted: bool, where: str) -> str:
    lines = lines_of(claim)
    test = (claim.get("test_view") or {})
    texts, ps = [], []
    for ln in lines:
        ci = f" [{num(ln['ci95'][0])}, {num(ln['ci95'][1])}]" if ln["ci95"] else ""
        value = f"{num(ln['diff'])}{ci}" if isinstance(ln["diff"], (int, float)) else "—"
        texts.append(f'<span class="split">{ln["split"]}</span> {value}')
        p = ln["p_holm"] if adjusted else ln["p"]
        ps.append(f'<span class="v-{ln["verdict"].replace(" ", "-")}">{p_text(p)}</span>')
    attrs = (f'data-claim="{html.escape(claim["id"])}" data-verdict="{html.escape(claim.get("verdict", ""))}" '
             f'data-family="{html.escape(claim["family"])}" data-counted="1" '
             f'data-against="{1 if claim.get("against_paper") else 0}" '
             f'data-differs="{1 if test.get("differs") else 0}" '
             f'data-test-verdict="{html.escape(test.get("verdict") or "")}"')
    return (f'<div class="f-row {where}" {attrs}><a class="f-label" href="#claim-{html.escape(claim["id"])}" '
            f'title="{html.escape(claim["id"])}: {html.escape(claim.get("text", ""))}">{html.escape(row_label(claim))}'
            f'</a>{_strip(claim, scale, lines)}<span class="f-num">{"<br>".join(texts)}</span>'
            f'<span class="f-p">{"<br>".join(ps)}</span></div>')


def _axis(unit: str, scale: tuple, adjusted: bool) -> str:
    lo, hi, _ = scale
    pct = lambda x: f"{100 * (x - lo) / (hi - lo):.2f}%"  # noqa: E731
    anchor = lambda t: "start" if t - lo < 0.04 * (hi - lo) else "end" if hi - t < 0.04 * (hi - lo) else "middle"  # noqa: E731
    marks = ticks(lo, hi)
    digits = max(0, -math.floor(math.log10(marks[1] - marks[0]) + 1e-9)) if len(marks) > 1 else 0
    labels = "".join(f'<text x="{pct(t)}" y="12" text-anchor="{anchor(t)}">{num(t, digits) if t else "0"}</text>'
                     for t in marks)
    return (f'<div class="f-axis"><span class="f-label">difference in {html.escape(UNIT_LONG[unit])}</span>'
            f'<svg class="strip axis" width="100%" height="30">{labels}'
            f'<text x="{pct(0)}" y="27" text-anchor="end" class="dir">← opposite&#160;</text>'
            f'<text x="{pct(0)}" y="27" class="dir">&#160;the paper\'s direction →</text></svg>'
            f'<span class="f-num">difference [95 % interval]</span>'
            f'<span class="f-p">{"p (Holm)" if adjusted else "p"}</span></div>')


def forest_html(claims: list, adjusted: bool) -> dict:
    """{"html": the plot as HTML rows with one inline SVG strip each, "rows": the claim ids drawn in their family
    panels}: counted claims only; first, when there are any, the claims whose dev and test verdicts differ."""
    groups = grouped([c for c in claims if c["counted"]])
    if not groups:
        return {"html": "<p>No counted claim in this profile.</p>", "rows": []}
    scale = scales(groups)
    parts, axes_done = [symbol_defs(), '<div class="forest" id="forest-plot">'], set()
    differs = [c for _, rows in groups for c in rows if (c.get("test_view") or {}).get("differs")]
    if differs:
        unit = unit_of(differs[0]["family"])
        parts.append(_axis(unit, scale[unit], adjusted))
        axes_done.add(unit)
        parts.append(f'<h3 class="f-family" id="forest-differs">Dev and test disagree ({len(differs)}): '
                     "the dev verdict (solid bar) and the test split's (dashed)</h3>")
        parts += [_row(c, scale[unit_of(c["family"])], adjusted, "f-highlight") for c in differs]
    for family, rows in groups:
        unit = unit_of(family)
        if unit not in axes_done:
            parts.append(_axis(unit, scale[unit], adjusted))
            axes_done.add(unit)
        splits = sorted({c.get("split") or "dev" for c in rows})
        twins = " and its test twin" if any(c.get("test_view") for c in rows) else ""
        parts.append(f'<h3 class="f-family">{html.escape(family)} <small>({", ".join(splits)}{twins})</small></h3>')
        parts += [_row(c, scale[unit], adjusted, "") for c in rows]
    parts.append("</div>")
    return {"html": "".join(parts), "rows": [c["id"] for _, rows in groups for c in rows]}


# ---- claims.png / claims.svg ------------------------------------------------------------------------------------

def _panel(ax, family: str, rows: list, adjusted: bool, scale: tuple) -> None:
    lo, hi, bound = scale
    for y, claim in enumerate(rows):
        if y % 2:
            ax.axhspan(y - 0.5, y + 0.5, color="#f3f3f3", zorder=0, clip_on=False)  # unclipped: stable SVG ids
        lines = lines_of(claim)
        for i, ln in enumerate(lines):
            dy = (i - (len(lines) - 1) / 2) * 0.34
            colour = COLOURS.get(ln["verdict"], COLOURS["not decidable"])
            if ln["ci"]:
                a, b = max(ln["ci"][0], -bound, lo), min(ln["ci"][1], bound, hi)
                ax.plot([a, b], [y + dy] * 2, color=colour, lw=1.8, zorder=2,
                        ls="--" if ln["split"] == "test" and claim.get("split") != "test" else "-")
            if isinstance(ln["diff"], (int, float)):
                marker = MPL_MARKERS.get(ln["verdict"], "D")
                hollow = SHAPES.get(ln["verdict"], SHAPES["not decidable"])[1]
                ax.plot([min(max(ln["diff"], lo), hi)], [y + dy], marker=marker, color=colour, ms=6, zorder=4,
                        mfc="white" if hollow and marker != "x" else colour, mew=1.5,
                        gid=f"claim-row-{claim['id']}-{ln['split']}")
        if isinstance(claim.get("paper_diff"), (int, float)):
            ax.plot([claim["paper_diff"]] * 2, [y - 0.42, y + 0.42], color="black", lw=2, zorder=5)
        text = "  ".join(f"{ln['split']} {num(ln['diff']) if isinstance(ln['diff'], (int, float)) else '—'}"
                         f" p {p_text(ln['p_holm'] if adjusted else ln['p'])}" for ln in lines)
        ax.text(1.01, y, text, transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=7.5)
    ax.set_xlim(lo, hi)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.axvline(0, color="black", lw=0.9, zorder=1.8)
    ax.set_yticks(range(len(rows)), [row_label(c) for c in rows], fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_title(f"{family}: difference in {unit_of(family)}, the paper's direction to the right", fontsize=9,
                 loc="left")
    ax.text(1.01, -0.5, "difference, p (Holm)" if adjusted else "difference, p", transform=ax.get_yaxis_transform(),
            va="bottom", ha="left", fontsize=8, weight="bold")


def _figure(groups: list, adjusted: bool):
    if not groups:
        fig, ax = plt.subplots(figsize=(7, 1.2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no counted claim in this profile", ha="center", va="center")
        return fig
    scale = scales(groups)
    heights = [len(rows) + 1.4 for _, rows in groups]  # a panel's title and axis take about 1.4 rows
    fig, axes = plt.subplots(len(groups), 1, figsize=(11, 0.3 * sum(heights) + 1.1), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    for ax, (family, rows) in zip(axes[:, 0], groups):
        _panel(ax, family, rows, adjusted, scale[unit_of(family)])
    claims = [c for _, rows in groups for c in rows]
    drawn = {ln["verdict"] for c in claims for ln in lines_of(c)}
    handles = [Line2D([], [], marker=MPL_MARKERS[v], color=c, lw=0, ms=7, label=v,
                      mfc="white" if SHAPES[v][1] and v != "not computable" else c)
               for v, c in COLOURS.items() if v in drawn]
    handles.append(Line2D([], [], color="#444444", lw=1.8, label="dev (or the claim's split)"))
    if any(c.get("test_view") and c.get("split") != "test" for c in claims):
        handles.append(Line2D([], [], color="#444444", lw=1.8, ls="--", label="its test twin"))
    if any(isinstance(c.get("paper_diff"), (int, float)) for c in claims):
        handles.append(Line2D([], [], marker="|", color="black", lw=0, ms=10, mew=2, label="the paper's difference"))
    fig.legend(handles=handles, loc="outside upper center", ncol=5, fontsize=8, frameon=False,
               title=("bars: intervals corrected as the verdict is (level 1 − 0.05·p/p_Holm; clear of zero exactly "
                      "when p_Holm < 0.05)" if adjusted else "bars: 95 % intervals (no adjusted p in this file)"),
               title_fontsize=8)
    return fig


def forest_plot(claims: list, out_dir: Path) -> List[str]:
    """claims.png and claims.svg in out_dir: one row per counted claim, grouped by family, the view the verdict rests
    on with its corrected interval, its test twin dashed, zero, the paper's difference (a black tick), shape and colour
    by verdict. Returns the ids of the rows drawn, top to bottom."""
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
