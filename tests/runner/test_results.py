"""The results builder on synthetic run directories (runner contract): tables against hand-computed cells, missing
and crashed cells marked, figures drawn and written as PNGs, summary.json."""
import json
from pathlib import Path

import pytest

from runner.analysis.tables import Cell, build_results

REPO_ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PROVENANCE = {"command": "./run_all.sh", "profile": "synthetic", "git commit": "abc1234", "hardware": "test CPU",
              "data": {"ner": {"TRAIN_PATH": "a.txt", "DEV_PATH": "b.txt"}}, "weights": ["tiny.hdf5"]}


def finished(run_dir: Path, task: str, seed: int, dev, test, knobs=None, mix_weights=None) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps({
        "run_id": run_dir.name, "task": task, "seed": seed, "knobs": knobs or {"SEED": str(seed)},
        "metric": "accuracy", "dev": dev, "test": test, "metrics": {}, "mix_weights": mix_weights,
        "wall_time_s": 1.0, "log": str(run_dir / "log.txt")}))
    return run_dir


def crashed(run_dir: Path, task: str, seed: int) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "failed.json").write_text(json.dumps({
        "task": task, "knobs": {}, "seed": seed, "returncode": 1, "log": str(run_dir / "log.txt"),
        "error": "RuntimeError: boom"}))
    return run_dir


def mix(placement, weights, gamma, mode="weighted"):
    return {"placement": placement, "mode": mode, "weights": weights, "raw_weights": [0.0] * len(weights),
            "gamma": gamma}


def row_of(markdown: str, first_cell: str, second_cell: str = None) -> list:
    """The cells of the markdown table row that starts with first_cell (and second_cell)."""
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell and (second_cell is None or cells[1] == second_cell):
            return cells
    raise AssertionError(f"no row {first_cell} {second_cell or ''} in\n{markdown}")


def header_of(markdown: str) -> list:
    line = next(line for line in markdown.splitlines() if line.startswith("| task"))
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """(sweeps, cells, paper numbers) of synthetic run directories: Tables 1 and 3, Figures 1 and 2."""
    runs = tmp_path_factory.mktemp("runs")
    cells = []

    def add(sweep, task, column, seed, run_dir, x=None):
        cells.append(Cell(sweep=sweep, task=task, column=column, x=x, seed=seed, run_dir=run_dir))

    # Table 1 (test). squad: one seed each; the ELMo run has an input and an output mix.
    add("table1", "squad", "baseline", 1, finished(runs / "squad/b1", "squad", 1, 0.79, 0.80))
    squad_elmo = finished(runs / "squad/e1", "squad", 1, 0.84, 0.85, knobs={"ELMO_LAMBDA": "0.001"},
                          mix_weights={"emb.input": mix("input", [0.1, 0.6, 0.3], 0.8),
                                       "enc.output": mix("output", [0.5, 0.25, 0.25], 1.2)})
    add("table1", "squad", "ELMo", 1, squad_elmo)
    # ner: 3 seeds planned; baseline all finished, ELMo seed 3 crashed.
    for seed, f1 in zip((1, 2, 3), (0.90, 0.91, 0.92)):
        add("table1", "ner", "baseline", seed, finished(runs / f"ner/b{seed}", "ner", seed, f1, f1))
    add("table1", "ner", "ELMo", 1, finished(runs / "ner/e1", "ner", 1, 0.9, 0.92,
                                             mix_weights={"emb": mix("input", [0.2, 0.5, 0.3], 1.0)}))
    add("table1", "ner", "ELMo", 2, finished(runs / "ner/e2", "ner", 2, 0.9, 0.93,
                                             mix_weights={"emb": mix("input", [0.4, 0.3, 0.3], 2.0)}))
    add("table1", "ner", "ELMo", 3, crashed(runs / "ner/e3", "ner", 3))
    # sst: baseline seed 1 has no test metric (dev fallback), seed 2 never ran; both ELMo seeds crashed.
    add("table1", "sst", "baseline", 1, finished(runs / "sst/b1", "sst", 1, 0.45, None))
    add("table1", "sst", "baseline", 2, runs / "sst/b2")
    add("table1", "sst", "ELMo", 1, crashed(runs / "sst/e1", "sst", 1))
    add("table1", "sst", "ELMo", 2, crashed(runs / "sst/e2", "sst", 2))
    # coref: planned, nothing ran.
    add("table1", "coref", "baseline", 1, runs / "coref/b1")
    add("table1", "coref", "ELMo", 1, runs / "coref/e1")

    # Table 3 (dev): squad input+output is the very run of Table 1's squad ELMo (counted once in Figure 2);
    # one output-placement mix uses "last_only" (left out of Figure 2).
    add("table3", "squad", "input+output", 1, squad_elmo)
    add("table3", "snli", "input", 1, finished(runs / "snli/in", "snli", 1, 0.889, 0.5,
                                               mix_weights={"e": mix("input", [0.6, 0.2, 0.2], 3.0)}))
    add("table3", "snli", "input+output", 1, finished(runs / "snli/io", "snli", 1, 0.895, None, mix_weights={
        "e": mix("input", [0.2, 0.2, 0.6], 1.0), "o": mix("output", [0.0, 0.0, 1.0], 1.0, mode="last_only")}))
    add("table3", "snli", "output", 1, finished(runs / "snli/out", "snli", 1, 0.87, None,
                                                mix_weights={"o": mix("output", [0.3, 0.3, 0.4], 0.5)}))

    # Figure 1: snli complete with 2 seeds; srl baseline crashed at 10 %, srl ELMo never ran at 100 %.
    xs = ["0.001", "0.01", "0.1", "1.0"]
    for x_index, x in enumerate(xs):
        for column, offset in (("baseline", 0.0), ("ELMo", 0.05)):
            for seed in (1, 2):
                dev = 0.5 + 0.1 * x_index + offset + 0.01 * seed
                add("figure1", "snli", column, seed, finished(runs / f"f1/snli-{column}-{x}-{seed}", "snli", seed,
                                                              dev, dev), x=x)
                srl_dir = runs / f"f1/srl-{column}-{x}-{seed}"
                if column == "baseline" and x == "0.1":
                    crashed(srl_dir, "srl", seed)
                elif not (column == "ELMo" and x == "1.0"):
                    finished(srl_dir, "srl", seed, dev - 0.2, dev - 0.2)
                add("figure1", "srl", column, seed, srl_dir, x=x)

    columns = [{"label": "baseline", "knobs": {"ELMO": "none"}}, {"label": "ELMo", "knobs": {"ELMO": "input"}}]
    sweeps = [
        {"name": "table1", "kind": "table", "title": "Table 1", "split": "test",
         "tasks": ["squad", "coref", "snli", "ner", "sst"], "columns": columns,
         "seeds": {"default": 1, "ner": 3, "sst": 2}},
        {"name": "table3", "kind": "table", "title": "Table 3", "split": "dev", "tasks": ["snli", "squad"],
         "columns": [{"label": lab, "knobs": {}} for lab in ("input", "input+output", "output")], "seeds": {}},
        {"name": "figure1", "kind": "curve", "title": "Figure 1", "split": "test", "tasks": ["snli", "srl"],
         "columns": columns, "seeds": {"default": 2}, "x": {"knob": "TRAIN_FRACTION", "values": xs,
                                                            "knobs": {"0.001": {"BATCHES_PER_EPOCH": "172"}}}},
        {"name": "figure2", "kind": "mix_weights", "title": "Figure 2", "split": "dev", "tasks": [], "columns": [],
         "from": ["table1", "table3"]},
    ]
    return sweeps, cells, json.loads((REPO_ROOT / "results" / "paper_numbers.json").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory, synthetic):
    out = tmp_path_factory.mktemp("results") / "synthetic"
    return out, build_results(*synthetic, out, PROVENANCE)


