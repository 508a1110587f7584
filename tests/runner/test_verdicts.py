"""Verdicts a reviewer can accept (runner/analysis/verdicts.py, runner/execution/evidence.py), on constructed runs: Holm
and Benjamini-Hochberg against hand-computed values, one test for two claims on the same runs, seeds added after a
declaration kept out of the verdict, a batch-dependent model's number of record equal to its predictions' metric, a
reversed result flagged against the paper, predictions swapped between runs left out; and, over the archive of
results/small where it is present, every run's number of record equal to the metric of its archived predictions."""
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner.analysis import stats
from runner.analysis.tables import Cell, build_results
from runner.execution.evidence import PREDICTIONS, adopt, check_run, read_predictions
from runner.metrics import split_metric
from tests.runner.test_claims import accuracy, write_run

REPO = Path(__file__).resolve().parents[2]
PAPER = json.loads((REPO / "results" / "paper_numbers.json").read_text())


def test_holm_and_benjamini_hochberg_match_hand_computed_values():
    ps = [0.01, 0.04, 0.03, None, 0.005]
    # Holm, m = 4: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06, 1*0.04 -> max 0.06
    assert stats.holm(ps) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    # BH, m = 4: 0.04*4/4 = 0.04, 0.03*4/3 = 0.04, 0.01*4/2 = 0.02, 0.005*4/1 = 0.02 (running minimum from the top)
    assert stats.benjamini_hochberg(ps) == pytest.approx([0.02, 0.04, 0.04, None, 0.02])
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1 (2*0.5, then max(1, 0.6) -> 1)


def test_seeds_needed_follows_the_paired_t_power_and_says_when_no_number_will_do():
    n, why = stats.seeds_needed([3.0, 4.0, 5.0])  # effect size 4: 3 seeds already reach 80 % power
    assert n == 3 and "3 seeds" in why
    n, _ = stats.seeds_needed([1.0, 3.0, 5.0])  # effect size 1.5
    assert n == 6
    # the independent reference: the t-test simulated on normal differences of that effect size
    rng = np.random.default_rng(0)
    from scipy import stats as scipy_stats

    def simulated_power(n):
        x = rng.normal(1.5, 1.0, size=(40000, n))
        t = x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))
        return float(np.mean(np.abs(t) > scipy_stats.t.ppf(0.975, n - 1)))

    assert simulated_power(6) > 0.81 and simulated_power(5) < 0.73  # 0.83 and 0.71
    assert stats.seeds_needed([-1.0, -2.0, -1.5])[0] is None  # the other direction: no number of seeds
    n, why = stats.seeds_needed([0.1, -2.0, 2.2])
    assert n is None and "within the noise" in why


def _two_system_runs(root: Path, gains: dict, n_units: int = 400, rng_seed: int = 0, task: str = "snli"):
    """Baseline and ELMo runs (SNLI accuracy) per seed: ELMo right on the baseline's pairs and on ``gains[seed]``
    more (a negative gain: wrong on that many of the baseline's)."""
    rng = np.random.default_rng(rng_seed)
    base = rng.random(n_units) < 0.6
    runs = {}
    for seed, gain in gains.items():
        other = base.copy()
        pool = np.flatnonzero(~base if gain > 0 else base)
        other[rng.choice(pool, abs(gain), replace=False)] = gain > 0
        runs[seed] = (write_run(root / f"b{seed}", task, seed, accuracy(base)),
                      write_run(root / f"e{seed}", task, seed, accuracy(other)))
    return runs


def _build(tmp_path, sweeps, cells, paper=PAPER):
    out = tmp_path / "results"
    build_results(sweeps, cells, paper, out, {"profile": "constructed"})
    data = json.loads((out / "claims.json").read_text())
    return out, data["summary"], {c["id"]: c for c in data["claims"]}


TABLE2 = {"name": "table2", "kind": "table", "split": "dev", "tasks": ["snli"],
          "columns": [{"label": "baseline"}, {"label": "lambda=0.001"}]}
FIGURE1 = {"name": "figure1", "kind": "curve", "split": "dev", "tasks": ["snli"],
           "columns": [{"label": "baseline"}, {"label": "ELMo"}], "x": {"knob": "TRAIN_FRACTION", "values": ["1.0"]}}


