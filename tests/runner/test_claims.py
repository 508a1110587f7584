"""claims.md / claims.json from fabricated runs written here: the verdicts expected by construction, both views,
seeds paired by SEED, convergence marked, archived runs without predictions reported as such, absent sweeps not
listed; and the probes' tables give the verdict with its test instead of "holds"."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from runner.analysis.tables import Cell, build_results
from runner.execution.training import PREDICTIONS

PAPER = json.loads((Path(__file__).resolve().parents[2] / "results" / "paper_numbers.json").read_text())
SWEEPS = [
    {"name": "table1", "kind": "table", "split": "test", "tasks": ["snli", "ner"],
     "columns": [{"label": "baseline"}, {"label": "ELMo"}]},
    {"name": "table2", "kind": "table", "split": "dev", "tasks": ["snli"],
     "columns": [{"label": "baseline"}, {"label": "last_only"}, {"label": "lambda=1"}, {"label": "lambda=0.001"}]},
    {"name": "table6", "kind": "pos"},
    {"name": "table7", "kind": "table", "split": "dev", "tasks": ["snli"],
     "columns": [{"label": "vectors only"}, {"label": "ELMo + vectors"}]},
]
# Table 7's statements come from paper_numbers.json (table7.claims), written with the sweep that tests them
PAPER_7 = {**PAPER, "table7": {"claims": [{"text": "adding ELMo to the word vectors helps", "better": "ELMo + vectors",
                                          "worse": "vectors only", "paper": "(made up for this test)"}]}}


def write_run(run_dir: Path, task: str, seed: int, units=None, value=None, curve=(0.5, 0.6, 0.7, 0.65),
              metric="accuracy") -> Path:
    """A finished run; with ``units`` (per-unit counts, the same for dev and test) its predictions beside it and
    its dev/test values recomputed from them, else a run archived before predictions were kept."""
    from runner.metrics import metric_value

    run_dir.mkdir(parents=True)
    record = None
    if units is not None:
        value = float(metric_value(metric, np.sum(units, axis=0))) / 100
        split = {"ids": [str(i) for i in range(len(units))], "counts": units, "pred": [], "gold": []}
        (run_dir / PREDICTIONS).write_bytes(gzip.compress(json.dumps(
            {"format": 1, "metric": metric, "splits": {"dev": split, "test": split}}).encode()))
        record = {"file": PREDICTIONS, "metric": metric, "units": {"dev": len(units), "test": len(units)}}
    result = {"run_id": run_dir.name, "task": task, "seed": seed, "knobs": {"SEED": str(seed)}, "metric": metric,
              "dev": value, "test": value, "metrics": {"best_epoch": int(np.argmax(curve)), "epoch": len(curve) - 1},
              "epochs": [{"epoch": i, "validation": v} for i, v in enumerate(curve)], "mix_weights": None,
              "wall_time_s": 1.0, "log": "log.txt"}
    if record:
        result["predictions"] = record
    (run_dir / "result.json").write_text(json.dumps(result))
    return run_dir


def accuracy(correct):
    return [[int(c), 1] for c in correct]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    runs, out = tmp_path_factory.mktemp("runs"), tmp_path_factory.mktemp("results")
    rng = np.random.default_rng(0)
    base_right = rng.random(600) < 0.6
    cells = []

    def add(sweep, task, column, seed, run_dir):
        cells.append(Cell(sweep=sweep, task=task, column=column, x=None, seed=seed, run_dir=run_dir))

    for seed in (1, 2, 3):
        # SNLI: ELMo right wherever the baseline is and on 60-80 more pairs (seed-dependent), curves converged;
        # ELMo reaches the baseline's best (0.7, epoch 3) at epoch 2, 1 or 2
        better = base_right.copy()
        better[rng.choice(np.flatnonzero(~base_right), 50 + 10 * seed, replace=False)] = True
        add("table1", "snli", "baseline", seed, write_run(runs / f"snli-b{seed}", "snli", seed, accuracy(base_right)))
        elmo_curve = {1: (0.6, 0.75, 0.8, 0.7), 2: (0.72, 0.8, 0.7, 0.7), 3: (0.65, 0.71, 0.8, 0.7)}[seed]
        add("table1", "snli", "ELMo", seed,
            write_run(runs / f"snli-e{seed}", "snli", seed, accuracy(better), curve=elmo_curve))
        # Table 2: last only wrong on 100 pairs the baseline gets right; lambda columns archived without predictions
        worse = base_right.copy()
        worse[rng.choice(np.flatnonzero(base_right), 90 + 10 * seed, replace=False)] = False
        add("table2", "snli", "baseline", seed, runs / f"snli-b{seed}")
        add("table2", "snli", "last_only", seed, write_run(runs / f"snli-l{seed}", "snli", seed, accuracy(worse)))
        add("table2", "snli", "lambda=1", seed, write_run(runs / f"snli-x{seed}", "snli", seed, value=0.7 + seed / 100))
        add("table2", "snli", "lambda=0.001", seed, runs / f"snli-e{seed}")
        add("table7", "snli", "vectors only", seed, runs / f"snli-b{seed}")
        add("table7", "snli", "ELMo + vectors", seed, runs / f"snli-e{seed}")
        # NER: baseline seeds 1-3, ELMo seeds 2-3 only (seed 1 never ran); ELMo seed 3 still improving; no predictions
        add("table1", "ner", "baseline", seed,
            write_run(runs / f"ner-b{seed}", "ner", seed, value={1: 0.80, 2: 0.85, 3: 0.90}[seed], metric="f1"))
        add("table1", "ner", "ELMo", seed, runs / f"ner-e{seed}" if seed == 1 else write_run(
            runs / f"ner-e{seed}", "ner", seed, value={2: 0.86, 3: 0.915}[seed], metric="f1",
            curve=(0.5, 0.6, 0.7) if seed == 3 else (0.5, 0.7, 0.6)))
    # Table 6: the first layer right on every sentence's tokens where the second is, and on more
    probe = runs / "probes" / "table6-x"
    probe.mkdir(parents=True)
    second = [[int(rng.integers(5, 10)), 10] for _ in range(200)]
    first = [[min(10, c + (i % 3 == 0)), t] for i, (c, t) in enumerate(second)]
    def layer(counts):
        return {"dev_accuracy": 90.0, "test_accuracy": 100 * sum(c for c, _ in counts) / 2000,
                                "iterations": 25}
    (probe / "result.json").write_text(json.dumps({
        "probe": "pos", "layer_names": ["token layer", "first LSTM layer", "second LSTM layer"],
        "layers": [layer(second), layer(first), layer(second)],
        "baseline": {"name": "most frequent tag", "dev_accuracy": 80.0, "test_accuracy": 80.0},
        "data": {s: {"file": f"{s}.txt", "sentences": 200, "tokens": 2000} for s in ("train", "dev", "test")},
        "units": {"test": {"ids": [str(i) for i in range(200)], "metric": "accuracy",
                           "counts": {"token layer": second, "first LSTM layer": first, "second LSTM layer": second}}},
        "tags": 45, "l2": 1e-4, "timing_s": {"layers": 1.0, "total": 2.0}}))
    cells.append(Cell("table6", "pos", "probe", None, 0, run_dir=probe))
    summary = build_results(SWEEPS, cells, PAPER_7, out, {"profile": "fabricated"})
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    return out, summary, claims


@pytest.mark.slow
def test_clear_gain_with_both_views_supports(built):
    _, _, claims = built
    snli = claims["table1.snli"]
    assert snli["verdict"] == "supports"
    seeds, examples = (next(v for v in snli["views"] if v["view"] == name) for name in ("seeds", "examples"))
    assert seeds["n"] == 3 and seeds["values"] == pytest.approx([100 * 60 / 600, 100 * 70 / 600, 100 * 80 / 600])
    assert seeds["p"] < 0.05 and examples["n"] == 600 and examples["p"] < 0.05
    assert examples["diff"] == pytest.approx(100 * 70 / 600)  # the seeds' mean gain, recomputed from the units
    assert examples["ci"][0] > 0


@pytest.mark.slow
def test_opposite_direction_contradicts_and_missing_predictions_are_named(built):
    out, _, claims = built
    assert claims["table2.snli.last_only>baseline"]["verdict"] == "contradicts"
    lam = claims["table2.snli.lambda=1>baseline"]
    assert lam["verdict"] == "not decidable" and "no view over examples" in lam["why"]
    examples = next(v for v in lam["views"] if v["view"] == "examples")
    assert examples["unavailable"].startswith("no per-example predictions (archived before")
    text = (out / "claims.md").read_text()
    assert "| Table 1 (Sec. 4): ELMo improves SNLI over the baseline | 88.0 → 88.7" in text
    assert "**supports**" in text and "**contradicts**" in text


@pytest.mark.slow
def test_seed_view_pairs_runs_by_seed_and_still_improving_runs_are_not_decided(built):
    """NER: baseline 80 / 85 / 90, ELMo 86 / 91.5 for seeds 2 and 3: paired by SEED the differences are +1 and
    +1.5; by position they would be +6 and +6.5. ELMo seed 3's best epoch was its last: not decided, and its
    Table 1 cell is marked."""
    out, _, claims = built
    ner = claims["table1.ner"]
    seeds = next(v for v in ner["views"] if v["view"] == "seeds")
    assert seeds["seeds"] == [2, 3] and seeds["values"] == pytest.approx([1.0, 1.5])
    assert ner["means"] == pytest.approx([88.75, 87.5])  # ELMo and baseline over the paired seeds only
    assert ner["verdict"] == "not decidable" and "1 run(s) still improving" in ner["why"]
    assert ner["still_improving"] == ["ner/ELMo seed 3"]
    table1 = (out / "table1.md").read_text()
    assert "† [" in table1 and "ner/ELMo: still improving at the epoch cap (dev score rising) for seed(s) 3" in table1


@pytest.mark.slow
def test_fewer_updates_claim_reads_the_learning_curves(built):
    updates = built[2]["sec5.4.snli"]
    # baseline best 0.7 at epoch 3 (1-based); ELMo reaches 0.7 at epochs 2, 1, 2
    assert updates["ours"].endswith("seed 1: 3 → 2; seed 2: 3 → 1; seed 3: 3 → 2")
    assert updates["views"][0]["values"] == [1, 2, 1] and updates["verdict"] == "not decidable"  # p = 0.12


@pytest.mark.slow
def test_absent_sweeps_are_not_listed_and_probe_claims_use_the_bootstrap(built):
    out, summary, claims = built
    assert not any(c.startswith(("table3", "figure1", "table5")) for c in claims)
    assert claims["table7.snli.ELMo + vectors>vectors only"]["verdict"] == "supports"  # a present sweep is listed
    pos = claims["table6.layers"]
    assert pos["verdict"] == "supports" and pos["views"][0]["n"] == 200 and pos["views"][0]["p"] < 0.05
    table6 = (out / "table6.md").read_text()
    assert "holds" not in table6 and "**supports**" in table6 and "bootstrap, 200 sentences" in table6
    assert "units" not in summary["sweeps"]["table6"]["probe"]["result"]  # per-example units stay in the runs
    assert summary["claims"]["verdicts"]["table1.snli"] == "supports"


def test_a_claim_beyond_the_axis_is_named_as_untestable():
    """SRL's "ELMo at 1 % ≈ baseline at 10 %" needs a 10 % point; an axis that stops at 2.8 % says so."""
    from runner.analysis.claims import untestable

    figure = {"name": "figure1", "kind": "curve", "tasks": ["snli", "srl"],
              "x": {"knob": "TRAIN_FRACTION", "values": ["0.5", "1.0"], "full_percent": 1.8,
                    "tasks": {"srl": {"values": ["0.036", "1.0"], "full_percent": 2.78}}}}
    [line] = untestable([figure])
    assert line.startswith("Figure 1 (Sec. 5.4): SRL") and "stops at 2.8 %" in line
    figure["x"]["tasks"]["srl"] = {"values": ["0.01", "0.1", "1.0"], "full_percent": 100}  # 1 % and 10 % are points
    assert untestable([figure]) == []