@pytest.mark.slow
def test_table1_cells_means_std_paper_values_and_error_reduction(built):
    out, _ = built
    table = (out / "table1.md").read_text()
    assert header_of(table) == ["task", "baseline (ours)", "baseline (paper)", "ELMo (ours)", "ELMo (paper)",
                                "increase (ours)", "increase (paper)", "previous_sota (paper)"]
    # squad: 80.0 -> 85.0: +5.0, relative 5/(100-80) = 25 %; paper 81.1 -> 85.8: 4.7/18.9 = 24.9 %.
    assert row_of(table, "squad") == ["squad", "80.0", "81.1", "85.0", "85.8", "5.0 / 25.0%", "4.7 / 24.9%", "84.4"]
    # ner (2 decimals): baseline 90, 91, 92 -> 91.00 ± 1.00; ELMo 92, 93 of 3 -> 92.50 ± 0.71 (n=2) + crashed note.
    # Increase 1.50 / (1.5/9 = 16.7 %); paper 92.22 - 90.15 = 2.07, 2.07/9.85 = 21.0 %.
    assert row_of(table, "ner") == ["ner", "91.00 ± 1.00", "90.15", "92.50 ± 0.71 (n=2) [1]", "92.22 ± 0.10",
                                    "1.50 / 16.7%", "2.07 / 21.0%", "91.93 ± 0.19"]
    # sst: test null -> dev 45.0 with a footnote, 1 of 2 seeds; ELMo: both seeds crashed, with their logs.
    sst = row_of(table, "sst")
    assert sst[1] == "45.0 (n=1) [2]"
    assert sst[3].startswith("crashed (see ")
    assert "sst/e1/log.txt" in sst[3] and "sst/e2/log.txt" in sst[3]
    assert sst[4:] == ["54.7 ± 0.5", "—", "3.3 / 6.8%", "53.7"]
    assert row_of(table, "coref")[1:6] == ["missing", "67.2", "missing", "70.4", "—"]
    # snli has no planned runs at all; the paper's ± keeps its printed precision.
    assert row_of(table, "snli") == ["snli", "missing", "88.0", "missing", "88.7 ± 0.17", "—", "0.7 / 5.8%", "88.6"]
    assert "[1] ner/ELMo: crashed seeds, see " in table and "ner/e3/log.txt" in table
    assert "[2] sst/baseline: result.json has test = null; the dev value is reported" in table
    assert "- **command**: ./run_all.sh" in table and "- **git commit**: abc1234" in table
    assert "- **data**:\n  - ner: TRAIN_PATH=a.txt, DEV_PATH=b.txt\n- **weights**: tiny.hdf5" in table