@pytest.mark.slow
def test_two_claims_on_the_same_runs_are_one_test_counted_once(tmp_path):
    runs = _two_system_runs(tmp_path / "runs", {1: 40, 2: 45, 3: 50})
    cells = []
    for seed, (b, e) in runs.items():
        cells += [Cell("table2", "snli", "baseline", None, seed, run_dir=b),
                  Cell("table2", "snli", "lambda=0.001", None, seed, run_dir=e),
                  Cell("figure1", "snli", "baseline", "1.0", seed, run_dir=b), Cell("figure1", "snli", "ELMo", "1.0",
                                                                                   seed, run_dir=e)]
    out, summary, claims = _build(tmp_path, [TABLE2, FIGURE1], cells)
    table2, figure1 = claims["table2.snli.lambda=0.001>baseline"], claims["figure1.snli.1.0"]
    assert table2["counted"] and not figure1["counted"]
    assert figure1["same_evidence_as"] == "table2.snli.lambda=0.001>baseline"
    assert figure1["verdict"] == table2["verdict"] == "supports"
    assert summary["claims"] == 2 and summary["counted"] == 1 and summary["supports"] == 1
    assert "the same test as table2.snli.lambda=0.001>baseline" in (out / "claims.md").read_text()


def test_seeds_added_after_the_declaration_are_shown_but_kept_out_of_the_verdict(tmp_path):
    # seeds 1-3 declared: gains that differ a lot (not decidable over seeds); seeds 4-5 added later would decide it
    runs = _two_system_runs(tmp_path / "runs", {1: 2, 2: 40, 3: 8, 4: 30, 5: 31})
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    declared = dict(TABLE2, seeds={"default": 5}, seeds_added_later={"snli": {"seeds": [4, 5], "commit": "abc1234",
                                                                              "why": "constructed"}})
    out, _, claims = _build(tmp_path, [declared], cells)
    claim = claims["table2.snli.lambda=0.001>baseline"]
    seeds = next(v for v in claim["views"] if v["view"] == "seeds")
    assert claim["seeds_declared"] == [1, 2, 3] and claim["seeds_added_later"] == [4, 5]
    assert seeds["seeds"] == [1, 2, 3] and claim["verdict"] == "not decidable"
    assert claim["extension"]["seeds"] == [1, 2, 3, 4, 5] and claim["extension"]["verdict"] == "supports"
    assert "added after the first results: 4, 5" in (out / "claims.md").read_text()
    # the builder without the declaration pools all five: the same runs support
    _, _, pooled = _build(tmp_path / "pooled", [dict(TABLE2, seeds={"default": 5})], cells)
    assert pooled["table2.snli.lambda=0.001>baseline"]["verdict"] == "supports"


def test_a_sweep_with_seeds_added_later_and_no_finished_run_builds(tmp_path):
    """--build-only before any run was restored (another --results-dir: the archive is not there) stopped with a
    TypeError formatting the pooled cell's mean (None) of a sweep with seeds added later (small, 2026-12-06)."""
    runs = tmp_path / "runs"
    cells = [Cell("table2", "snli", col, None, seed, run_dir=runs / f"{col}-{seed}") for seed in range(1, 6)
             for col in ("baseline", "lambda=0.001")]
    declared = dict(TABLE2, seeds={"default": 5}, seeds_added_later={"snli": {"seeds": [4, 5]}})
    out, _, claims = _build(tmp_path, [declared], cells)
    assert "missing" in (out / "table2.md").read_text() and "added later" not in (out / "table2.md").read_text()


def test_the_profile_spec_refuses_a_later_seed_outside_the_sweep():
    from runner.spec import SpecError, check_sweep

    check_sweep(dict(TABLE2, seeds={"snli": 5}, seeds_added_later={"snli": {"seeds": [4, 5]}}), "p")
    with pytest.raises(SpecError, match=r"seeds_added_later.snli': expected .*1..3"):
        check_sweep(dict(TABLE2, seeds={"default": 3}, seeds_added_later={"snli": {"seeds": [4]}}), "p")


