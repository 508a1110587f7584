"""The verdicts at a glance (runner/analysis/page.py, runner/analysis/forest.py): the forest plot (inline SVG in the
page, claims.png/.svg) and the static page index.html, made from a fabricated profile directory (claims.json in the
current schema and in the older one, summary.json, table1.md, a figure); its structure, read from the HTML. The page in
headless Chromium: tests/runner/test_page_browser.py."""
import html
import itertools
import json
import math
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runner.analysis import forest
from runner.analysis.page import ReportError, forest_markdown_line, forest_plot, markdown_page, write_report

TABLE1_MD = """# Table 1: test-set performance of the baseline and the baseline + ELMo

- **command**: python -m runner --profile fabricated
- **data**:
  - srl: TRAIN_PATH=../shared/data/srl/train
- **git_commit**: abc1234

| task | baseline (ours) | baseline (paper) | ELMo (ours) | ELMo (paper) |
|---|---|---|---|---|
| srl | 51.8 ± 0.6 | 81.4 | 60.8 ± 0.4 † [1] | 84.6 |
| ner | 86.03 ± 0.47 | 90.15 | <script>alert(1)</script> | 92.22 |

- [1] srl/ELMo: still improving at the epoch cap

Ours: test metric in %, **mean** ± sample std; see [claims.md](claims.md).

## The same runs on dev

| task | baseline | ELMo |
|---|---|---|
| srl | 53.0 ± 0.6 | 61.0 ± 0.2 |
"""


def seeds_view(diff, ci=(1.0, 3.0), p=0.01, **extra):
    return {"view": "seeds", "diff": diff, "ci": list(ci) if ci else None, "p": p, "p_holm": p * 2, "p_bh": p * 1.5,
            "n": 3, "seeds": [1, 2, 3], "values": [diff - 0.5, diff, diff + 0.5], **extra}


def examples_view(diff, ci=(1.5, 2.5), p=0.0002, units="predicates"):
    return {"view": "examples", "diff": diff, "ci": list(ci) if ci else None, "p": p, "p_holm": p * 3,
            "p_bh": p * 2, "n": 438, "units": units}


def terms(cid, plus="ELMo", minus="baseline", point=None):
    sweep, task = cid.split(".")[:2]
    return [[1, [sweep, task, plus, point]], [-1, [sweep, task, minus, point]]]


def claim(cid, family, verdict="supports", diff=2.0, views=None, **extra):
    views = views if views is not None else [seeds_view(diff), examples_view(diff)]
    extra.setdefault("terms", terms(cid))
    ps = [v["p"] for v in views if v.get("p") is not None]
    task = cid.split(".")[2] if cid.startswith("sec5.4.") else cid.split(".")[1]
    return {"id": cid, "family": family, "section": f"{family} (Sec. 4)", "task": task,
            "text": f"the claim {cid}", "paper": "81.4 → 84.6 (+3.2)", "paper_diff": 3.2, "ours": "51.8 → 60.8",
            "split": "dev", "means": [60.8, 51.8], "seeds": [1, 2, 3], "views": views, "p": max(ps) if ps else None,
            "p_holm": 0.03, "p_bh": 0.02, "adjustment": "Holm within family", "verdict": verdict, "why": "because",
            "counted": True, "same_evidence_as": None, "seeds_declared": [1, 2, 3], "seeds_added_later": [],
            "test_view": None, "against_paper": False, "seeds_needed": None, "seeds_needed_why": "",
            "per_seed": {"ELMo": {"1": 60.5, "2": 60.8, "3": 61.1}, "baseline": {"1": 51.0, "2": 51.8, "3": 52.6}},
            **extra}


