"""The verdicts at a glance: index.html, one static page per profile (the finding in one sentence, the verdict counts
as filters, the forest plot inline, the tables, the figures with captions, every claim, the provenance), and the
forest plot's files claims.png/.svg (runner/analysis/forest.py).

Reads only what the table build already wrote in results/<profile>/: claims.json, summary.json, tableN.md,
figureN.png. A claims.json of an earlier version (no families, no counts) is refused in one line that says how to
build it again (``--build-only``). The page is offline: inline CSS, SVG
and script, images by relative path. With ``#measure`` in its URL its script writes layout measurements into the page
(tests/runner/test_page_browser.py reads them back from headless Chromium).
"""
import html
import json
import re
from pathlib import Path
from typing import Optional

import jinja2

from runner.analysis.forest import (
    COLOURS,
    forest_html,
    forest_markdown_line,
    forest_plot,
    grouped,
    legend_html,
    normalised,
    num,
    p_is,
    p_text,
    row_label,
    swatch,
    view,
)
from runner.records import write_atomic

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE_TABLES = ("table1", "table2", "table3", "table4", "table5", "table6", "word_vectors")
PAGE_FIGURES = ("figure1", "figure2")
__all__ = ["ReportError", "forest_markdown_line", "forest_plot", "markdown_page", "write_report"]  # re-exported


class ReportError(ValueError):
    """A results file the page cannot be made from: the message names the file, what was expected and found."""


def read_claims(out_dir: Path) -> dict:
    """claims.json as {"summary", "rule", "claims", "sensitivity"} with every claim normalised; ReportError names a
    bad file."""
    path = Path(out_dir) / "claims.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: expected the claims file the table build writes (JSON), found: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ReportError(f"{path}: key 'claims': expected a list of claims, found "
                          f"{type(data.get('claims') if isinstance(data, dict) else data).__name__}")
    again = "build it again with python -m runner --profile NAME --build-only"
    no_summary = [] if "summary" in data else ["summary"]
    for claim in data["claims"]:  # the current format only (an earlier one is built again, never guessed at)
        keys = sorted(claim) if isinstance(claim, dict) else []
        missing = [k for k in ("id", "family", "counted", "verdict") if k not in keys] + no_summary
        if missing:
            raise ReportError(f"{path}: claim {claim.get('id', '?') if keys else '?'}: expected the keys "
                              f"{', '.join(missing)} of the current claims file, found "
                              f"{', '.join(keys) or type(claim).__name__}: {again}")
    if no_summary:  # (no claim to name: a profile with none)
        raise ReportError(f"{path}: expected the key summary of the current claims file, found "
                          f"{', '.join(sorted(data))}: {again}")
    claims = [normalised(c) for c in data["claims"]]
    return {"summary": data["summary"], "rule": data.get("rule"), "claims": claims,
            "sensitivity": data.get("sensitivity"), "adjusted": any(c.get("p_holm") is not None for c in claims)}


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


TILE_FILTERS = {"claims": "all", "counted": "counted", "leans against the paper": "against",
                "differs on test": "differs"}


def tiles(summary: dict) -> list:
    """The summary's counts as tiles, each with the filter that shows its rows (verdict counts are over the counted
    claims, so are their filters: a claim not counted, the same evidence as another, is in no verdict tile)."""
    out = []
    for key, value in summary.items():
        target = TILE_FILTERS.get(key) or (f"verdict:{key}" if key in COLOURS else None)
        out.append({"key": key, "value": value, "filter": target, "colour": COLOURS.get(key),
                    "swatch": swatch(key) if key in COLOURS else ""})
    return out


def _scale(description: str) -> str:
    """The description's first clause (to its first ':' or ';' outside brackets), at most ~150 characters."""
    depth, cut = 0, len(description)
    for i, ch in enumerate(description):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and ch in ":;" or i >= 150 and ch == " ":
            cut = i
            break
    head = description[:cut].rstrip(" ,.")
    return head[:1].lower() + head[1:] if head[:2] != head[:2].upper() else head