def _run_with(curve, cap):
    return {"knobs": {"NUM_EPOCHS": str(cap)}, "epochs": [{"epoch": i, "validation": v} for i, v in enumerate(curve)]}


def test_still_improving_means_rising_at_the_cap_not_a_last_best_epoch_on_a_plateau():
    from runner.analysis.claims import still_improving
    rng = np.random.default_rng(0)
    rise = list(np.linspace(0.10, 0.50, 10))
    # a plateau of 30 epochs whose noise put the best epoch last (as the small SRL baseline's seed 3)
    plateau = rise + list(0.52 + 0.008 * rng.standard_normal(29)) + [0.545]
    assert int(np.argmax(plateau)) == len(plateau) - 1 and not still_improving(_run_with(plateau, 40))
    # still gaining ~0.7 points per epoch at the cap (the small SQuAD baseline at a cap of 15)
    squad = [0.13, 0.24, 0.28, 0.31, 0.36, 0.45, 0.51, 0.55, 0.57, 0.58, 0.585, 0.596, 0.597, 0.609, 0.615]
    assert still_improving(_run_with(squad, 15))
    # the same rise stopped by patience before the cap was not cut short
    assert not still_improving(_run_with(squad, 25))
    # rising but its best epoch not the last: still improving
    assert still_improving(_run_with(squad[:-1] + [0.612, 0.611], 16))
    # two epochs (the default profile): best epoch last
    assert still_improving(_run_with([0.2, 0.3], 2)) and not still_improving(_run_with([0.3, 0.2], 2))


