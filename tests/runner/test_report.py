"""The verdicts at a glance (runner/analysis/page.py): the forest plot claims.png/.svg and the static page index.html,
made from a fabricated profile directory (claims.json in the current schema and in the older one, summary.json,
table1.md, a figure); the page in headless Chromium when it is installed (docs/runner.md says how)."""
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

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


def claim(cid, family, verdict="supports", diff=2.0, views=None, **extra):
    views = views if views is not None else [seeds_view(diff), examples_view(diff)]
    ps = [v["p"] for v in views if v.get("p") is not None]
    return {"id": cid, "family": family, "section": f"{family} (Sec. 4)", "task": cid.split(".")[1],
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
        claim("table2.srl.lambda=0.001>baseline", "Table 2", diff=8.0),
        claim("table2.srl.lambda=1>baseline", "Table 2", diff=8.1, counted=False,
              same_evidence_as="table2.srl.lambda=0.001>baseline"),
        claim("figure1.srl.smaller_data_larger_gain", "Figure 1", "contradicts", -3.4,
              views=[seeds_view(-3.4, (-40.0, 30.0), 0.05), examples_view(-3.5, None, 0.001)]),
        claim("sec5.4.srl", "Sec. 5.4", diff=17.0, paper_diff=None,
              views=[seeds_view(17.0, (3.0, 31.0), 0.03), {"view": "examples", "unavailable": "no per-example form"}]),
        claim("table5.layers", "probes", diff=1.7, per_seed={},
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
                            "leans against the paper": sum(c["against_paper"] for c in counted), "differs on test": 0},
                "rule": "supports when every required view gives p (Holm within its family) < 0.05.",
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
    return list(dict.fromkeys(html.unescape(m) for m in re.findall(r'id="claim-row-(.+?)-(?:seeds|examples)"', svg)))


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
    for ref in refs:
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
    assert "leans against the paper" in text and "supports when every required view" in text
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


def test_older_claims_json_still_renders(tmp_path):
    """claims.json as today's runner writes it: no family, counted, p_holm, paper_diff or per_seed."""
    out = fabricated_profile(tmp_path / "old", old_schema=True)
    text = write_report(out).read_text()
    for c in fabricated_claims():
        assert f'id="claim-{html.escape(c["id"])}"' in text, c["id"]
    assert "carry no adjusted p-values" in text and "<th>p (Holm)</th>" not in text
    assert 'data-family="Table 2"' in text and 'data-family="Sec. 5.4"' in text and 'data-family="probes"' in text
    # uncounted is a field of the new schema only: here all 7 are drawn
    assert len(svg_rows((out / "claims.svg").read_text())) == 7


@pytest.mark.parametrize("content, expected", [
    ("{not json", "expected the claims file the table build writes (JSON), found: "),
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


# ---- in a real browser ------------------------------------------------------------------------------------------

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(name)), None)
SELF_TEST = """<pre id="self-test"></pre><script>
window.addEventListener("load", function () {
  function shown() { return Array.from(document.querySelectorAll("tbody.claim")).filter(function (b) {
    return b.offsetParent !== null; }).length; }
  function choose(id, value) { var s = document.getElementById(id); s.value = value;
    s.dispatchEvent(new Event("change")); }
  var result = {all: shown(), images: Array.from(document.images).map(function (i) { return i.naturalWidth; })};
  choose("family", "Table 1"); result.table1 = shown(); result.counter = document.getElementById("shown").textContent;
  choose("verdict", "not decidable"); result.table1_undecided = shown();
  choose("family", ""); choose("verdict", "against"); result.against = shown();
  choose("verdict", ""); result.reset = shown();
  document.getElementById("self-test").textContent = JSON.stringify(result);
});
</script>"""


def in_browser(page: Path) -> tuple:
    """(the self-test's result, the page's console messages): the page with SELF_TEST added, in headless Chromium."""
    test_page = page.with_name("self-test.html")
    test_page.write_text(page.read_text().replace("</body>", SELF_TEST + "</body>"))
    done = subprocess.run([BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={page.parent / 'browser-profile'}", "--enable-logging=stderr", "--v=0",
                           "--virtual-time-budget=5000", "--dump-dom", test_page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="self-test">(.*?)</pre>', done.stdout, re.S)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return (json.loads(html.unescape(found.group(1))) if found and found.group(1) else None), console


@pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (docs/runner.md: apt-get install chromium)")
def test_page_in_a_browser(tmp_path):
    out = fabricated_profile(tmp_path / "fabricated")
    page = write_report(out)
    result, console = in_browser(page)
    assert console == [], console
    assert result is not None, "the page's self-test did not run"
    assert result["all"] == 7 and all(width > 0 for width in result["images"]) and len(result["images"]) == 2
    assert result["table1"] == 2 and result["counter"] == "2" and result["table1_undecided"] == 1
    assert result["against"] == 1 and result["reset"] == 7
    # the check can fail: a script error on the page is caught
    page.write_text(page.read_text().replace("<script>", "<script>notDefined();", 1))
    assert any("notDefined is not defined" in line for line in in_browser(page)[1])


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
        for ref in refs:
            path = Path(os.path.normpath(page.parent / ref.split("#")[0])).relative_to(REPO_ROOT).as_posix()
            assert path in tracked, f"{page.relative_to(REPO_ROOT)} names {ref}, which is not committed"


@pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (docs/runner.md: apt-get install chromium)")
def test_committed_small_page_in_a_browser(tmp_path):
    """results/small/index.html as a fresh clone has it, offline: no console message, the forest plot and the
    figures load, Table 1 is there, the filter works on its 47 claims."""
    from tests.conftest import REPO_ROOT

    small = REPO_ROOT / "results" / "small"
    if not (small / "index.html").is_file():
        pytest.skip("results/small/index.html is not built")
    for name in ["index.html"] + [p.name for p in small.glob("*.png")]:
        shutil.copy(small / name, tmp_path / name)
    result, console = in_browser(tmp_path / "index.html")
    assert console == [] and result is not None, console
    assert len(result["images"]) >= 1 and all(width > 0 for width in result["images"])
    assert result["table1"] < result["all"] == result["reset"] and result["counter"] == str(result["table1"])
    page = (tmp_path / "index.html").read_text()
    assert 'id="table1"' in page and '<img src="claims.png"' in page