def _span(seeds: list) -> str:
    seeds = sorted(seeds)
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def stamp(profile: str, provenance: dict, claims: list) -> list:
    """The scale stamp: profile, seeds, runs, hardware, when and at which commit."""
    declared = sorted({s for c in claims for s in c.get("seeds_declared") or []})
    later = sorted({s for c in claims for s in c.get("seeds_added_later") or []})
    runs = re.match(r"(\d[\d,]*) runs?", str(provenance.get("runs_made") or ""))
    hardware = re.sub(r" \([^)]*\)", "", str(provenance.get("hardware") or "")).split(", torch")[0]
    return [x for x in (f"profile {profile}", declared and f"{len(declared)} seeds ({_span(declared)})",
                        later and f"seeds {_span(later)} added later, shown apart", runs and f"{runs.group(1)} runs",
                        hardware, provenance.get("date") and f"built {str(provenance['date'])[:10]}",
                        provenance.get("git_commit") and f"commit {provenance['git_commit']}") if x]


def finding(profile: str, description: str, summary: dict, claims: list, adjusted: bool) -> str:
    """One sentence: what was reproduced at which scale, the verdict counts, where the test split turns against."""
    counted = [c for c in claims if c["counted"]]
    n = summary.get("counted", len(counted))
    parts = [f"{summary.get(v, 0)} {word}" for v, word in (("supports", "supported"), ("contradicts", "contradicted"),
                                                           ("not decidable", "not decidable at this scale"),
                                                           ("not computable", "not computable")) if
             v in summary and (summary[v] or v != "not computable")]
    scale = _scale(description) if description else "this profile's scale"
    text = (f"Profile <code>{html.escape(profile)}</code> ({html.escape(scale)}) reproduces ELMo (Peters et al., "
            f"2018): of the paper's {n} claims tested, " + ", ".join(parts[:-1]) +
            (" and " if len(parts) > 1 else "") + parts[-1])
    differs = [c for c in counted if (c.get("test_view") or {}).get("differs")]
    against = [c for c in differs if c["test_view"].get("verdict") == "contradicts"]
    if differs:
        text += f"; {len(differs)} dev verdict{'s differ' if len(differs) > 1 else ' differs'} on the test split"
    if against:
        which = " and ".join(f"<a href=\"#claim-{html.escape(c['id'])}\"><strong>{html.escape(row_label(c))}"
                             f"</strong></a> (Holm {p_is(c['test_view'].get('p_holm'))})" for c in against)
        text += f", where {which} <strong class=\"v-contradicts\">contradicts the paper</strong>"
    leaning = [c for c in counted if c.get("against_paper") and c not in against]
    if leaning:
        text += f"; {len(leaning)} more lean{'s' if len(leaning) == 1 else ''} against it"
    return text + "."


def _contrast(claim: dict) -> Optional[str]:
    label = row_label(claim)
    return label.split(": ", 1)[1] if ": " in label else None


def paper_form(claim: dict) -> str:
    """The paper's numbers as 'plus − minus = difference', like ours."""
    paper, diff = str(claim.get("paper") or ""), claim.get("paper_diff")
    if not isinstance(diff, (int, float)):
        return html.escape(paper) or "—"
    extra = re.search(r"relative error reduction [\d.]+ ?%", paper)
    extra = f"<br><small>{extra.group(0)}</small>" if extra else ""
    arrow = re.match(r"\s*([\d.]+)\s*→\s*([\d.]+)", paper)  # baseline → ELMo
    versus = re.match(r"\s*([\d.]+)\s*vs\.?\s*([\d.]+)", paper)  # plus vs minus
    pair = (arrow.group(2), arrow.group(1)) if arrow else (versus.group(1), versus.group(2)) if versus else None
    if pair and abs(float(pair[0]) - float(pair[1]) - diff) < 0.051:
        return f"{pair[0]} − {pair[1]} = <b>{num(diff, 1)}</b>{extra}"
    return f"<b>{num(diff, 1)}</b>{extra}<br><small>{html.escape(paper)}</small>"