def test_a_reversed_result_leans_against_the_paper_and_a_dev_claim_is_judged_on_test_too(tmp_path):
    runs = _two_system_runs(tmp_path / "runs", {1: -40, 2: -45, 3: -50})  # ELMo worse on every seed
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    out, summary, claims = _build(tmp_path, [TABLE2], cells)
    claim = claims["table2.snli.lambda=0.001>baseline"]
    assert claim["verdict"] == "contradicts" and claim["against_paper"]
    assert claim["test_view"]["verdict"] == "contradicts" and not claim["test_view"]["differs"]
    assert summary["leans against the paper"] == 1 and summary["contradicts"] == 1
    assert claim["paper_diff"] == pytest.approx(89.5 - 88.1)
    assert "leans against the paper" in (out / "claims.md").read_text()


def test_holm_within_a_family_turns_a_lone_raw_support_into_not_decidable(tmp_path):
    """Six Table 1 claims: one with raw p just under 0.05 and five far from significance: Holm multiplies by 6."""
    sweep = {"name": "table1", "kind": "table", "split": "test",
             "tasks": ["snli", "ner", "sst", "srl", "squad", "coref"],
             "columns": [{"label": "baseline"}, {"label": "ELMo"}]}
    cells = []
    for i, task in enumerate(sweep["tasks"]):
        gains = {1: 20, 2: 26, 3: 32} if task == "snli" else {1: 1, 2: -1, 3: 1}
        for seed, pair in _two_system_runs(tmp_path / task, gains, rng_seed=i, task=task).items():
            cells += [Cell("table1", task, col, None, seed, run_dir=run)
                      for col, run in zip(("baseline", "ELMo"), pair)]
    _, _, claims = _build(tmp_path, [sweep], cells)
    snli = claims["table1.snli"]
    assert snli["p"] < 0.05 and snli["verdict_raw"] == "supports"
    assert snli["p_holm"] == pytest.approx(min(1.0, 6 * snli["p"])) and snli["p_holm"] >= 0.05
    assert snli["verdict"] == "not decidable" and "after Holm within its family (6 claims)" in snli["why"]
    assert snli["family"] == "Table 1" and snli["seeds_needed"] is not None


def test_a_batch_dependent_models_number_of_record_is_its_predictions_metric_exactly(tmp_path):
    """A toy model whose output for an example depends on its batch (a normalisation over the batch, as the paper
    code's ELMo layer norm): evaluated by length-sorted batches it scores one number, in file order another. The run
    records the file-order pass, whose predictions are archived, and keeps the other as 'reported'."""
    from runner.execution.training import keep_predictions

    rng = np.random.default_rng(1)
    x, lengths, gold = rng.normal(size=200), rng.integers(1, 30, size=200), rng.integers(0, 2, size=200)

    def predict(order, batch=32):
        out = np.empty(200, dtype=int)
        for start in range(0, 200, batch):
            idx = order[start:start + batch]
            out[idx] = (x[idx] - x[idx].mean()) > 0  # batch-wide centring: other batches, other outputs
        return out

    by_length, file_order = predict(np.argsort(lengths, kind="stable")), predict(np.arange(200))
    reported = float(np.mean(by_length == gold))
    assert abs(reported - np.mean(file_order == gold)) > 1e-4  # the two evaluations differ
    model = tmp_path / "model"
    model.mkdir()
    units = {"ids": [str(i) for i in range(200)], "counts": [[int(p == g), 1] for p, g in zip(file_order, gold)]}
    (model / "unit_predictions.json.gz").write_bytes(gzip.compress(json.dumps(
        {"metric": "accuracy", "splits": {"dev": units, "test": units}}).encode()))
    knobs = {"ELMO": "both", "ELMO_LAYER_NORM": "true"}
    metrics = {"best_validation_accuracy": reported, "test_accuracy": reported}
    record = keep_predictions(model, tmp_path, "accuracy", metrics, knobs)
    result = adopt({"dev": reported, "test": reported, "metric": "accuracy", "predictions": record}, tmp_path)
    ours = split_metric(read_predictions(tmp_path), "dev")
    assert 100 * result["dev"] == pytest.approx(ours, abs=1e-9)
    assert 100 * result["test"] == pytest.approx(ours, abs=1e-9)
    assert result["reported"] == {"dev": reported, "test": reported}
    assert result["predictions"]["batching"]["order"] == "file" and check_run(result, tmp_path)[0] is None
    assert result["predictions"]["sha256"] == hashlib.sha256((tmp_path / PREDICTIONS).read_bytes()).hexdigest()