def test_still_improving_sees_a_noisy_rise_and_ignores_a_negligible_creep():
    """The small coref baseline (seed 1) at its cap of 20: dev F1 47.3 -> 49.0 over its last 10 epochs on 10 dev
    documents, which a 5-epoch window called flat (p = 0.10); the small SNLI run (top layer, seed 1) at its cap of 20:
    a significant +0.02 points per epoch on a plateau at 67.6-67.8, which must not hold a claim."""
    from runner.analysis.claims import still_improving, tail_window

    coref = [0.0, 0.305, 0.3966, 0.4306, 0.4458, 0.4294, 0.4567, 0.4439, 0.4525, 0.4511, 0.4731, 0.4709, 0.4578,
             0.4614, 0.4606, 0.4644, 0.4743, 0.4803, 0.4896, 0.4766]
    snli = [0.4527, 0.5222, 0.5585, 0.5805, 0.6249, 0.6414, 0.6601, 0.6693, 0.6738, 0.6705, 0.6738, 0.6762, 0.6756,
            0.6767, 0.6756, 0.6775, 0.6769, 0.6771, 0.6764, 0.676]
    assert still_improving(_run_with(coref, 20)) and not still_improving(_run_with(snli, 20))
    assert still_improving(_run_with([100 * v for v in coref], 20))  # a curve in points reads the same
    assert not still_improving(_run_with(coref, 40))  # stopped by patience: not cut short
    assert [tail_window(n) for n in (3, 9, 15, 20, 40, 50)] == [3, 5, 7, 10, 10, 13]