def fabricated_claims() -> list:
    return [
        claim("table1.srl", "Table 1", split="test", test_view={
            "split": "test", "diff": 9.0, "views": [seeds_view(9.0), examples_view(9.1)], "p": 0.01,
            "p_holm": 0.02, "verdict": "supports", "differs": False}),
        claim("table1.sst", "Table 1", "not decidable", 0.2, against_paper=True, paper_diff=None,
              views=[seeds_view(0.2, (-0.5, 0.9), 0.4), examples_view(0.2, (-1.2, 1.5), 0.8)]),
        claim("table2.srl.lambda=0.001>baseline", "Table 2", diff=8.0, terms=terms("table2.srl", "lambda=0.001")),
        claim("table2.srl.lambda=1>baseline", "Table 2", diff=8.1, counted=False,
              same_evidence_as="table2.srl.lambda=0.001>baseline"),
        claim("figure1.srl.smaller_data_larger_gain", "Figure 1", "not decidable", -3.4, against_paper=True,
              text="SRL: the gain is larger at 0.1 % than at 2.8 %", paper_diff=None, means=[29.1, 20.5, 61.0, 53.0],
              terms=terms("figure1.srl", point="0.035989") + terms("figure1.srl", "baseline", "ELMo", "1.0"),
              views=[seeds_view(-3.4, (-40.0, 30.0), 0.05), examples_view(-3.5, None, 0.001)],
              test_view={"split": "test", "diff": -3.2, "means": [30.0, 21.0, 62.0, 50.0], "p": 0.001,
                         "p_holm": 0.0067, "verdict": "contradicts", "differs": True,
                         "views": [seeds_view(-3.2, (-3.7, -2.7), 0.001), examples_view(-3.2, (-4.4, -2.0), 0.0002)]}),
        claim("sec5.4.srl", "Sec. 5.4", diff=17.0, paper_diff=None, terms=[],
              views=[seeds_view(17.0, (3.0, 31.0), 0.03), {"view": "examples", "unavailable": "no per-example form"}]),
        claim("table5.layers", "probes", diff=1.7, per_seed={}, terms=[], paper="69.0 vs 67.4", paper_diff=1.6,
              ours="63.3 vs 61.7", text="WSD: the second LSTM layer beats the first LSTM layer", means=[],
              views=[examples_view(1.7, (1.0, 2.3), 0.0002, "instances")]),
    ]


def fabricated_profile(out: Path, claims=None, old_schema=False) -> Path:
    """A results directory as the table build leaves it: claims.json, summary.json, table1.md, figure1.png."""
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    claims = fabricated_claims() if claims is None else claims
    if old_schema:  # claims.json before families and adjusted p-values: only what the older runner wrote
        keep = ("id", "section", "task", "text", "paper", "split", "means", "seeds", "views", "verdict", "why")
        claims = [{k: v for k, v in c.items() if k in keep} for c in claims]
        for c in claims:
            c["views"] = [{k: v for k, v in view.items() if k not in ("p_holm", "p_bh")} for view in c["views"]]
        data = {"claims": claims}
    else:
        counted = [c for c in claims if c["counted"]]
        data = {"summary": {"claims": len(claims), "counted": len(counted),
                            **{v: sum(c["verdict"] == v for c in counted)
                               for v in ("supports", "contradicts", "not decidable")},
                            "leans against the paper": sum(c["against_paper"] for c in counted),
                            "differs on test": sum(bool((c.get("test_view") or {}).get("differs")) for c in counted)},
                "rule": "*supports* when every required view gives p (**Holm within its family**) < 0.05.",
                "claims": claims}
    (out / "claims.json").write_text(json.dumps(data))
    (out / "summary.json").write_text(json.dumps({"provenance": {
        "command": "python -m runner --profile fabricated", "profile": "runner/profiles/fabricated.json",
        "description": "a fabricated profile", "git_commit": "abc1234", "date": "2026-11-29 05:00:00 UTC",
        "data": {"srl": {"TRAIN_PATH": "../shared/data/srl/train"}}}, "sweeps": {}}))
    (out / "table1.md").write_text(TABLE1_MD)
    (out / "claims.md").write_text("# claims\n")
    (out / "runs_made.tsv").write_text("commit\truns\tfirst_finished\tlast_finished\tmachine\n")
    plt.imsave(out / "figure1.png", [[0.0, 1.0], [1.0, 0.0]])
    return out


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text, of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parsed(path: Path) -> Tags:
    tags = Tags()
    tags.feed(path.read_text())
    return tags