def test_predictions_swapped_between_runs_are_named_and_left_out_of_the_claims(tmp_path, capsys):
    runs = _two_system_runs(tmp_path / "runs", {1: 30, 2: 40, 3: 50, 4: 35})
    for _seed, pair in runs.items():  # as finished runs record them: the predictions are the number of record
        for run_dir in pair:
            result = json.loads((run_dir / "result.json").read_text())
            (run_dir / "result.json").write_text(json.dumps(adopt(result, run_dir)))
    (runs[1][1] / PREDICTIONS).write_bytes((runs[3][1] / PREDICTIONS).read_bytes())  # ELMo seed 1 gets seed 3's
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    _, _, claims = _build(tmp_path, [dict(TABLE2, seeds={"default": 4})], cells)
    claim = claims["table2.snli.lambda=0.001>baseline"]
    assert claim["seeds"] == [2, 3, 4] and claim["excluded_runs"] == ["snli/lambda=0.001 seed 1"]
    assert "left out: snli/lambda=0.001 seed 1" in claim["why"]
    err = capsys.readouterr().err
    assert "snli/lambda=0.001 seed 1 left out of the claims" in err and "sha256 differs" in err


@pytest.mark.parametrize("damage, said", [
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "unreadable predictions"),  # cut
    (lambda p: p.write_bytes(b"not gzip at all"), "unreadable predictions"),
    (lambda p: p.write_bytes(gzip.compress(b"{not json")), "unreadable predictions"),
    (lambda p: p.unlink(), "is missing"),
])
def test_damaged_predictions_are_named_in_one_line_and_their_run_left_out(tmp_path, capsys, damage, said):
    runs = _two_system_runs(tmp_path / "runs", {1: 30, 2: 40, 3: 50})
    damage(runs[2][0] / PREDICTIONS)
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    _, _, claims = _build(tmp_path, [TABLE2], cells)
    claim = claims["table2.snli.lambda=0.001>baseline"]
    assert claim["seeds"] == [1, 3] and claim["excluded_runs"] == ["snli/baseline seed 2"]
    err = [line for line in capsys.readouterr().err.splitlines() if "left out" in line]
    assert len(err) == 1 and said in err[0] and "Traceback" not in err[0]


def test_a_build_that_fails_leaves_the_previous_files_as_they_were(tmp_path, monkeypatch):
    runs = _two_system_runs(tmp_path / "runs", {1: 30, 2: 40, 3: 50})
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    out, _, _ = _build(tmp_path, [TABLE2], cells)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (runs[1][1] / "result.json").write_text(json.dumps({**json.loads((runs[1][1] / "result.json").read_text()),
                                                        "dev": 0.99}))  # a new number for the table
    import runner.analysis.tables

    def broken(*args, **kwargs):
        raise RuntimeError("the claims builder failed")

    monkeypatch.setattr(runner.analysis.tables, "build_claims", broken)  # as tables.py calls it
    with pytest.raises(RuntimeError):
        build_results([TABLE2], cells, PAPER, out, {"profile": "constructed"})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # table2.md not rewritten, no staging left


ARCHIVE = REPO / "results" / "small" / "runs"


@pytest.mark.slow
@pytest.mark.skipif(not ARCHIVE.is_dir(), reason="no archive of results/small here")
def test_every_archived_run_of_small_records_the_metric_of_its_archived_predictions():
    checked = 0
    for path in sorted(ARCHIVE.glob("*/*.json")):
        result = json.loads(path.read_text())
        record = result.get("predictions") or {}
        if "problem" in record or not record.get("units"):
            continue
        data = json.loads(gzip.decompress(path.with_name(f"{path.stem}.{PREDICTIONS}").read_bytes()))
        for split in record["units"]:
            value = 100 * result[split] if result[split] <= 1 else result[split]
            assert value == pytest.approx(split_metric(data, split), abs=0.01), f"{path} {split}"
        checked += 1
    assert checked >= 100