@pytest.mark.slow
def test_table1_lists_the_same_runs_on_dev_seed_by_seed(built):
    out, summary = built
    dev_part = (out / "table1.md").read_text().split("## The same runs on dev", 1)[1]
    # ner: baseline dev 90, 91, 92; ELMo dev 90 and 90 (seed 3 crashed); squad one seed each; coref nothing.
    assert row_of(dev_part, "ner")[1:] == ["91.00 ± 1.00 (seed 1: 90.00, seed 2: 91.00, seed 3: 92.00)",
                                           "90.00 ± 0.00 (seed 1: 90.00, seed 2: 90.00)"]
    assert row_of(dev_part, "squad")[1:] == ["79.0 (seed 1: 79.0)", "84.0 (seed 1: 84.0)"]
    assert row_of(dev_part, "coref")[1:] == ["—", "—"]
    entry = next(e for e in summary["sweeps"]["table1"]["cells"] if e["task"] == "ner" and e["column"] == "ELMo")
    assert entry["dev_by_seed"] == {"1": 90.0, "2": 90.0} or entry["dev_by_seed"] == {1: 90.0, 2: 90.0}
    assert "same runs on dev" not in (out / "table3.md").read_text()  # a dev table needs no second one


@pytest.mark.slow
def test_table3_reports_dev_beside_the_papers_columns(built):
    out, _ = built
    table = (out / "table3.md").read_text()
    assert header_of(table) == ["task", "input (ours)", "input (paper)", "input+output (ours)",
                                "input+output (paper)", "output (ours)", "output (paper)"]
    # dev is reported (also where test is null); the shared squad run appears as input+output.
    assert row_of(table, "snli") == ["snli", "88.9", "88.9", "89.5", "89.5", "87.0", "88.7"]
    assert row_of(table, "squad") == ["squad", "missing", "85.1", "84.0", "85.6", "missing", "84.8"]