@pytest.mark.parametrize("curve, improving", [
    ([0.40, 0.50, 0.52, 0.50, 0.53, 0.51, 0.52, 0.50, 0.54], False),  # a plateau whose noise put the best last
    ([0.40, 0.44, 0.47, 0.49, 0.52, 0.54, 0.56, 0.58, 0.60], True),  # still rising at its cap
])
def test_fewer_updates_claim_uses_the_one_still_improving_rule(curve, improving):
    """Sec. 5.4 marked a baseline as still improving whenever its best epoch was its last: the small SRL baseline's
    seed 3 (a 20-epoch plateau, best at the 40th) held the claim undecided although Table 1 counted it converged."""
    from types import SimpleNamespace

    from runner.analysis.claims import updates_claim

    def group(curve):
        return {1: {"label": "srl/x seed 1", "result": {"knobs": {"NUM_EPOCHS": str(len(curve))},
                                                          "epochs": [{"validation": v} for v in curve]}}}
    runs = SimpleNamespace(groups={("table1", "srl", "baseline", None): group(curve),
                                   ("table1", "srl", "ELMo", None): group([0.5, 0.6, 0.62])})
    assert bool(updates_claim("srl", runs)["still_improving"]) == improving


def test_shares_of_the_training_set_read_without_exponents():
    """The default profile's SRL axis ends at 100 %: claims.md said "the gain is larger at 0.1 % than at 1e+02 %"."""
    from runner.analysis.claims import _share

    assert [_share(p) for p in (0.1, 1.79, 2.78, 10.0, 100.0, 0.05588)] == ["0.1", "1.8", "2.8", "10", "100", "0.056"]