def test_a_record_copied_over_another_runs_is_left_out_of_the_tables_and_the_claims(tmp_path, capsys):
    """The audit's case: ELMo seed 2's result.json and predictions copied into seed 1's run directory gave a table
    cell of '24.0 ± 0.0' and a seed t-test of p = 0, without a word."""
    from runner.analysis.cells import aggregate

    runs = _two_system_runs(tmp_path / "runs", {1: 40, 2: 45, 3: 50})
    for name in ("result.json", PREDICTIONS):
        shutil.copyfile(runs[2][1] / name, runs[1][1] / name)
    cells = [Cell("table2", "snli", col, None, seed, run_dir=run) for seed, pair in runs.items()
             for col, run in zip(("baseline", "lambda=0.001"), pair)]
    elmo = aggregate([c for c in cells if c.column == "lambda=0.001"], "dev")
    assert elmo["seeds_finished"] == 2 and sorted(elmo["by_seed"]) == [2, 3]
    assert "records run_id 'e2', expected 'e1'" in next(r["problem"] for r in elmo["runs"] if r["seed"] == 1)
    _, _, claims = _build(tmp_path, [TABLE2], cells)
    assert claims["table2.snli.lambda=0.001>baseline"]["seeds"] == [2, 3]
    err = [line for line in capsys.readouterr().err.splitlines() if "left out" in line]
    assert err == [f"warning: snli/lambda=0.001 seed 1 left out of the claims and the tables: {runs[1][1]}/result.json "
                   f"records run_id 'e2', expected 'e1': the record of another run"]


def test_a_hand_edited_number_is_left_out_of_the_tables_too(tmp_path):
    """The audit's case: a test number edited by hand (predictions intact) was left out of the claims but used,
    unmarked, in the table."""
    from runner.analysis.cells import aggregate

    runs = _two_system_runs(tmp_path / "runs", {1: 40, 2: 45, 3: 50})
    result = json.loads((runs[2][1] / "result.json").read_text())
    (runs[2][1] / "result.json").write_text(json.dumps({**result, "dev": result["dev"] + 0.1}))
    cells = [Cell("table2", "snli", "lambda=0.001", None, seed, run_dir=pair[1]) for seed, pair in runs.items()]
    elmo = aggregate(cells, "dev")
    assert sorted(elmo["by_seed"]) == [1, 3] and elmo["status"] == "partial"


def _claim(cid, diff, seeds_ci, seeds_p, examples_ci, examples_p, paper_diff=None, direction=1, test=None, **extra):
    """A claim as runner/analysis/claims.py hands it to review: its views and its verdict before correction."""
    views = [{"view": "seeds", "n": 3, "seeds": [1, 2, 3], "values": [diff - 0.5, diff, diff + 0.5], "diff": diff,
              "ci": seeds_ci, "p": seeds_p},
             {"view": "examples", "n": 500, "diff": diff, "ci": examples_ci, "p": examples_p}]
    claim = dict(id=cid, section="s", task="snli", text="t", paper="p", terms=[], seeds=[1, 2, 3],
                 seeds_declared=[1, 2, 3], seeds_added_later=[], direction=direction, views=views,
                 still_improving=[], paper_diff=paper_diff, **extra,
                 **stats.verdict(direction, views, ("seeds", "examples")))
    if test is not None:
        claim["test_view"] = dict(split="test", views=test, still_improving=[],
                                  **stats.verdict(direction, test, ("seeds", "examples")))
    return claim


def test_a_not_computable_claim_is_counted_as_such_and_leans_nowhere():
    """results/default's sec5.4.squad: 2 seeds whose differences are both −1 epoch. The t-test over them is not
    computable (std 0): the claim's verdict is "not computable", counted apart in the summary, out of Holm's family,
    never "leans against the paper" (once p = 0 flagged it)."""
    from runner.analysis.claims import updates_claim
    from runner.analysis.verdicts import review

    view = stats.seed_test({1: -1, 2: -1})
    claim = {"id": "sec5.4.squad", "section": "Sec. 5.4", "task": "squad", "text": "t", "paper": "p",
             "seeds_declared": [1, 2], "views": [view, {"view": "examples", "unavailable": "a curve"}],
             "still_improving": [], **stats.verdict(1, [view], ("seeds",))}
    other = dict(claim, id="sec5.4.snli", views=[stats.seed_test({1: 3, 2: 5}), claim["views"][1]])
    other.update(stats.verdict(1, other["views"][:1], ("seeds",)))
    summary = review([claim, other])
    assert claim["verdict"] == "not computable" and "not computable" in claim["why"]
    assert not claim["against_paper"] and claim["p"] is None and claim["p_holm"] is None
    assert other["family_size"] == 1  # the not computable claim is not in the family
    assert summary["not computable"] == 1 and summary["leans against the paper"] == 0
    assert summary["supports"] + summary["contradicts"] + summary["not decidable"] + summary["not computable"] \
        == summary["counted"]
    assert updates_claim  # (the Sec. 5.4 claim is built by updates_claim, which uses the same seed_test)