@pytest.mark.slow
def test_figure1_curve_png_lines_and_table(built):
    out, summary = built
    png = (out / "figure1.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5000
    drawn = summary["sweeps"]["figure1"]["figure"]
    assert [panel["title"] for panel in drawn] == ["snli", "srl"]
    assert drawn[0]["series"] == [{"label": "baseline", "points": 4}, {"label": "ELMo", "points": 4}]
    assert drawn[1]["series"] == [{"label": "baseline", "points": 3}, {"label": "ELMo", "points": 3}]
    table = (out / "figure1.md").read_text()
    # snli baseline at 0.1 %: seeds 0.51, 0.52 -> 51.5 ± 0.7; ELMo 56.5 ± 0.7 (test split, values in %).
    assert row_of(table, "snli", "0.1%") == ["snli", "0.1%", "51.5 ± 0.7", "56.5 ± 0.7"]
    assert row_of(table, "snli", "100%") == ["snli", "100%", "81.5 ± 0.7", "86.5 ± 0.7"]
    srl_10 = row_of(table, "srl", "10%")
    assert srl_10[2].startswith("crashed (see ") and srl_10[3] == "56.5 ± 0.7"
    assert row_of(table, "srl", "100%")[2:] == ["61.5 ± 0.7", "missing"]
    assert "snli at 0.1%: the runs also set BATCHES_PER_EPOCH=172." in table  # a point's own knobs are said


def test_figure1_panels_with_their_own_x_values(tmp_path):
    """SRL's points are other fractions of its file than SNLI's, drawn at their own % of the real training set."""
    cells = []
    for task, xs in (("snli", ["0.5", "1.0"]), ("srl", ["0.036", "1.0"])):
        for x in xs:
            for column, dev in (("baseline", 0.5), ("ELMo", 0.6)):
                run = finished(tmp_path / "runs" / f"{task}-{column}-{x}", task, 1, dev + float(x) / 10, None)
                cells.append(Cell(sweep="figure1", task=task, column=column, x=x, seed=1, run_dir=run))
    sweep = {"name": "figure1", "kind": "curve", "title": "Figure 1", "split": "dev", "tasks": ["snli", "srl"],
             "seeds": {"default": 1}, "columns": [{"label": "baseline", "knobs": {}}, {"label": "ELMo", "knobs": {}}],
             "x": {"knob": "TRAIN_FRACTION", "values": ["0.5", "1.0"], "full_percent": 1.78896,
                   "tasks": {"srl": {"values": ["0.036", "1.0"], "full_percent": 2.77868,
                                     "xlabel": "% of CoNLL-2012's training predicates",
                                     "knobs": {"0.036": {"BATCHES_PER_EPOCH": "79"}}}}}}
    summary = build_results([sweep], cells, {}, tmp_path / "out", PROVENANCE)
    table = (tmp_path / "out" / "figure1.md").read_text()
    assert row_of(table, "snli", "0.89% (0.5 of the training file)")[2:] == ["55.0", "65.0"]
    assert row_of(table, "srl", "0.1% (0.036 of the training file)")[2:] == ["50.4", "60.4"]
    assert row_of(table, "srl", "2.8% (1.0 of the training file)")[2:] == ["60.0", "70.0"]
    assert "srl at 0.1% (0.036 of the training file): the runs also set BATCHES_PER_EPOCH=79." in table
    assert [p["series"] for p in summary["sweeps"]["figure1"]["figure"]] == [[{"label": "baseline", "points": 2},
                                                                             {"label": "ELMo", "points": 2}]] * 2


@pytest.mark.slow
def test_figure2_mix_weights_averaged_per_task_and_placement(built):
    out, summary = built
    png = (out / "figure2.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5000
    drawn = summary["sweeps"]["figure2"]["figure"]
    # 5 task/placement panels (a row per placement, ner has no output panel), 3 bars (token layer + 2 LSTM layers)
    # each; the last_only mix is left out.
    titles = [panel["title"] for panel in drawn]
    assert titles == ["ner · input  γ=1.50", "snli · input  γ=2.00", "squad · input  γ=0.80",
                      "snli · output  γ=0.50", "squad · output  γ=1.20"]
    assert all([s["points"] for s in panel["series"]] == [3] for panel in drawn)
    table = (out / "figure2.md").read_text()
    # ner input: mean of [0.2, 0.5, 0.3] and [0.4, 0.3, 0.3]; γ mean of 1 and 2. The crashed seed adds nothing.
    assert row_of(table, "ner", "input") == ["ner", "input", "0.300", "0.400", "0.300", "1.50", "2"]
    # snli input: the input run's mix beside the input+output run's input mix.
    assert row_of(table, "snli", "input") == ["snli", "input", "0.400", "0.200", "0.400", "2.00", "2"]
    assert row_of(table, "snli", "output") == ["snli", "output", "0.300", "0.300", "0.400", "0.50", "1"]
    assert "mixes of other modes left out: 1)" in table
    # squad's shared run (Table 1 ELMo = Table 3 input+output) counts once.
    assert row_of(table, "squad", "input") == ["squad", "input", "0.100", "0.600", "0.300", "0.80", "1"]
    assert "table1/ELMo/seed 1 (e1, λ=0.001)" in table


@pytest.mark.slow
def test_summary_json_has_provenance_and_every_cell(built):
    out, summary = built
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["provenance"] == PROVENANCE
    assert set(on_disk["sweeps"]) == {"table1", "table3", "figure1", "figure2"}
    table1 = {(c["task"], c["column"]): c for c in on_disk["sweeps"]["table1"]["cells"]}
    assert len(table1) == 10
    ner_elmo = table1[("ner", "ELMo")]
    assert (ner_elmo["status"], ner_elmo["seeds_planned"], ner_elmo["seeds_finished"]) == ("partial", 3, 2)
    assert ner_elmo["values"] == pytest.approx([92.0, 93.0])
    assert ner_elmo["mean"] == pytest.approx(92.5) and ner_elmo["std"] == pytest.approx(0.5 ** 0.5)
    assert ner_elmo["paper"] == 92.22
    assert table1[("ner", "baseline")]["status"] == "ok"
    assert table1[("coref", "ELMo")]["status"] == "missing" and table1[("coref", "ELMo")]["mean"] is None
    sst_elmo = table1[("sst", "ELMo")]
    assert sst_elmo["status"] == "crashed" and len(sst_elmo["crashed_logs"]) == 2
    assert all(log.endswith("log.txt") for log in sst_elmo["crashed_logs"])
    assert table1[("sst", "baseline")]["dev_fallback"] is True
    figure1 = on_disk["sweeps"]["figure1"]["cells"]
    assert len(figure1) == 2 * 2 * 4 and {c["x"] for c in figure1} == {"0.001", "0.01", "0.1", "1.0"}
    groups = {(g["task"], g["placement"]): g for g in on_disk["sweeps"]["figure2"]["groups"]}
    assert groups[("ner", "input")]["weights"] == pytest.approx([0.3, 0.4, 0.3])
    assert on_disk == json.loads(json.dumps(summary, default=str))
    for markdown in out.glob("*.md"):
        assert "- **profile**: synthetic\n" in markdown.read_text(), markdown
    # Written by rename: no temporary file is left behind.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["summary.json", "table1.md", "table3.md", "figure1.md", "figure1.png", "figure2.md", "figure2.png",
         "claims.md", "claims.json"])


