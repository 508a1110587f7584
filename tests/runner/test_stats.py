"""The paired tests and the verdict rule (runner/analysis/stats.py) on constructed cases whose answers are known by
hand."""
import numpy as np
import pytest

from runner import metrics
from runner.analysis import stats

BOTH = ("seeds", "examples")


def accuracy_units(correct) -> np.ndarray:
    return np.array([[c, 1] for c in correct], dtype=float)


def views_for(a_seeds, b_seeds, metric="accuracy"):
    """Both views of A − B: per-seed values recomputed from the units, and the bootstrap over the same units."""
    diffs = {s: float(metrics.metric_value(metric, a.sum(0)) - metrics.metric_value(metric, b.sum(0)))
             for s, (a, b) in enumerate(zip(a_seeds, b_seeds), 1)}
    return [stats.seed_test(diffs), stats.bootstrap_test(metric, [(1, a_seeds), (-1, b_seeds)], draws=2000)]


@pytest.mark.parametrize("n", [5, 40, 400, 4000])
def test_identical_systems_are_not_decidable_at_any_n(n):
    rng = np.random.default_rng(n)
    seeds = [accuracy_units(rng.integers(0, 2, n)) for _ in range(3)]
    views = views_for(seeds, [s.copy() for s in seeds])
    result = stats.verdict(1, views, BOTH)
    # every seed's difference is 0 (std 0): the t-test over seeds has no value, and the claim decides nothing
    assert result["verdict"] == "not computable"
    assert views[0]["diff"] == 0 and views[0]["p"] is None and views[0]["not_computable"]
    assert views[1]["diff"] == 0 and views[1]["p"] == 1.0
    # under MIN_UNITS the view is the randomization test, which has no interval
    assert views[1]["ci"] == ([0.0, 0.0] if n >= stats.MIN_UNITS else None)