def test_consistency_with_the_papers_size_is_a_second_judgement_beside_the_verdict():
    """Whether the paper's difference lies inside every 95 % interval we have (seeds and examples, dev and test):
    SST-5's +3.3 outside both of ours is "not consistent" though the verdict (sign only) stays what it was."""
    from runner.analysis.verdicts import review, size_text

    inside = _claim("table1.snli", 1.0, [0.2, 1.8], 0.01, [0.4, 1.6], 0.001, paper_diff=0.7)
    outside = _claim("table1.sst", 0.8, [-0.5, 2.1], 0.2, [-0.2, 1.8], 0.1, paper_diff=3.3)
    on_test = _claim("table2.snli.x", 1.0, [0.2, 1.8], 0.01, [0.4, 1.6], 0.001, paper_diff=1.2,
                     test=[{"view": "seeds", "diff": 0.1, "ci": [-0.3, 0.5], "p": 0.4},
                           {"view": "examples", "diff": 0.1, "ci": [-0.2, 0.4], "p": 0.5}])
    no_number = _claim("figure1.snli.1.0", 1.0, [0.2, 1.8], 0.01, [0.4, 1.6], 0.001)
    review([inside, outside, on_test, no_number])
    assert inside["paper_size"]["consistent"] is True
    assert outside["paper_size"]["consistent"] is False and outside["verdict"] == "not decidable"
    assert outside["paper_size"]["outside"] == ["dev seeds", "dev examples"]
    assert outside["paper_size"]["ours"] == "smaller"
    assert "not consistent**" in size_text(outside) and "(ours smaller)" in size_text(outside)
    assert on_test["paper_size"]["consistent"] is False and on_test["paper_size"]["outside"] == ["test seeds",
                                                                                                 "test examples"]
    assert no_number["paper_size"] is None
    # seeds needed, with its range over the spread's interval
    assert outside["seeds_needed"] is not None and outside["seeds_needed_range"][0] <= outside["seeds_needed"]


def test_the_sensitivity_section_counts_verdicts_under_welch_and_one_sided_tests():
    """Sensitivity only: the same Holm rule with the t-test over seeds replaced by Welch's unpaired test, and with
    both views one-sided in the paper's direction (p halved where the difference has its direction): the claims whose
    verdict would change, counted; the verdicts themselves stay the declared rule's."""
    from runner.analysis.verdicts import review, sensitivity

    # two-sided p 0.06 on seeds: not decidable; one-sided 0.03 (and examples 0.004): supports
    near = _claim("table1.snli", 1.0, [-0.1, 2.1], 0.06, [0.4, 1.6], 0.008, paper_diff=0.7,
                  welch={"view": "seeds", "test": "Welch", "diff": 1.0, "p": 0.01})
    clear = _claim("table1.srl", 3.0, [2.0, 4.0], 0.001, [2.0, 4.0], 0.0002, paper_diff=3.2,
                   welch={"view": "seeds", "test": "Welch", "diff": 3.0, "p": 0.3})
    claims = [near, clear]
    review(claims)
    result = sensitivity(claims)
    assert near["verdict"] == "not decidable" and clear["verdict"] == "supports"  # unchanged by the section
    assert result["label"].startswith("sensitivity only")
    by_name = {a["name"]: a for a in result["alternatives"]}
    welch = by_name["Welch's unpaired t-test over seeds"]
    assert welch["counts"]["supports"] == 1 and {c["id"] for c in welch["changed"]} == {"table1.snli", "table1.srl"}
    one_sided = by_name["one-sided tests in the paper's direction"]
    assert one_sided["counts"]["supports"] == 2
    assert one_sided["changed"] == [{"id": "table1.snli", "verdict": "not decidable", "would_be": "supports"}]