def test_malformed_result_names_the_file(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text('{"dev": 0.5, "test": "high"}')
    sweep = {"name": "table1", "kind": "table", "split": "test", "tasks": ["snli"],
             "columns": [{"label": "baseline", "knobs": {}}]}
    # not a traceback in the tables: the loader names it (the runner prints it as a warning and redoes the
    # run) and the cell is missing
    from runner.records import load_result

    assert load_result(run_dir / "result.json")[1] == (f"{run_dir / 'result.json'}: expected a run's result with "
                                                       f"'dev' and 'test' numbers (or one null), found 0.5 and 'high'")
    build_results([sweep], [Cell("table1", "snli", "baseline", None, 1, run_dir)], {}, tmp_path / "out", {})
    assert "| missing |" in (tmp_path / "out" / "table1.md").read_text()


def test_empty_mix_weights_sweep_still_builds(tmp_path):
    sweep = {"name": "figure2", "kind": "mix_weights", "from": ["table1"]}
    summary = build_results([sweep], [], {}, tmp_path, {"profile": "empty"})
    assert summary["sweeps"]["figure2"]["groups"] == []
    assert (tmp_path / "figure2.png").read_bytes().startswith(PNG_SIGNATURE)


def test_runs_made_counts_runs_per_commit_and_those_without_a_record():
    """A multi-session profile's tables say which runs each session made (commit, dates, machine), and count the
    runs archived before result.json carried that record instead of hiding them."""
    from runner.analysis.tables import runs_made, runs_made_text

    machine = "2 CPU cores (AMD EPYC), no GPU, torch 2.9.1"
    results = [{"made": {"git_commit": "bbb", "finished": "2026-11-25 11:00:00 UTC", "hardware": machine}},
               {"made": {"git_commit": "aaa", "finished": "2026-11-24 09:00:00 UTC", "hardware": machine}},
               {"made": {"git_commit": "bbb", "finished": "2026-11-25 10:00:00 UTC", "hardware": machine}},
               {"dev": 0.5}, {"dev": 0.6}, None]
    rows = runs_made(results)
    assert rows == [
        {"commit": None, "runs": 2, "first_finished": None, "last_finished": None, "machine": None},
        {"commit": "aaa", "runs": 1, "first_finished": "2026-11-24 09:00:00 UTC",
         "last_finished": "2026-11-24 09:00:00 UTC", "machine": machine},
        {"commit": "bbb", "runs": 2, "first_finished": "2026-11-25 10:00:00 UTC",
         "last_finished": "2026-11-25 11:00:00 UTC", "machine": machine}]
    assert runs_made_text(rows) == (
        "3 runs at 2 commits (0 of them +changes), the first aaa (finished 2026-11-24 09:00:00 UTC), the last bbb "
        f"(finished 2026-11-25 11:00:00 UTC), on {machine}; 2 more made before runs recorded their commit and date; "
        "every commit: runs_made.tsv")
    assert runs_made_text(runs_made(results[2:])) == (
        f"1 run at commit bbb, finished 2026-11-25 10:00:00 UTC, on {machine}; 2 more made before runs recorded "
        "their commit and date; every commit: runs_made.tsv")
    assert runs_made_text(runs_made([None])) == "none finished"


@pytest.mark.slow
def test_every_markdown_file_opens_with_a_short_provenance_block_linking_the_commits(tmp_path, synthetic):
    """A profile made over many sessions: every results file opened with a 10,000-character runs_made line (one
    entry per commit, 78 of them) and the profile's whole description. The block is at most 15 lines of at most 300
    characters; every commit is a row of runs_made.tsv, which the block links; the description is in full in
    summary.json."""
    machines = ["2 CPU cores (AMD EPYC), no GPU, torch 2.9.1+cu128", "1 GPU (NVIDIA H200), torch 2.9.1+cu128"]
    commits = [f"{i:07x}" + ("+changes" if i % 7 == 0 else "") for i in range(80)]
    results = [{"made": {"git_commit": c, "finished": f"2026-11-{20 + i // 10:02d} {i % 10:02d}:00:0{seed} UTC",
                         "hardware": machines[i % 2]}} for i, c in enumerate(commits) for seed in (1, 2)]
    from runner.analysis.tables import runs_made

    description = ("A profile over many sessions: " + "every task on real data at small scale, " * 30).strip() + \
        ". Its second sentence."
    provenance = {"command": "python -m runner --profile many --build-only", "profile": "runner/profiles/many.json",
                  "description": description,
                  "data": {t: {"TRAIN_PATH": f"../shared/data/{t}_corpus/train.txt",
                               "DEV_PATH": f"../shared/data/{t}_corpus/dev.txt",
                               "TEST_PATH": f"../shared/data/{t}_corpus/test.txt"}
                           for t in ("squad", "snli", "srl", "coref", "ner", "sst")},
                  "weights": sorted(f"artifacts/many/bilm-{t}/options.json + artifacts/many/bilm-{t}/weights.hdf5"
                                    for t in ("ner", "snli", "squad", "sst")),
                  "hardware": machines[0], "executor": "local", "git_commit": "fffffff",
                  "runs_made": runs_made(results + [{"dev": 0.5}]), "date": "2026-11-29 06:33:23 UTC",
                  "wall_time_s": 1.4, "run_wall_time_s": 207821.5}
    out = tmp_path / "many"
    build_results(*synthetic, out, provenance)
    files = sorted(out.glob("*.md"))
    assert [f.name for f in files] == ["claims.md", "figure1.md", "figure2.md", "table1.md", "table3.md"]
    for path in files:
        lines = path.read_text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("- **"))
        block = lines[start:lines.index("", start)]
        assert len(block) <= 15 and max(map(len, block)) <= 300, (path.name, [len(line) for line in block])
        runs_line = next(line for line in block if line.startswith("- **runs_made**: "))
        assert runs_line == ("- **runs_made**: 160 runs at 80 commits (12 of them +changes), the first "
                             "0000000+changes (finished 2026-11-20 00:00:01 UTC), the last 000004f (finished "
                             "2026-11-27 09:00:02 UTC), on 2 machines; 1 more made before runs recorded their commit "
                             "and date; every commit: [runs_made.tsv](runs_made.tsv)"), path.name
        assert "- **weights**: options.json + weights.hdf5 of artifacts/many/{bilm-ner, bilm-snli, bilm-squad, " \
               "bilm-sst}" in block
    tsv = [line.split("\t") for line in (out / "runs_made.tsv").read_text().splitlines()]
    assert tsv[0] == ["commit", "runs", "first_finished", "last_finished", "machine"] and len(tsv) == 1 + 80 + 1
    assert {row[0] for row in tsv[1:]} >= set(commits) and all(row[1] == "2" for row in tsv[2:])
    assert tsv[2] == ["0000000+changes", "2", "2026-11-20 00:00:01 UTC", "2026-11-20 00:00:02 UTC", machines[0]]
    summary = json.loads((out / "summary.json").read_text())["provenance"]
    assert summary["description"] == description and summary["runs_made"] == runs_line[len("- **runs_made**: "):] \
        .replace("[runs_made.tsv](runs_made.tsv)", "runs_made.tsv")