def ours_form(part: dict, ours: str = "") -> str:
    """Our means as 'plus − minus = difference' ((a − b) − (c − d) for a difference of gains)."""
    means, diff = part.get("means") or [], part.get("diff")
    if diff is None:  # a claim of views only (the probes'): the first view's
        diff = next((v["diff"] for v in part.get("views") or [] if isinstance(v.get("diff"), (int, float))), None)
    if not isinstance(diff, (int, float)):
        return "—"
    if len(means) == 2 and all(isinstance(m, (int, float)) for m in means):
        return f"{means[0]:.1f} − {means[1]:.1f} = <b>{num(diff)}</b>"
    if len(means) == 4 and all(isinstance(m, (int, float)) for m in means):
        return (f"({means[0]:.1f} − {means[1]:.1f}) − ({means[2]:.1f} − {means[3]:.1f}) = <b>{num(diff)}</b>")
    versus = re.match(r"\s*([\d.]+)\s*vs\.?\s*([\d.]+)\s*$", ours or "")
    if versus:
        return f"{versus.group(1)} − {versus.group(2)} = <b>{num(diff)}</b>"
    return f"<b>{num(diff)}</b>" + (f"<br><small>{html.escape(ours)}</small>" if ours else "")


def size_text(claim: dict) -> str:
    size = claim.get("paper_size")
    if not size:
        return html.escape(claim.get("paper_size_note") or "—")
    paper = num(size["paper_diff"], 1)
    if size.get("consistent") is None:
        return f"— (no 95 % interval to hold the paper's {paper})"
    if size["consistent"]:
        return f"consistent: the paper's {paper} inside every 95 % interval"
    ours = f" (ours {size['ours']})" if size.get("ours") else ""
    return (f"<strong>not consistent</strong>{html.escape(ours)}: the paper's {paper} outside "
            + html.escape(", ".join(size.get("outside") or [])))


def seeds_needed_text(claim: dict) -> str:
    if not claim.get("seeds_needed"):
        return ""
    low, high = (list(claim.get("seeds_needed_range") or []) + [None, None])[:2]
    span = re.search(r"(\d+\s*[–-]\s*(?:more than )?\d+) over the 95 %", str(claim.get("seeds_needed_why") or ""))
    span = span.group(1) if span else (f"{low}–{high}" if low and high else f"{low} or more" if low else "")
    return f"~{claim['seeds_needed']} seeds would decide it" + (f" (range {span})" if span else "")


def _view_text(v: Optional[dict]) -> str:
    """One view in the claims table: difference [interval], p (Holm) — or why it is missing."""
    if not v:
        return "—"
    if v.get("p") is None:
        return "— " + str(v.get("unavailable", "not computed"))
    ci = f" [{num(v['ci'][0])}, {num(v['ci'][1])}]" if v.get("ci") else ""
    holm = f" (Holm: {p_is(v['p_holm'])})" if v.get("p_holm") is not None else ""
    n = f"{v['n']:,} {v.get('units', 'seeds' if v.get('view') == 'seeds' else 'units')}: " if v.get("n") else ""
    return f"{n}{num(v['diff'])}{ci}, {p_is(v['p'])}{holm}"


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
            "same_evidence_as": None, "seeds_declared": None, "seeds_added_later": None}


def claim_row(claim: dict) -> dict:
    test = claim.get("test_view") or None
    return {**OPTIONAL, **claim, "label": row_label(claim), "seeds_text": _view_text(view(claim, "seeds")),
            "examples_text": _view_text(view(claim, "examples")), "p_text": p_text(claim.get("p")),
            "p_holm_text": p_text(claim.get("p_holm")), "p_bh_text": p_is(claim.get("p_bh")),
            "paper_form": paper_form(claim), "ours_form": ours_form(claim, claim.get("ours") or ""),
            "size": size_text(claim), "needed": seeds_needed_text(claim), "swatch": swatch(claim["colour_key"]),
            "per_seed_table": _per_seed(claim),
            "test": test and {**test, "views_text": [(v.get("view"), _view_text(v)) for v in test.get("views") or []],
                              "p_holm_text": p_is(test.get("p_holm")), "ours_form": ours_form(test),
                              "swatch": swatch(test.get("verdict") or "not decidable")}}