def test_tables_label_seeds_added_later_and_summary_json_keeps_them_apart(tmp_path):
    """Table 2's SNLI: seeds 1-3 declared, 4-5 added after the first results were read. The table's cell is the
    declared seeds' (as the claims judge them), the five seeds' pooled cell beside it with its label, never pooled
    without one; summary.json keeps the declared cell and the later seeds apart."""
    values = {("baseline", 1): 0.60, ("baseline", 2): 0.62, ("baseline", 3): 0.61, ("baseline", 4): 0.50,
              ("baseline", 5): 0.52, ("lambda=0.001", 1): 0.66, ("lambda=0.001", 2): 0.68,
              ("lambda=0.001", 3): 0.67, ("lambda=0.001", 4): 0.70, ("lambda=0.001", 5): 0.72}
    cells = []
    for (column, seed), value in values.items():
        run = tmp_path / "runs" / f"{column}-{seed}"
        run.mkdir(parents=True)
        (run / "result.json").write_text(json.dumps({"run_id": run.name, "task": "snli", "seed": seed,
                                                     "knobs": {"SEED": str(seed)}, "metric": "accuracy",
                                                     "dev": value, "test": value, "metrics": {}, "log": "log.txt"}))
        cells.append(Cell("table2", "snli", column, None, seed, run_dir=run))
    sweep = dict(TABLE2, seeds={"default": 5}, seeds_added_later={"snli": {"seeds": [4, 5], "commit": "abc1234",
                                                                           "why": "constructed"}})
    out = tmp_path / "results"
    summary = build_results([sweep], cells, PAPER, out, {"profile": "constructed"})
    table = (out / "table2.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| snli"))
    assert row.split("|")[2].strip().startswith("61.0 ± 1.0 (seeds 1–3; with seeds 4–5 added later: 57.0 ± 5.6 ‡")
    assert "‡" in table and "added after the first results" in table and "abc1234" in table
    differences = table.split("seed by seed")[-1]
    assert "+6.0 ± 0.0 (n=3); with seeds 4–5 added later: +11.6 ± 7.7 (n=5) ‡" in differences
    cell = next(c for c in summary["sweeps"]["table2"]["cells"] if c["column"] == "baseline")
    assert cell["seeds_declared"] == [1, 2, 3] and sorted(cell["by_seed"]) == [1, 2, 3]
    assert cell["mean"] == pytest.approx(61.0)
    later = cell["seeds_added_later"]
    assert later["seeds"] == [4, 5] and later["commit"] == "abc1234"
    assert later["by_seed"] == {4: pytest.approx(50.0), 5: pytest.approx(52.0)}
    assert later["all_seeds"]["mean"] == pytest.approx(57.0) and later["all_seeds"]["n"] == 5


def test_the_predictions_record_their_own_batching(tmp_path):
    """The batching a run records is its predictions pass's own (coref: one document per batch,
    tasks/predictions.py evaluation_batch_size), read from the predictions file, not the constant BATCH."""
    units = {"ids": ["0", "1"], "counts": [[1, 1], [0, 1]]}
    for size, where in ((1, "file"), (None, "config")):
        run = tmp_path / f"run-{where}"
        (run / "model").mkdir(parents=True)
        data = {"format": 1, "metric": "accuracy", "splits": {"dev": units, "test": units}}
        if size:
            data["batch_size"] = size
        else:  # a file written before the pass recorded its batch size: the run's own config says it
            (run / "model" / "config.json").write_text(json.dumps({"data_loader": {"batch_size": 1}}))
        (run / PREDICTIONS).write_bytes(gzip.compress(json.dumps(data).encode()))
        result = {"dev": 0.5, "test": 0.5, "metric": "accuracy",
                  "predictions": {"file": PREDICTIONS, "metric": "accuracy", "units": {"dev": 2, "test": 2}}}
        adopted = adopt(result, run)
        assert adopted["predictions"]["batching"]["batch_size"] == 1, where
    bare = tmp_path / "run-bare"
    bare.mkdir()
    (bare / PREDICTIONS).write_bytes(gzip.compress(json.dumps(
        {"format": 1, "metric": "accuracy", "splits": {"dev": units}}).encode()))
    adopted = adopt({"dev": 0.5, "metric": "accuracy", "predictions": {"units": {"dev": 2}}}, bare)
    assert adopted["predictions"]["batching"]["batch_size"] is None  # unknown is said, not guessed