def test_cost_groups_runs_by_task_model_and_share_and_totals_their_hours():
    """cost.md (the real wall time of a profile's runs): per task, baseline or ELMo and share of the training file, the
    median and range of minutes and epochs; the total hours and the wall time at the profile's parallelism."""
    from runner.analysis.tables import cost_markdown

    def run(task, elmo, minutes, epochs, fraction=None):
        knobs = {"ELMO": elmo, **({"TRAIN_FRACTION": fraction, "BATCHES_PER_EPOCH": "80"} if fraction else {})}
        return {"task": task, "knobs": knobs, "wall_time_s": minutes * 60, "epochs": [{}] * epochs,
                "made": {"hardware": "2 CPU cores"}}

    results = [run("snli", "none", 10, 20), run("srl", "input", 30, 40), run("srl", "none", 20, 40),
               run("srl", "none", 40, 20), run("srl", "none", 60, 40), run("srl", "none", 6, 30, "0.035989"), None]
    text = cost_markdown(results, 2, ["- **profile**: p"], ["srl", "snli"])
    rows = [line for line in text.splitlines() if line.startswith("| srl") or line.startswith("| snli")]
    assert rows == ["| srl | baseline | all | 3 | 40 (20–40) | 1.50 | 40 (20–60) | 2.0 |",
                    "| srl | baseline | 3.6 %, epochs of 80 batches | 1 | 30 (30–30) | 0.20 | 6 (6–6) | 0.1 |",
                    "| srl | ELMo | all | 1 | 40 (40–40) | 0.75 | 30 (30–30) | 0.5 |",
                    "| snli | baseline | all | 1 | 20 (20–20) | 0.50 | 10 (10–10) | 0.2 |"]
    assert ("6 finished runs, **2.8 h** of training in all; at 2 at a time about **1.4 h** of wall time; 1 planned "
            "runs not finished yet. Made on: 2 CPU cores.") in text
    assert "- **profile**: p" in text


@pytest.mark.slow
def test_committed_results_name_no_absolute_path_of_the_machine_that_made_them(built):
    """summary.json and the tables name run directories and crash logs relative to the repository, or, for runs kept
    outside it (--runs-dir /tmp/...), by their last parts under '<runs dir>' (results portable)."""
    from runner.analysis.cells import portable
    from tests.conftest import REPO_ROOT

    out, _ = built
    for path in [out / "summary.json", *out.glob("*.md")]:
        text = path.read_text()
        assert str(out.parent) not in text and "/tmp/" not in text, path
    assert portable(REPO_ROOT / "runs" / "small" / "srl" / "srl-1") == "runs/small/srl/srl-1"
    assert portable("/elsewhere/runs/srl/srl-1") == "<runs dir>/srl/srl-1"
    assert portable("runs/x") == "runs/x"


def test_a_progress_line_shows_the_metrics_as_the_tables_do():
    """Not dev=0.30999999999999994 (nor dev=0.31, a fraction the tables never show): the table's % and decimals."""
    from runner.execution.eta import duration
    from runner.execution.jobs import progress_line

    done = {"status": "done", "dev": 0.30999999999999994, "test": 0.8765432, "wall_time_s": 31.2}
    assert progress_line(17, 48, {"task": "ner", "label": "ner baseline seed 1"}, done, "about 4 min left") == \
        "[17/48] ner baseline seed 1: dev 31.00, test 87.65 (31 s) · about 4 min left"
    assert progress_line(1, 2, {"task": "sst", "label": "sst ELMo seed 2"}, {**done, "test": None}, "") == \
        "[1/2] sst ELMo seed 2: dev 31.0 (31 s)"
    crashed = {"status": "crashed", "error": "ValueError: bad line 3", "log": "runs/t/ner/x/log.txt", "wall_time_s": 4}
    assert progress_line(2, 2, {"task": "ner", "label": "ner ELMo seed 1"}, crashed, "") == \
        "[2/2] ner ELMo seed 1: CRASHED after 4 s: ValueError: bad line 3 (log: runs/t/ner/x/log.txt)"
    assert (duration(89), duration(600), duration(2.3 * 3600)) == ("89 s", "10 min", "2.3 h")