@pytest.mark.slow
def test_every_claim_carries_its_declared_seeds_and_sec54_rows_quote_their_own_task(built):
    """Sec. 5.4's fewer-updates claims are judged on Table 1's runs, whose seeds were declared with it: they carry
    ``seeds_declared`` like every task claim (once null); a probe has no seeds (one fixed biLM): []. Each Sec. 5.4 row
    quotes what the paper says of its own task (it gives numbers for SRL only), not SRL's sentence on every row."""
    out, _, claims = built
    assert all("seeds_declared" in c for c in claims.values())
    assert claims["sec5.4.snli"]["seeds_declared"] == [1, 2, 3] and claims["sec5.4.snli"]["seeds_added_later"] == []
    assert claims["sec5.4.ner"]["seeds_declared"] == [2, 3]  # the seeds both of its runs finished
    assert claims["table6.layers"]["seeds_declared"] == []
    # the probe's paper prints both layers (97.3 vs 96.8): its size is judged against our interval too
    assert claims["table6.layers"]["paper_diff"] == pytest.approx(0.5)
    assert claims["table6.layers"]["paper_size"]["intervals"]
    snli, ner = claims["sec5.4.snli"]["paper"], claims["sec5.4.ner"]["paper"]
    assert snli != ner and "SNLI" in snli and "NER" in ner and not snli.startswith("SRL")
    assert "486" in snli  # the one example the paper gives, named as SRL's
    from runner.analysis.claims import SEC54_PAPER

    assert SEC54_PAPER["srl"].startswith("SRL: the baseline peaks after 486 epochs")


def test_encoder_columns_are_compared_with_the_baseline_elmo_and_each_other_as_claims_of_ours(tmp_path):
    """Table 1 with two encoder columns (knob ENCODER): A right wherever ELMo is and on more pairs, B wrong where
    ELMo is right on some. Each encoder is claimed better than the baseline, ELMo and the encoders after it, in the
    family "encoders (ours)" (Holm there, not in Table 1's), with no paper number; B against ELMo is contradicted and
    still never "against the paper"; the table has no paper column for them."""
    rng = np.random.default_rng(1)
    base = rng.random(600) < 0.6
    columns = [{"label": "baseline"}, {"label": "ELMo"}, {"label": "A", "knobs": {"ENCODER": "a"}},
               {"label": "B", "knobs": {"ENCODER": "b"}}]
    sweep = {"name": "table1", "kind": "table", "split": "test", "tasks": ["snli"], "columns": columns}
    cells = []
    for seed in (1, 2, 3):
        elmo, a, b = base.copy(), base.copy(), base.copy()
        elmo[rng.choice(np.flatnonzero(~base), 55 + 5 * seed, replace=False)] = True
        a[:] = elmo
        a[rng.choice(np.flatnonzero(~elmo), 40 + seed, replace=False)] = True
        b[rng.choice(np.flatnonzero(base), 80 + seed, replace=False)] = False
        for label, right in (("baseline", base), ("ELMo", elmo), ("A", a), ("B", b)):
            run = write_run(tmp_path / "runs" / f"{label}{seed}", "snli", seed, accuracy(right))
            cells.append(Cell(sweep="table1", task="snli", column=label, x=None, seed=seed, run_dir=run))
    out = tmp_path / "results"
    out.mkdir()
    build_results([sweep], cells, PAPER, out, {"profile": "fabricated"})
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    ours = {k: c for k, c in claims.items() if k.startswith("encoders.")}
    assert sorted(ours) == ["encoders.snli.A>B", "encoders.snli.A>ELMo", "encoders.snli.A>baseline",
                            "encoders.snli.B>ELMo", "encoders.snli.B>baseline"]
    assert all(c["family"] == "encoders (ours)" and c["paper"].startswith("— (ours") and not c["against_paper"]
               for c in ours.values())
    assert claims["table1.snli"]["family_size"] == 1 and ours["encoders.snli.A>ELMo"]["family_size"] == 5
    assert ours["encoders.snli.A>ELMo"]["verdict"] == "supports"
    assert ours["encoders.snli.B>ELMo"]["verdict"] == "contradicts"
    table = (out / "table1.md").read_text()
    assert "| A (ours) | B (ours) |" in table and "A (paper)" not in table