def test_a_system_better_on_every_example_supports_once_n_is_large_enough():
    """B is right on a random half; A is right wherever B is and on 2-2.5 % more (never worse on any example), in
    three seeds. At n = 40 (one extra example per seed) the bootstrap cannot tell; at n = 2,000 (40, 45 and 50 extra
    examples: differences that vary by seed, as a t-test over seeds needs) both views give p < 0.05 and the verdict
    is supports; swapped, contradicts."""
    def systems(n, seed):
        rng = np.random.default_rng(seed)
        b_right = rng.random(n) < 0.5
        a_seeds, b_seeds = [], []
        for k in range(3):
            extra = np.zeros(n, bool)
            extra[rng.choice(np.flatnonzero(~b_right), size=max(1, n // 50 + k * (n // 400)), replace=False)] = True
            a_seeds.append(accuracy_units(b_right | extra))
            b_seeds.append(accuracy_units(b_right))
        return a_seeds, b_seeds

    small = views_for(*systems(40, 40))
    assert small[1]["diff"] == pytest.approx(2.5) and small[1]["p"] >= 0.05
    assert stats.verdict(1, small[1:], ("examples",))["verdict"] == "not decidable"
    # (+2.5 on every seed: no spread over seeds, so that view is not computable and the claim decides nothing)
    assert stats.verdict(1, small, BOTH)["verdict"] == "not computable"
    a, b = systems(2000, 1)
    large = views_for(a, b)
    assert large[0]["diff"] > 0 and large[0]["p"] < 0.05 and large[1]["p"] < 0.05 and large[1]["ci"][0] > 0
    assert stats.verdict(1, large, BOTH)["verdict"] == "supports"
    assert stats.verdict(1, views_for(b, a), BOTH)["verdict"] == "contradicts"
    # the same systems, but a run whose best epoch was its last: not counted either way
    held = stats.verdict(1, large, BOTH, still_improving=["ner/ELMo seed 2"])
    assert held["verdict"] == "not decidable" and "still improving" in held["why"]
    # a required view missing (runs archived without predictions): not decidable, whatever the other says
    only_seeds = [large[0], {"view": "examples", "unavailable": "no per-example predictions"}]
    assert stats.verdict(1, only_seeds, BOTH)["verdict"] == "not decidable"


def test_span_f1_is_recomputed_from_summed_counts_on_each_resample():
    """Span F1 of a corpus is 2·TP / (2·TP + FP + FN) over all sentences, not the mean of sentence F1s: on this
    hand-made case the two differ, and the bootstrap's observed difference and every resample follow the former."""
    # per sentence (tp, fp, fn)
    a = np.array([[3, 0, 0], [0, 1, 1], [1, 1, 0], [2, 0, 2]] * 10, dtype=float)
    b = np.array([[2, 1, 1], [0, 0, 1], [1, 0, 0], [1, 1, 3]] * 10, dtype=float)
    def f1(tp, fp, fn):
        return 100 * 2 * tp / (2 * tp + fp + fn)
    assert metrics.metric_value("span_f1", a.sum(0)) == pytest.approx(f1(60, 20, 30))  # 70.588...
    assert metrics.metric_value("span_f1", b.sum(0)) == pytest.approx(f1(40, 20, 50))  # 53.333...
    mean_of_sentences = (np.mean([f1(*row) if row[0] else 0 for row in a])
                         - np.mean([f1(*row) if row[0] else 0 for row in b]))
    view = stats.bootstrap_test("span_f1", [(1, [a]), (-1, [b])], draws=500)
    assert view["diff"] == pytest.approx(f1(60, 20, 30) - f1(40, 20, 50))
    assert abs(view["diff"] - mean_of_sentences) > 1  # the shortcut would be wrong here
    # one resample by hand: the first sentence three times, the last one once (weights over the 40 units)
    weights = np.zeros(40)
    weights[0], weights[3] = 3, 1
    assert metrics.metric_value("span_f1", weights @ a) == pytest.approx(f1(3 * 3 + 2, 0, 2))
    assert metrics.metric_value("span_f1", weights @ b) == pytest.approx(f1(3 * 2 + 1, 3 + 1, 3 + 3))


def test_conll_average_and_wsd_f1_from_counts():
    # MUC P 4/5 R 4/8, B3 P 1/2 R 1/4, CEAF-e P 3/3 R 3/6 summed over two documents
    docs = np.array([[3, 4, 3, 6, 1, 1, 1, 2, 2, 2, 2, 4],
                     [1, 1, 1, 2, 0, 1, 0, 2, 1, 1, 1, 2]], dtype=float)
    def f1(p, r):
        return 2 * p * r / (p + r)
    expected = 100 * (f1(4 / 5, 4 / 8) + f1(1 / 2, 1 / 4) + f1(3 / 3, 3 / 6)) / 3
    assert metrics.metric_value("conll_coref", docs.sum(0)) == pytest.approx(expected)
    # WSD: P = correct / answered, R = correct / instances
    assert metrics.metric_value("wsd_f1", [6, 8, 10]) == pytest.approx(100 * f1(6 / 8, 6 / 10))


def test_seed_test_pairs_by_seed_and_gives_the_t_interval():
    from scipy import stats as scipy_stats

    view = stats.seed_test({1: 2.0, 2: 1.0, 3: 3.0})
    assert (view["n"], view["seeds"], view["diff"]) == (3, [1, 2, 3], 2.0)
    assert view["p"] == pytest.approx(scipy_stats.ttest_1samp([2.0, 1.0, 3.0], 0).pvalue)
    half = scipy_stats.t.ppf(0.975, 2) * 1.0 / 3 ** 0.5  # std of (2, 1, 3) is 1
    assert view["ci"] == pytest.approx([2.0 - half, 2.0 + half])
    one = stats.seed_test({1: 5.0})
    assert one["p"] is None and "at least 2" in one["unavailable"]


def test_equivalence_claim_needs_every_interval_inside_the_margin():
    inside = [{"view": "seeds", "diff": 0.1, "ci": [-0.5, 0.7], "p": 0.8},
              {"view": "examples", "diff": 0.1, "ci": [-0.4, 0.6], "p": 0.7}]
    assert stats.verdict(1, inside, BOTH, kind="equivalent")["verdict"] == "supports"
    wide = [inside[0], dict(inside[1], ci=[-1.5, 1.7])]
    assert stats.verdict(1, wide, BOTH, kind="equivalent")["verdict"] == "not decidable"
    apart = [dict(v, diff=-5, ci=[-7, -3]) for v in inside]
    assert stats.verdict(1, apart, BOTH, kind="equivalent")["verdict"] == "contradicts"


def coref_documents(rng, n, better):
    """n documents' CoNLL counts (MUC, B3, CEAF-e: P num/den, R num/den); ``better`` adds correct links to each."""
    den = rng.integers(20, 60, size=(n, 1)).astype(float)
    num = np.minimum(den, rng.integers(5, 40, size=(n, 1)) + better)
    return np.hstack([np.hstack([num, den, num, den + 5])] * 3)


@pytest.mark.parametrize("metric, seeds", [("conll_coref", 3), ("span_f1", 2), ("accuracy", 1)])
def test_randomization_test_under_min_units_matches_scipy_exact_permutation_test(metric, seeds):
    """Under MIN_UNITS units the view over examples is the exact paired randomization test: against
    scipy.stats.permutation_test (permutation_type="samples": each unit's A and B outputs swapped, all 2^n ways),
    whose statistic recomputes the metric from summed counts, averaged over the seeds that share each swap."""
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(seeds)
    n = 9
    if metric == "conll_coref":
        a = [coref_documents(rng, n, 3) for _ in range(seeds)]
        b = [coref_documents(rng, n, 0) for _ in range(seeds)]
    elif metric == "span_f1":
        a = [rng.integers(0, 6, size=(n, 3)).astype(float) for _ in range(seeds)]
        b = [rng.integers(0, 6, size=(n, 3)).astype(float) for _ in range(seeds)]
    else:
        a = [accuracy_units(rng.random(n) < 0.8)]
        b = [accuracy_units(rng.random(n) < 0.4)]
    both = [np.vstack([x, y]) for x, y in zip(a, b)]  # rows 0..n-1: A's units, n..2n-1: B's

    def contrast(x, y):  # x, y: row numbers into ``both``
        return np.mean([metrics.metric_value(metric, m[x].sum(0)) - metrics.metric_value(metric, m[y].sum(0))
                        for m in both])

    reference = scipy_stats.permutation_test((np.arange(n), np.arange(n, 2 * n)), contrast, vectorized=False,
                                             permutation_type="samples", n_resamples=np.inf)
    view = stats.bootstrap_test(metric, [(1, a), (-1, b)])
    assert view["test"].startswith("paired randomization test") and view["ci"] is None and view["n"] == n
    assert view["diff"] == pytest.approx(reference.statistic)
    assert view["p"] == pytest.approx(reference.pvalue)
    assert view["diff"] != 0 and view["p"] < 1  # a case that tests something


@pytest.mark.slow
def test_ten_documents_all_better_support_the_claim_and_sampled_swaps_agree_with_exact():
    """LitBank's 10 test documents: with ELMo better on every document in every seed, the exact randomization
    test gives p = 2/2^10 and, with a clear seed view, the claim is decided (before, under 30 units the view was
    missing and a coref claim could never be decided). Above EXACT_UNITS the swaps are sampled: same p within noise."""
    rng = np.random.default_rng(10)
    b = [coref_documents(rng, 10, 0) for _ in range(3)]
    a = [m.copy() for m in b]
    for m in a:
        m[:, 0::2] += 4  # more correct links (numerators) in every document: every unit favours A
    views = views_for(a, b, metric="conll_coref")
    assert views[1]["p"] == pytest.approx(2 / 2 ** 10)
    seeds = {"view": "seeds", "diff": views[1]["diff"], "ci": [0.5, 3.0], "p": 0.01}
    assert stats.verdict(1, [seeds, views[1]], BOTH)["verdict"] == "supports"
    assert stats.verdict(1, [seeds, views_for(b, a, "conll_coref")[1]], BOTH)["verdict"] == "not decidable"
    # sampled swaps on a mixed case: 20 documents, half better, half worse
    mixed_a = [coref_documents(rng, 20, 2) for _ in range(2)]
    mixed_b = [coref_documents(rng, 20, 0) for _ in range(2)]
    exact = stats.randomization_test("conll_coref", [(1, mixed_a), (-1, mixed_b)])
    assert "all 1,048,576 swaps" in exact["test"] if stats.EXACT_UNITS >= 20 else "sampled" in exact["test"]
    import runner.analysis.stats as module
    full = module.EXACT_UNITS
    try:
        module.EXACT_UNITS = 20
        truth = stats.randomization_test("conll_coref", [(1, mixed_a), (-1, mixed_b)])
    finally:
        module.EXACT_UNITS = full
    assert "all 1,048,576 swaps" in truth["test"] and 0.001 < truth["p"] < 0.999
    assert abs(exact["p"] - truth["p"]) < 4 * (truth["p"] * (1 - truth["p"]) / stats.BOOTSTRAP_DRAWS) ** 0.5 + 1e-3


def test_randomization_test_needs_a_two_system_contrast_and_gives_no_interval_for_equivalence():
    rng = np.random.default_rng(3)
    systems = [[coref_documents(rng, 10, k)] for k in range(4)]
    gains = stats.bootstrap_test("conll_coref", [(1, systems[0]), (-1, systems[1]), (-1, systems[2]), (1, systems[3])])
    assert gains.get("p") is None and "two systems" in gains["unavailable"]
    view = stats.bootstrap_test("conll_coref", [(1, systems[3]), (-1, systems[0])])
    seeds = {"view": "seeds", "diff": view["diff"], "ci": [-0.1, 0.1], "p": 0.9}
    equivalent = stats.verdict(1, [seeds, view], BOTH, kind="equivalent")
    assert equivalent["verdict"] == "not decidable" and "interval" in equivalent["why"]


@pytest.mark.parametrize("diffs", [{1: -1, 2: -1}, {1: 0.0, 2: 0.0, 3: 0.0}, {1: 2.5, 2: 2.5, 3: 2.5}])
def test_a_t_test_over_equal_differences_is_not_computable_and_decides_nothing(diffs):
    """Differences equal on every seed (std 0): t = mean / (0 / √n) has no value (scipy's ttest_1samp gives nan), so
    the view has no p, is marked not computable, and the claim's verdict is "not computable", whatever the sign
    (results/default sec5.4.squad: 2 seeds, differences [−1, −1], once p = 0 and "leans against the paper")."""
    view = stats.seed_test(diffs)
    assert view["p"] is None and view["ci"] is None and view["std"] == 0
    assert view["not_computable"] and "not computable" in view["unavailable"]
    examples = {"view": "examples", "diff": 1.0, "ci": [0.5, 1.5], "p": 0.001}
    for direction in (1, -1):
        result = stats.verdict(direction, [view, examples], BOTH)
        assert result["verdict"] == "not computable" and "std 0" in result["why"]
    assert stats.verdict(1, [view], ("seeds",))["verdict"] == "not computable"
    # results/default's sec5.4.squad: its baselines were also still improving; no p exists either way
    held = stats.verdict(1, [view], ("seeds",), still_improving=["squad/baseline seed 1", "squad/baseline seed 2"])
    assert held["verdict"] == "not computable" and "2 run(s) still improving" in held["why"]
    # a required view missing for another reason (one seed on the other side) is still "not decidable"
    missing = {"view": "examples", "unavailable": "no per-example predictions"}
    assert stats.verdict(1, [view, missing], BOTH)["verdict"] == "not decidable"


def test_seeds_needed_gives_its_range_over_the_spreads_chi_square_interval():
    """The std of n seeds' differences has the 95 % interval std·√((n−1)/χ²_{0.975,n−1}) .. std·√((n−1)/χ²_{0.025,n−1})
    (normal differences); the seeds needed at either end bound the point estimate (fewer at the small std)."""
    from scipy import stats as scipy_stats

    values = [1.0, 3.0, 5.0]  # mean 3, std 2: 6 seeds at the point estimate
    low, high, text = stats.seeds_needed_range(values)
    std = 2.0
    small = std * (2 / scipy_stats.chi2.ppf(0.975, 2)) ** 0.5
    large = std * (2 / scipy_stats.chi2.ppf(0.025, 2)) ** 0.5
    assert small == pytest.approx(1.041, abs=1e-3) and large == pytest.approx(12.57, abs=0.01)
    assert low == stats.seeds_needed([3 - small, 3, 3 + small])[0] and low <= 6
    assert high is None  # at a std of 12.6 no number up to MAX_SEEDS_NEEDED will do
    assert text.startswith(f"{low}–more than {stats.MAX_SEEDS_NEEDED}")
    low2, high2, text2 = stats.seeds_needed_range([3.0, 3.5, 4.0, 3.2, 3.8])
    assert low2 <= stats.seeds_needed([3.0, 3.5, 4.0, 3.2, 3.8])[0] <= high2 and text2 == f"{low2}–{high2}"
    assert stats.seeds_needed_range([5.0]) == (None, None, None)


def test_welch_contrast_matches_scipy_for_two_systems_and_halving_gives_the_one_sided_p():
    from scipy import stats as scipy_stats

    a, b = [70.0, 71.5, 69.0], [68.0, 68.4, 67.1, 68.9]
    view = stats.welch_test([(1, a), (-1, b)])
    reference = scipy_stats.ttest_ind(a, b, equal_var=False)
    assert view["p"] == pytest.approx(reference.pvalue) and view["diff"] == pytest.approx(np.mean(a) - np.mean(b))
    assert view["view"] == "seeds" and view["test"].startswith("Welch")
    # a contrast of four systems (a difference of gains): Welch-Satterthwaite over Σ c_i² s_i² / n_i
    gains = stats.welch_test([(1, a), (-1, b), (-1, [1.0, 2.0, 3.0]), (1, [1.0, 1.5, 2.0])])
    assert gains["p"] is not None and 0 < gains["p"] < 1
    assert stats.welch_test([(1, [1.0]), (-1, [2.0, 3.0])])["p"] is None  # one seed: no spread
    two_sided = {"view": "seeds", "diff": 2.0, "p": 0.08}
    assert stats.one_sided(two_sided, 1)["p"] == pytest.approx(0.04)
    assert stats.one_sided(two_sided, -1)["p"] == pytest.approx(0.96)