def test_made_record_flags_an_untracked_module_in_a_code_folder(tmp_path):
    """A run's `made` commit gets "+changes" for a new module git does not know yet under tasks/ (a config may import
    it), as for a changed tracked file; untracked files outside the code folders do not count."""
    import subprocess

    from runner.records import git_commit

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "knobs.py").write_text("KNOBS = {}\n")
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x", "--allow-empty")
    git("add", "tasks/knobs.py")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "y")
    clean = git_commit(tmp_path)
    assert clean and "+" not in clean and clean != "unknown"
    (tmp_path / "notes.txt").write_text("not code\n")
    assert git_commit(tmp_path) == clean
    (tmp_path / "tasks" / "new_reader.py").write_text("# imported by a config\n")
    assert git_commit(tmp_path) == clean + "+changes"


def test_archived_records_name_no_absolute_path_of_the_checkout(tmp_path):
    """A multi-session profile's archive (runs/, bilm/, vectors/) is committed: its records keep no absolute path of
    the checkout that made them (records archived before were rewritten once: tools/migrate_records.py)."""
    from runner.records import keep_portable, repo_relative
    from tests.conftest import REPO_ROOT

    record = {"log": f"{REPO_ROOT}/runs/small/srl/srl-1/log.txt", "command": f"{REPO_ROOT}/.venv/bin/python -m x --out "
              f"{REPO_ROOT}/artifacts/small/bilm", "data": "../shared/data/a.txt", "dev": 0.5}
    assert repo_relative(record) == {"log": "runs/small/srl/srl-1/log.txt", "dev": 0.5, "data": "../shared/data/a.txt",
                                     "command": ".venv/bin/python -m x --out artifacts/small/bilm"}
    (tmp_path / "stages.json").write_text(json.dumps([record]))
    keep_portable(tmp_path / "stages.json", tmp_path / "kept" / "stages.json")
    assert json.loads((tmp_path / "kept" / "stages.json").read_text()) == [repo_relative(record)]
    before = (tmp_path / "kept" / "stages.json").stat().st_mtime_ns
    keep_portable(tmp_path / "stages.json", tmp_path / "kept" / "stages.json")  # unchanged: not rewritten
    assert (tmp_path / "kept" / "stages.json").stat().st_mtime_ns == before


def test_coref_cell_gives_the_with_singletons_average_beside_coref_f1(tmp_path):
    # coref_f1 drops gold singletons (OntoNotes has none); LitBank's with-singletons score is shown beside it
    from runner.analysis.cells import aggregate, cell_text

    cells = []
    for seed, (f1, with_singletons) in enumerate(((0.61, 0.50), (0.63, 0.52)), 1):
        run_dir = finished(tmp_path / f"c{seed}", "coref", seed, f1, f1)
        result = json.loads((run_dir / "result.json").read_text())
        result["metrics"] = {"test_coref_f1_with_singletons": with_singletons}
        (run_dir / "result.json").write_text(json.dumps(result))
        cells.append(Cell(sweep="table1", task="coref", column="baseline", x=None, seed=seed, run_dir=run_dir))
    assert cell_text(aggregate(cells, "test"), 1, [], "coref") == "62.0 ± 1.4 (with singletons 51.0 ± 1.4)"


def test_archived_bilm_records_name_no_absolute_path_of_the_checkout(tmp_path):
    """archive_bilm keeps a stage's records portable (runner/records.py keep_portable): before, it copied the bytes
    (with this checkout's absolute paths) and every --build-only rewrote them, back and forth."""
    from runner.paths import REPO
    from runner.profile import Profile
    from runner.stages.bilm_stages import archive_bilm

    out = tmp_path / "artifacts" / "bilm"
    out.mkdir(parents=True)
    (out / "perplexity.json").write_text(json.dumps({"source": {"weights": f"{REPO}/artifacts/x/weights.hdf5"}}))
    (out / "options.json").write_text(json.dumps({"lstm": {"dim": 8}}))
    archive_bilm(Profile(name="p", sweeps=("table1",), bilm={"pretrain": {"out": str(out), "args": []}}),
                 tmp_path / "kept")
    kept = tmp_path / "kept" / "bilm"
    assert json.loads((kept / "perplexity.json").read_text()) == {"source": {"weights": "artifacts/x/weights.hdf5"}}
    assert json.loads((kept / "options.json").read_text()) == {"lstm": {"dim": 8}}
    before = (kept / "perplexity.json").stat().st_mtime_ns
    archive_bilm(Profile(name="p", sweeps=("table1",), bilm={"pretrain": {"out": str(out), "args": []}}),
                 tmp_path / "kept")
    assert (kept / "perplexity.json").stat().st_mtime_ns == before  # unchanged: not rewritten