def svg_rows(svg: str) -> list:
    """The claim ids of the forest plot's rows, read back from the SVG (each mark carries its row's claim id)."""
    return list(dict.fromkeys(html.unescape(m) for m in re.findall(r'id="claim-row-(.+?)-(?:dev|test)"', svg)))


def test_page_structure(tmp_path):
    out = fabricated_profile(tmp_path / "fabricated")
    page = write_report(out)
    text = page.read_text()
    tags = parsed(page)
    ids = {attrs.get("id") for _, attrs in tags.tags}
    for c in fabricated_claims():  # every claim, counted or not, has its rows
        assert f"claim-{c['id']}" in ids, c["id"]
    # every image and link is relative and exists; nothing is fetched from the network
    refs = [attrs[key] for _, attrs in tags.tags for key in ("src", "href") if key in attrs]
    assert {"claims.png", "figure1.png", "table1.md", "claims.md", "claims.svg"} <= set(refs)
    for ref in (r for r in refs if not r.startswith("#")):  # '#...': a place on the page, a shape of the plot
        assert not re.match(r"^(/|[a-z]+:)", ref), ref
        assert (out / ref.split("#")[0]).is_file(), ref
    assert "http://" not in text and "https://" not in text and "://" not in text
    assert str(tmp_path) not in text and "file:" not in text
    assert not [t for t, a in tags.tags if t == "link" or (t == "script" and "src" in a)]  # CSS and script inline
    # Table 1 as a table with the paper's numbers beside ours; the provenance only once, folded at the bottom
    assert "<th>ELMo (paper)</th>" in text and "<td>84.6</td>" in text and "<td>60.8 ± 0.4 † [1]</td>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
    assert '<a href="claims.md">claims.md</a>' in text and "<strong>mean</strong>" in text
    assert '<a href="runs_made.tsv">runs_made.tsv</a>' in text  # the commits that made the runs, one row each
    assert "<details><summary>The same runs on dev</summary>" in text
    assert text.count("../shared/data/srl/train") == 1 and text.index('id="provenance"') > text.index('id="claims"')
    # the summary counts, the rule, the per-seed values folded under each claim
    assert "leans against the paper" in text and "when every required view" in text
    assert text.count("<summary>seed by seed, and why</summary>") == len(fabricated_claims())
    assert "<td>60.50</td>" in text and "the same evidence as" in text
    assert (out / "claims.png").is_file() and (out / "claims.svg").is_file()


def test_forest_plot_has_one_row_per_counted_claim(tmp_path):
    claims = fabricated_claims()
    drawn = forest_plot(claims, tmp_path)
    counted = [c["id"] for c in claims if c["counted"]]
    assert sorted(drawn) == sorted(counted) and "table2.srl.lambda=1>baseline" not in drawn
    # grouped by family in the paper's order: Table 1 first, the probes last
    assert drawn[:2] == ["table1.srl", "table1.sst"] and drawn[-1] == "table5.layers"
    assert svg_rows((tmp_path / "claims.svg").read_text()) == drawn
    assert (tmp_path / "claims.png").read_bytes().startswith(b"\x89PNG")
    assert forest_markdown_line(tmp_path) == "![claims](claims.png)" and forest_markdown_line(tmp_path / "x") == ""