CAPTIONS = {
    "figure1": "Dev metric in % (y) against the share of the task's training set (x, log scale), baseline and ELMo "
               "per task; each point the mean over the finished seeds ({seeds} declared for its claims), error bars "
               "± one sample standard deviation over the seeds (a spread, not a confidence interval). The paired "
               "tests of these points are the Figure 1 rows of the plot above.",
    "figure2": "The softmax-normalised weights each task model learnt for the biLM's layers (layer 0 the token layer, "
               "1 and 2 the LSTM layers), per placement of ELMo (input, output), averaged over the runs that have "
               "them (the table's 'runs'); no interval.",
}


def figures(out_dir: Path, claims: list) -> list:
    out = []
    for name in PAGE_FIGURES:
        if not (out_dir / f"{name}.png").is_file():
            continue
        md = out_dir / f"{name}.md"
        title = markdown_page(md.read_text(encoding="utf-8"))["title"] if md.is_file() else name
        seeds = sorted({s for c in claims if c["id"].startswith(name + ".") for s in c.get("seeds_declared") or []})
        caption = CAPTIONS.get(name, "").format(seeds=f"{len(seeds)} seeds ({_span(seeds)})" if seeds else "the seeds")
        out.append({"name": name, "title": title, "caption": caption, "md": md.is_file()})
    return out


def sensitivity(data: Optional[dict], claims: list) -> Optional[dict]:
    if not data:
        return None
    labels = {c["id"]: row_label(c) for c in claims}
    return {"label": data.get("label", ""), "declared": data.get("declared") or {}, "not_run": data.get("not_run"),
            "alternatives": [{**a, "changed": [(labels.get(x["id"], x["id"]), x["verdict"], x["would_be"])
                                               for x in a.get("changed") or []]}
                             for a in data.get("alternatives") or []]}


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError as e:
        raise ReportError(f"{path}: expected JSON, found: {e}") from None


def write_report(out_dir: Path, profile_name: Optional[str] = None) -> Path:
    """results/<profile>/index.html, self-contained (inline CSS, SVG and script, images by relative path), and the
    forest plot's files (claims.png, claims.svg). Written after claims.json and summary.json."""
    out_dir = Path(out_dir)
    data = read_claims(out_dir)
    summary = _json(out_dir / "summary.json")
    provenance = summary.get("provenance") or {}
    profile_name = profile_name or Path(str(provenance.get("profile") or out_dir.name)).stem
    forest_plot(data["claims"], out_dir)
    claims = data["claims"]
    ordered = [c for _, rows in grouped(claims) for c in rows]
    tables = [{"name": name, **markdown_page((out_dir / f"{name}.md").read_text(encoding="utf-8"))}
              for name in PAGE_TABLES if (out_dir / f"{name}.md").is_file()]
    shown = {f"{t['name']}.md" for t in tables}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    page = env.get_template("index.html.j2").render(
        profile=profile_name, description=provenance.get("description", ""), counts=data["summary"],
        finding=finding(profile_name, provenance.get("description", ""), data["summary"], claims, data["adjusted"]),
        stamp=stamp(profile_name, provenance, claims), tiles=tiles(data["summary"]),
        rule=inline(data["rule"]) if data["rule"] else "", adjusted=data["adjusted"],
        forest=forest_html(claims, data["adjusted"]), legend=legend_html(),
        claims=[claim_row(c) for c in ordered], families=[(f, len(rows)) for f, rows in grouped(claims)],
        sensitivity=sensitivity(data["sensitivity"], claims), tables=tables, figures=figures(out_dir, claims),
        colours=COLOURS,
        other_files=sorted(p.name for p in [*out_dir.glob("*.md"), *out_dir.glob("runs_made.tsv")]
                           if p.name not in shown),
        provenance=[(k, _flat(v)) for k, v in provenance.items()])
    write_atomic(out_dir / "index.html", page)
    return out_dir / "index.html"