def test_tables_name_the_runs_that_ran_to_their_epoch_cap(tmp_path):
    """The tables say which runs stopped at the epoch cap. Seed 1 of each column ran all 6 epochs of its cap
    (the baseline still rising, the ELMo run level); seed 2 was stopped by patience after 4."""
    def run(name, seed, curve, cap):
        run_dir = finished(tmp_path / "runs" / name, "srl", seed, max(curve), max(curve),
                           knobs={"SEED": str(seed), "NUM_EPOCHS": str(cap)})
        result = json.loads((run_dir / "result.json").read_text())
        result["epochs"] = [{"epoch": i, "validation": v} for i, v in enumerate(curve)]
        result["metrics"] = {"best_epoch": curve.index(max(curve)), "epoch": len(curve) - 1}
        (run_dir / "result.json").write_text(json.dumps(result))
        return run_dir

    rising, level = [0.40, 0.45, 0.50, 0.55, 0.60, 0.65], [0.60, 0.62, 0.63, 0.62, 0.63, 0.62]
    stopped = [0.5, 0.6, 0.55, 0.55]
    cells = [Cell(sweep="table2", task="srl", column=column, x=None, seed=seed,
                  run_dir=run(f"{column}-{seed}", seed, curve, 6))
             for column, curves in (("baseline", (rising, stopped)), ("ELMo", (level, stopped)))
             for seed, curve in zip((1, 2), curves)]
    sweep = {"name": "table2", "kind": "table", "title": "Table 2", "split": "dev", "tasks": ["srl"],
             "seeds": {"default": 2}, "columns": [{"label": "baseline"}, {"label": "ELMo"}]}
    summary = build_results([sweep], cells, {}, tmp_path / "out", PROVENANCE)
    table = (tmp_path / "out" / "table2.md").read_text()
    section = table.split("## Runs that ran to their epoch cap")[1]
    assert "- srl/baseline: seed 1 † (best epoch 6 of 6)" in section
    assert "- srl/ELMo: seed 1 (best epoch 3 of 6)" in section and "seed 2" not in section
    runs = summary["sweeps"]["table2"]["cells"][0]["runs"]
    assert runs[0]["at_cap"] == {"cap": 6, "best_epoch": 6} and "at_cap" not in runs[1]
    for seed in (1, 2):  # runs that recorded no cap: the section is left out, not "none ran to it"
        result_path = tmp_path / "runs" / f"baseline-{seed}" / "result.json"
        result = json.loads(result_path.read_text())
        result_path.write_text(json.dumps({**result, "knobs": {"SEED": str(seed)}}))
    build_results([{**sweep, "columns": [{"label": "baseline"}]}], cells[:2], {}, tmp_path / "out2", PROVENANCE)
    assert "## Runs that ran to their epoch cap" not in (tmp_path / "out2" / "table2.md").read_text()


def test_no_finished_run_no_list_of_commits(tmp_path):
    """A profile of probes only (no task run): 'none finished', and no runs_made.tsv (an earlier build's removed)."""
    sweep = {"name": "figure2", "kind": "mix_weights", "from": ["table1"]}
    (tmp_path / "runs_made.tsv").write_text("commit\truns\n0000000\t1\n")
    build_results([sweep], [], {}, tmp_path, {"profile": "probes", "runs_made": []})
    assert "- **runs_made**: none finished\n" in (tmp_path / "figure2.md").read_text()
    assert not (tmp_path / "runs_made.tsv").exists()
    assert json.loads((tmp_path / "summary.json").read_text())["provenance"]["runs_made"] == "none finished"


def test_a_sweep_differences_its_columns_from_its_reference_column(tmp_path):
    """A precision check has no baseline: `reference` names the column the others are differenced from, seed by seed
    (before, only a column labelled "baseline" was); a reference that names no column is one line at the profile."""
    from runner.spec import SpecError, check_sweep

    dev = {("ELMo", 1): 80.0, ("ELMo", 2): 82.0, ("ELMo", 3): 81.0,
           ("ELMo bfloat16", 1): 80.5, ("ELMo bfloat16", 2): 81.0, ("ELMo bfloat16", 3): 81.0}
    cells = [Cell(sweep="table1", task="ner", column=column, x=None, seed=seed,
                  run_dir=finished(tmp_path / "runs" / f"{column}-{seed}", "ner", seed, value / 100, value / 100))
             for (column, seed), value in dev.items()]
    sweep = {"name": "table1", "kind": "table", "title": "Table 1", "split": "dev", "tasks": ["ner"],
             "seeds": {"default": 3}, "columns": [{"label": "ELMo"}, {"label": "ELMo bfloat16"}], "reference": "ELMo"}
    check_sweep(sweep, "profile 'p'")
    summary = build_results([sweep], cells, {}, tmp_path / "out", PROVENANCE)
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "## Difference to the ELMo, seed by seed" in table
    assert row_of(table.split("seed by seed")[-1], "ner")[1].startswith("-0.17 ± 0.76")  # (+0.5, -1.0, 0.0)
    [_, bf16] = [c for c in summary["sweeps"]["table1"]["cells"]]
    assert bf16["minus ELMo"]["mean"] == pytest.approx(-0.5 / 3)
    with pytest.raises(SpecError, match=r"reference.*the label of one of its columns \('ELMo', 'ELMo bfloat16'\).*"
                                        r"'baseline'"):
        check_sweep({**sweep, "reference": "baseline"}, "profile 'p'")