@pytest.mark.slow
def test_forest_plot_stays_readable_at_47_rows(tmp_path):
    """Each row keeps its height as rows are added (the figure grows), at 6 rows as at 47."""
    from PIL import Image

    heights = {}
    for n in (6, 47):
        families = ["Table 1", "Table 2", "Table 3", "Figure 1", "word vectors", "Sec. 5.4", "probes"]
        claims = [claim(f"x{i}.task{i}", families[i * len(families) // n], diff=i % 5 - 1.0) for i in range(n)]
        out = tmp_path / str(n)
        out.mkdir()
        assert len(forest_plot(claims, out)) == n
        assert len(svg_rows((out / "claims.svg").read_text())) == n
        heights[n] = Image.open(out / "claims.png").size[1]
    assert heights[47] / 47 >= 25 and heights[6] / 6 >= 25  # pixels per row: 8-point labels need ~12
    assert heights[47] < 47 * 60


def test_an_older_claims_json_is_refused_in_one_line(tmp_path):
    """claims.json of an earlier runner (no family, counted or summary) was rendered with guessed families; it is
    built again instead (the archive's records are brought up to date by tools/migrate_records.py)."""
    out = fabricated_profile(tmp_path / "old", old_schema=True)
    with pytest.raises(ReportError) as error:
        write_report(out)
    message = str(error.value)
    assert message.startswith(f"{out / 'claims.json'}: claim table1.srl") and "\n" not in message
    assert "expected the keys family, counted, summary of the current claims file" in message
    assert "build it again with python -m runner --profile NAME --build-only" in message
    assert not (out / "index.html").exists()


@pytest.mark.parametrize("content, expected", [
    ("{not json", "expected the claims file the table build writes (JSON), found: "),
    ('{"claims": []}', "expected the key summary of the current claims file, found claims: build it again"),
    ('{"claims": {"a": 1}}', "key 'claims': expected a list of claims, found dict"),
])
def test_a_broken_claims_file_is_named_in_one_line(tmp_path, content, expected):
    (tmp_path / "claims.json").write_text(content)
    with pytest.raises(ReportError) as error:
        write_report(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'claims.json'}: {expected}") and "\n" not in message
    assert not (tmp_path / "index.html").exists()


def test_markdown_page_leaves_out_the_provenance():
    page = markdown_page(TABLE1_MD)
    assert page["title"] == "Table 1: test-set performance of the baseline and the baseline + ELMo"
    assert "git_commit" not in page["main"] and page["main"].startswith('<table class="md"><thead><tr><th>task</th>')
    assert [h for h, _ in page["sections"]] == ["The same runs on dev"]
    assert "<li>[1] srl/ELMo: still improving at the epoch cap</li>" in page["main"]


def test_build_only_writes_the_page(tmp_path):
    """The runner's table build (--build-only too) writes index.html and the forest plot beside claims.json."""
    import runner.__main__ as runner_main
    from tests.runner.fakes import runner_args, write_profile

    assert runner_main.main(runner_args(tmp_path, write_profile(tmp_path), "--build-only")) == 0
    results = tmp_path / "results"
    assert {"claims.json", "index.html", "claims.png", "claims.svg"} <= {p.name for p in results.iterdir()}
    assert "profile <code>p</code>" in (results / "index.html").read_text()


def test_committed_pages_need_only_committed_files():
    """results/<profile>/index.html opens from a fresh clone: every image and link it names is in git beside it."""
    from tests.conftest import REPO_ROOT

    pages = sorted((REPO_ROOT / "results").glob("*/index.html"))
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=REPO_ROOT, capture_output=True, text=True)
    if not pages or tracked.returncode:
        pytest.skip("no committed page, or not a git checkout")
    tracked = set(tracked.stdout.splitlines())
    for page in pages:
        refs = [attrs[key] for _, attrs in parsed(page).tags for key in ("src", "href") if key in attrs]
        assert "claims.png" in refs, page
        for ref in (r for r in refs if not r.startswith("#")):
            path = Path(os.path.normpath(page.parent / ref.split("#")[0])).relative_to(REPO_ROOT).as_posix()
            assert path in tracked, f"{page.relative_to(REPO_ROOT)} names {ref}, which is not committed"


# ---- the first screen, the inline forest plot, the claims table ---------------------------------------------------

def between(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_the_first_screen_is_the_finding_the_tiles_the_rule_folded_and_the_plot(tmp_path):
    text = write_report(fabricated_profile(tmp_path / "fabricated")).read_text()
    # in this order: the finding, the tiles, the rule (folded), the plot
    order = [text.index(mark) for mark in ('id="finding"', 'class="tiles"', 'id="rule"', 'id="forest-plot"')]
    assert order == sorted(order)
    finding = between(text, 'id="finding"', "</p>")
    assert "profile <code>fabricated</code>" in finding.lower() and "a fabricated profile" in finding
    assert "of the paper's 6 claims tested, 4 supported, 0 contradicted and 2 not decidable" in finding
    assert "SRL: gain at 0.1 % − gain at 2.8 % of the data" in finding and "contradicts the paper" in finding
    assert "Holm p = 0.0067" in finding
    stamp = between(text, 'class="stamp"', "</ul>")
    assert "profile fabricated" in stamp and "3 seeds (1–3)" in stamp and "commit abc1234" in stamp
    # the rule rendered, not raw markdown
    rule = between(text, 'id="rule"', "</details>")
    assert "<em>supports</em>" in rule and "<strong>Holm within its family</strong>" in rule and "*" not in rule


def test_the_tiles_are_filters_with_the_summarys_counts(tmp_path):
    out = fabricated_profile(tmp_path / "fabricated")
    text = write_report(out).read_text()
    summary = json.loads((out / "claims.json").read_text())["summary"]
    tiles = dict(re.findall(r'data-filter="([^"]+)"\s+data-count="(\d+)"', text))
    assert tiles == {"all": str(summary["claims"]), "counted": str(summary["counted"]),
                     "verdict:supports": "4", "verdict:contradicts": "0", "verdict:not decidable": "2",
                     "against": "2", "differs": "1"}
    # a verdict tile counts the counted claims, so does its filter: the uncounted claim is in no verdict's rows
    rows = re.findall(r'<tbody class="claim[^"]*" id="claim-([^"]+)"[^>]*data-verdict="([^"]+)" data-counted="(\d)"',
                      text)
    assert sum(v == "supports" and c == "1" for _, v, c in rows) == 4 < sum(v == "supports" for _, v, c in rows)
    assert "c.counted" not in text and "counted === \"1\"" in text or "counted = d.counted" in text


def test_the_forest_plot_is_inline_svg_in_words_with_zero_aligned(tmp_path):
    text = write_report(fabricated_profile(tmp_path / "fabricated")).read_text()
    plot = between(text, 'id="forest-plot"', "</section>")
    rows = [html.unescape(r) for r in re.findall(r'class="f-row[^"]*" data-claim="([^"]+)"', plot)]
    counted = [c["id"] for c in fabricated_claims() if c["counted"]]
    # the claims whose dev and test differ first, then every counted claim once in its family
    assert rows[0] == "figure1.srl.smaller_data_larger_gain" and sorted(rows[1:]) == sorted(counted)
    labels = [html.unescape(x) for x in re.findall(r'class="f-label" href="[^"]+" title="[^"]*">([^<]+)</a>', plot)]
    assert "SRL: ELMo − baseline" in labels and "SRL: all layers λ=0.001 − baseline" in labels
    assert not [label for label in labels if re.search(r"[A-Za-z_]\.\w", label)]  # no claim id as a label
    # one x-scale per unit, zero at the same place in every strip (metric points and epochs alike)
    zeros = set(re.findall(r'<line x1="([\d.]+%)" x2="[\d.]+%" y1="0" y2="\d+" class="zero"/>', plot))
    assert len(zeros) == 1, zeros
    assert plot.count('class="f-axis"') == 2  # metric points, then Sec. 5.4's epochs
    # the verdict by shape and colour, the paper's difference, the test twin dashed, the numbers and the Holm p
    for verdict in ("supports", "leans against the paper", "contradicts"):
        shape = f'href="#shape-{verdict.replace(" ", "-")}"'
        assert shape in plot and forest.COLOURS[verdict] in between(plot, shape, "</use>"), verdict
    assert 'class="paper"' in plot and 'stroke-dasharray="5 3"' in plot
    assert "difference [95 % interval]" in plot and "−3.20 [−3.70, −2.70]" in plot and ">0.0067<" in plot
    assert "://" not in plot and "<img" not in plot


@pytest.mark.parametrize("cid, text, claim_terms, label", [
    ("figure1.snli.0.055883", "SNLI: ELMo beats the baseline at 0.1 % of the training set",
     terms("figure1.snli", point="0.055883"), "SNLI: ELMo − baseline, 0.1 % of the data"),
    ("table2.squad.lambda=0.001>lambda=1", "SQuAD: learnt layer weights (λ = 0.001) beat near-averaging (λ = 1)",
     terms("table2.squad", "lambda=0.001", "lambda=1"), "SQuAD: all layers λ=0.001 − all layers λ=1"),
    ("table1.sst", "ELMo improves SST-5 over the baseline", terms("table1.sst"), "SST-5: ELMo − baseline"),
    ("sec5.4.ner", "NER: ELMo reaches the baseline's best dev score in fewer epochs", [],
     "NER: epochs saved, baseline − ELMo"),
    ("table6.layers", "POS tagging: the first LSTM layer beats the second LSTM layer", [],
     "POS: the first LSTM layer beats the second LSTM layer"),
])
def test_rows_are_labelled_in_words(cid, text, claim_terms, label):
    task = {"sec5.4.ner": "ner", "table6.layers": "table6"}.get(cid, cid.split(".")[1])
    assert forest.row_label({"id": cid, "task": task, "text": text, "terms": claim_terms}) == label


def test_intervals_are_drawn_corrected_as_the_verdict_is():
    """A bar is clear of zero exactly when the view's Holm-adjusted p is below 0.05: over seeds the t interval at level
    1 - 0.05 p / p_Holm, whatever the Holm factor."""
    from scipy import stats as scipy_stats

    for values, factor in itertools.product(([1.0, 2.0, 3.5], [0.2, 2.5, 1.1, 3.0], [4.0, 4.4, 3.9]), (1, 2, 3, 6)):
        n, mean = len(values), sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        p = scipy_stats.ttest_1samp(values, 0).pvalue
        half = scipy_stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)
        v = {"view": "seeds", "diff": mean, "std": std, "n": n, "p": p, "p_holm": min(1.0, p * factor),
             "ci": [mean - half, mean + half]}
        lo, hi = forest.corrected_interval(v)
        assert (lo > 0) == (v["p_holm"] < 0.05), (values, factor, lo, v["p_holm"])
        assert lo <= v["ci"][0] and hi >= v["ci"][1]
    # over examples: the bootstrap's interval scaled by the normal quantiles, both sides kept
    lo, hi = forest.corrected_interval({"view": "examples", "diff": 3.0, "ci": [2.0, 3.8], "p": 0.001, "p_holm": 0.006})
    scale = scipy_stats.norm.ppf(1 - 0.05 / 6 / 2) / scipy_stats.norm.ppf(0.975)
    assert math.isclose(lo, 3.0 - 1.0 * scale) and math.isclose(hi, 3.0 + 0.8 * scale)
    assert forest.corrected_interval({"view": "seeds", "diff": 1.0, "ci": [0.5, 1.5], "p": 0.01}) == [0.5, 1.5]


# Machado, Oliveira & Fernandes (2009), severity 1, applied to linear RGB
CVD = {"deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                        [-0.011820, 0.042940, 0.968881]],
       "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                      [-0.003882, -0.048116, 1.051998]],
       "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                      [0.004733, 0.691367, 0.303900]]}


def lab(colour: str, matrix=None) -> tuple:
    """CIELAB (D65) of an sRGB colour '#rrggbb', as seen with the deficiency ``matrix`` simulates."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
              for c in (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))]
    if matrix:
        linear = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear)))) for row in matrix]
    r, g, b = linear
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, \
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def confusable(palette: dict, matrix) -> list:
    """Pairs of verdict colours that differ by less than 10 in lightness and less than 30 in colour (a*, b*)."""
    out = []
    for a, b in itertools.combinations(palette, 2):
        (l1, a1, b1), (l2, a2, b2) = lab(palette[a], matrix), lab(palette[b], matrix)
        if abs(l1 - l2) < 10 and math.hypot(a1 - a2, b1 - b2) < 30:
            out.append((a, b))
    return out


def test_the_verdict_colours_stay_apart_under_colour_vision_deficiencies():
    for name, matrix in [("normal", None), *CVD.items()]:
        assert confusable(forest.COLOURS, matrix) == [], name
    # the check can fail: the former green/red/grey palette ("supports" and "contradicts" both olive, green and grey
    # of one lightness under deuteranopia)
    former = {"supports": "#1a7f37", "contradicts": "#c62828", "not decidable": "#757575",
              "leans against the paper": "#e07b00"}
    assert ("supports", "contradicts") in confusable(former, CVD["deuteranopia"])
    assert ("supports", "not decidable") in confusable(former, CVD["deuteranopia"])
    # and the shape tells the verdicts apart without colour
    assert len({d for d, _ in forest.SHAPES.values()}) == len(forest.SHAPES)
    assert set(forest.SHAPES) == set(forest.COLOURS)


def test_the_claims_table_reads_paper_and_ours_alike(tmp_path):
    text = write_report(fabricated_profile(tmp_path / "fabricated")).read_text()
    table = between(text, 'id="claims"', "</table>\n</div>")
    assert table.count('class="family-head"') == 5 and '<a href="#family-Table-1">Table 1</a> (2)' in table
    assert '<a href="#family-Sec-54">Sec. 5.4</a> (1)' in table and 'id="family-Sec-54"' in table
    srl = between(table, 'id="claim-table1.srl"', "</tr>")
    assert "84.6 − 81.4 = <b>+3.2</b>" in srl and "60.8 − 51.8 = <b>+2.00</b>" in srl  # plus − minus, both
    probe = between(table, 'id="claim-table5.layers"', "</tr>")
    assert "69.0 − 67.4 = <b>+1.6</b>" in probe and "63.3 − 61.7 = <b>+1.70</b>" in probe
    gain = between(table, 'id="claim-figure1.srl.smaller_data_larger_gain"', "</tr>")
    assert "(29.1 − 20.5) − (61.0 − 53.0) = <b>−3.40</b>" in gain and "test: contradicts" in gain
    assert "the paper&#39;s size" in table or "the paper's size" in table
    assert 'id="claims-box"' in text and 'class="scroll" id="claims-box"' in text  # the table scrolls in its box


def test_the_paper_size_and_seeds_needed_are_shown(tmp_path):
    size = {"paper_diff": 3.3, "intervals": {"test seeds": [-1.0, 1.5]}, "outside": ["test seeds"], "ours": "smaller",
            "inside": [], "consistent": False}
    claims = fabricated_claims()
    claims[1].update(paper_size=size, seeds_needed=31, seeds_needed_range=[12, 140],
                     seeds_needed_why="31 seeds for 80% power; 12–140 over the 95 % interval of that spread; the "
                                      "view over examples (p = 0.81) must reach p < 0.05 as well")
    text = write_report(fabricated_profile(tmp_path / "f", claims)).read_text()
    row = between(text, 'id="claim-table1.sst"', "</tr>")
    assert "<strong>not consistent</strong> (ours smaller): the paper&#39;s +3.3 outside test seeds" in row \
        or "<strong>not consistent</strong> (ours smaller): the paper's +3.3 outside test seeds" in row
    assert "~31 seeds would decide it (range 12–140)" in row


def test_figures_have_captions(tmp_path):
    text = write_report(fabricated_profile(tmp_path / "fabricated")).read_text()
    figure = between(text, "<figure>", "</figure>")
    assert '<img src="figure1.png"' in figure and "<figcaption>" in figure
    for words in ("log scale", "3 seeds (1–3)", "standard deviation", "not a confidence interval", "metric in %"):
        assert words in figure, words


def test_the_axis_labels_are_distinct_at_any_range(tmp_path):
    for diff in (0.07, 1.7, 17.0, 170.0):
        claims = [claim("table5.layers", "probes", diff=diff, per_seed={}, terms=[], paper_diff=None,
                        views=[examples_view(diff, (diff / 2, diff * 1.5), 0.0002, "instances")])]
        axis = between(forest.forest_html([forest.normalised(c) for c in claims], True)["html"], 'class="f-axis"',
                       "</svg>")
        labels = re.findall(r'text-anchor="\w+">([^<]+)</text>', axis)
        assert len(labels) >= 3 and len(set(labels)) == len(labels), (diff, labels)
