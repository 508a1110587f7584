"""Paired tests behind every claim, and the one verdict rule.

Two views of a comparison between systems A and B (or any contrast Σ c_i · system_i, e.g. a difference of gains):

- **over seeds** (``seed_test``): the runs of A and B with the same SEED share their random streams and, on a training
  subset, the subset itself, so the difference is taken seed by seed and tested with a two-sided paired t-test
  (n = seeds, df = n − 1). It measures how much training randomness moves the result, and nothing about the test
  sample. **Power with 3 seeds (df = 2)**: the 95 % t quantile is 4.30, so p < 0.05 needs mean/std of the per-seed
  differences above 4.30/√3 = 2.5: a gain must be about 2.5 times its own seed-to-seed spread (with 2 seeds, 9 times;
  one seed gives no test). The exact sign-flip permutation test cannot reach 0.05 at all below 5 seeds (its smallest
  two-sided p is 2/2^n = 0.25 at n = 3), which is why the t-test is used, with its normality assumption stated.
- **over examples** (``bootstrap_test``): the paired bootstrap of Berg-Kirkpatrick et al. (2012, Sec. 2): resample the
  task's units (sentences, pairs, questions, predicates, documents) with replacement, the same draw for every system
  and seed, and **recompute the task's metric** from the resampled units' counts (span F1 and the CoNLL average are
  not means of per-example scores), averaged over the seeds; δ_b is the contrast on draw b. Two-sided p = share of
  draws with |δ_b − δ| ≥ |δ| (the bootstrap distribution shifted to the null, their Sec. 2), 95 % interval = the
  2.5/97.5 percentiles of δ_b. It measures the test sample's variance with the seeds' mean fixed.
  **Under MIN_UNITS units** (LitBank's 10 test documents) the bootstrap's resamples cannot represent the test
  distribution, and the view is the **paired randomization test** instead (``randomization_test``; Noreen 1989, Yeh
  2000 Sec. 3, Riezler and Maxwell 2005): under the null each unit's outputs of A and B are exchangeable, so every
  way of swapping them unit by unit (the same swap for every seed) is as likely as the one observed; the metric is
  recomputed on each, and p = share of swaps with |δ_swap| ≥ |δ|. Exact over all 2^n swaps up to EXACT_UNITS units
  (its smallest p is 2/2^n: 0.002 at 10 units), sampled above. It is exact at any n, but gives no interval, and it
  needs a contrast of two systems (A − B), which every Table 1 claim is.

Dror et al. (2018) ask that the test's assumptions fit the metric: accuracy, span F1, SQuAD's mean F1/EM and the
CoNLL average are all covered by the bootstrap's recomputation; the t-test over seeds assumes roughly normal
per-seed differences, which 3 seeds cannot check.

**The verdict rule** (``verdict``), used by every claim of claims.md and every table that states a claim:
- *supports*: the difference is in the paper's direction and **every required view** gives p < 0.05. For trained
  models both views are required (an intersection-union test: each view tests a different source of variance, and
  rejecting only when both reject keeps the level at 0.05 without a correction); for the probes (a fixed biLM and a
  deterministic classifier, no seeds) the view over examples alone.
- *contradicts*: the opposite direction, same standard.
- *not computable*: the runs are all there, but a required test has no value on them: the per-seed differences are
  equal on every seed (std 0, e.g. 2 seeds that both reach the baseline's best 1 epoch later), so the t statistic is
  0/0 or ±∞ and no p exists (scipy's ttest_1samp gives nan). It decides nothing, in either direction, and enters no
  correction; once such a view gave p = 0 and a claim "leant against the paper" on two tied seeds.
- *not decidable at this scale*: anything else, including a required view that cannot be computed (one seed; fewer
  than MIN_UNITS units in a contrast of more than two systems; runs archived without per-example predictions) and
  **any run in the comparison still improving when its epochs ran out** (at its cap, its dev score still rising over
  its last epochs: ``runner.analysis.claims.still_improving``; the comparison would measure where training stopped,
  not the systems).
- An "≈" claim (the paper's "ELMo at 1 % ≈ the baseline at 10 %") supports when every required view's 95 % interval
  lies inside ± ``EQUIVALENCE_MARGIN`` points (two one-sided tests at 0.025 each), contradicts when every interval
  lies wholly outside it; a view without an interval (the randomization test) leaves it not decidable.
This rule gives each claim's verdict before correction; runner/analysis/verdicts.py then corrects for the number of
claims (Holm within each family of claims, Benjamini-Hochberg over all reported beside), counts each piece of evidence
once and adds the test split's view of each dev claim.
"""
import math
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from runner.metrics import metric_value

ALPHA = 0.05
BOOTSTRAP_DRAWS = 5000  # p resolution 1/5001, well below ALPHA; Koehn (2004) used 1,000
EQUIVALENCE_MARGIN = 1.0  # metric points (%): "about the same" for the Figure 1 "≈" claim
# Below this many units the bootstrap's resamples cannot represent the test distribution (with every unit favouring
# A, every resample does too and p collapses to 1/(draws+1) whatever n is); randomization_test takes over there.
MIN_UNITS = 30
EXACT_UNITS = 16  # randomization_test: all 2^n swaps up to here (65,536), BOOTSTRAP_DRAWS sampled swaps above


def seed_test(diffs: Dict[int, float]) -> dict:
    """Paired t-test over seeds of per-seed contrasts (already A − B with the same seed)."""
    seeds = sorted(diffs)
    values = [diffs[s] for s in seeds]
    view = {"view": "seeds", "test": "paired t-test over seeds", "n": len(values), "seeds": seeds,
            "values": values, "diff": statistics.fmean(values) if values else None, "ci": None, "p": None}
    if len(values) < 2:
        view["unavailable"] = f"{len(values)} seed(s): a paired test over seeds needs at least 2"
        return view
    from scipy import stats as scipy_stats

    std = statistics.stdev(values)
    view["std"] = std
    if std == 0:  # t = mean / (0 / √n) has no value (scipy's ttest_1samp gives nan): no p, no interval, no verdict
        view["not_computable"] = True
        view["unavailable"] = (f"not computable: the {len(values)} per-seed differences are all {values[0]:+g} "
                               f"(std 0), so the t statistic has no value")
        return view
    df = len(values) - 1
    half = scipy_stats.t.ppf(1 - ALPHA / 2, df) * std / math.sqrt(len(values))
    view["ci"] = [view["diff"] - half, view["diff"] + half]
    t = view["diff"] / (std / math.sqrt(len(values)))
    view["p"] = float(2 * scipy_stats.t.sf(abs(t), df))
    return view


def welch_test(terms: Sequence[tuple]) -> dict:
    """Sensitivity only (runner/analysis/verdicts.py sensitivity): the contrast Σ c_i · mean_i over the seeds of each
    term as if its runs were independent samples, unpaired: Welch's t with the Welch-Satterthwaite degrees of freedom
    (Welch 1947; for two terms scipy's ttest_ind(equal_var=False)). ``terms``: (coefficient, [value per seed])."""
    from scipy import stats as scipy_stats

    terms = [(c, [float(v) for v in values]) for c, values in terms]
    complete = all(values for _, values in terms)
    view = {"view": "seeds", "test": "Welch's unpaired t-test over seeds (sensitivity only)",
            "n": min(len(v) for _, v in terms), "ci": None, "p": None,
            "diff": float(sum(c * statistics.fmean(v) for c, v in terms)) if complete else None}
    if any(len(v) < 2 for _, v in terms):
        view["unavailable"] = "a term with under 2 seeds: no spread"
        return view
    parts = [c * c * statistics.variance(v) / len(v) for c, v in terms]
    if sum(parts) == 0:
        view["unavailable"] = "not computable: no spread in any term"
        return view
    df = sum(parts) ** 2 / sum(part ** 2 / (len(v) - 1) for part, (_, v) in zip(parts, terms))
    view["p"] = float(2 * scipy_stats.t.sf(abs(view["diff"]) / math.sqrt(sum(parts)), df))
    return view


def one_sided(view: dict, direction: int) -> dict:
    """Sensitivity only: a two-sided view made one-sided in the paper's direction: p/2 where the difference has that
    direction, 1 − p/2 where it has the other (exact for the t-tests, whose null distribution is symmetric; for the
    bootstrap and the randomization test the symmetric reading of their two-sided p)."""
    if view.get("p") is None or view.get("diff") is None:
        return dict(view)
    agrees = view["diff"] * direction > 0
    return dict(view, p=view["p"] / 2 if agrees else 1 - view["p"] / 2, test=f"{view.get('test', '')}, one-sided")


def bootstrap_test(metric: str, terms: Sequence[tuple], draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                   chunk: int = 250) -> dict:
    """Paired bootstrap over units. ``terms``: (coefficient, [count matrix of one seed, ...]) with every matrix
    n_units x n_fields over the same units in the same order; the contrast is Σ coefficient · (mean over the term's
    seeds of the metric). Resampling draws are shared by every term and seed (that is what makes it paired)."""
    terms = [(coefficient, [np.asarray(m, dtype=float) for m in seeds]) for coefficient, seeds in terms]
    matrices = [m for _, seeds in terms for m in seeds]
    n = matrices[0].shape[0]
    if any(m.shape != matrices[0].shape for m in matrices):
        raise ValueError("bootstrap_test: every system's counts must cover the same units")
    if n < MIN_UNITS:
        return randomization_test(metric, terms, draws, seed)

    def contrast(weights: Optional[np.ndarray]) -> np.ndarray:
        total = 0.0
        for coefficient, seeds in terms:
            values = [metric_value(metric, m.sum(axis=0) if weights is None else weights @ m) for m in seeds]
            total = total + coefficient * np.mean(values, axis=0)
        return np.asarray(total)

    observed = float(contrast(None))
    rng = np.random.default_rng(seed)
    samples = []
    for start in range(0, draws, chunk):
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=min(chunk, draws - start)).astype(float)
        samples.append(contrast(weights))
    samples = np.concatenate(samples)
    # Berg-Kirkpatrick et al. (2012), Sec. 2: the draws recentred on the null (δ_b − δ), two-sided
    extreme = int(np.sum(np.abs(samples - observed) >= abs(observed) - 1e-12))
    return {"view": "examples", "test": f"paired bootstrap over units, metric recomputed per draw ({draws} draws)",
            "n": n, "diff": observed, "ci": [float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))],
            "p": (extreme + 1) / (draws + 1)}


def randomization_test(metric: str, terms: Sequence[tuple], draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> dict:
    """Paired randomization test over units (this module's docstring) of a two-system contrast ``terms`` =
    [(c, A's seed matrices), (−c, B's seed matrices)], seed k of A paired with seed k of B."""
    terms = [(coefficient, [np.asarray(m, dtype=float) for m in seeds]) for coefficient, seeds in terms]
    n = terms[0][1][0].shape[0]
    if len(terms) != 2 or terms[0][0] != -terms[1][0] or len(terms[0][1]) != len(terms[1][1]):
        return {"view": "examples", "n": n, "unavailable": f"{n} units: under {MIN_UNITS} the view is a randomization "
                                                          "test, which needs a contrast of two systems"}
    (coefficient, a_seeds), (_, b_seeds) = terms
    if any(m.shape != a_seeds[0].shape for m in a_seeds + b_seeds):
        raise ValueError("randomization_test: every system's counts must cover the same units")
    exact = n <= EXACT_UNITS
    if exact:  # row k swaps the units whose bit is set in k (row 0: none, the observed contrast)
        swaps = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(float)
    else:
        swaps = np.random.default_rng(seed).integers(0, 2, size=(draws, n)).astype(float)
    statistic = 0.0
    for a, b in zip(a_seeds, b_seeds):
        moved = swaps @ (b - a)  # what each swap moves from B's sums to A's
        statistic = statistic + (metric_value(metric, a.sum(0) + moved) - metric_value(metric, b.sum(0) - moved))
    statistic = coefficient * statistic / len(a_seeds)
    observed = float(coefficient * np.mean([metric_value(metric, a.sum(0)) - metric_value(metric, b.sum(0))
                                            for a, b in zip(a_seeds, b_seeds)]))
    extreme = int(np.sum(np.abs(statistic) >= abs(observed) - 1e-9))
    how = f"exact, all {2 ** n:,} swaps" if exact else f"{draws} sampled swaps"
    return {"view": "examples", "test": f"paired randomization test over units, metric recomputed per swap ({how})",
            "n": n, "diff": observed, "ci": None,
            "p": extreme / 2 ** n if exact else (extreme + 1) / (draws + 1)}


def verdict(direction: int, views: List[dict], required: Sequence[str], still_improving: Sequence[str] = (),
            kind: str = "better", margin: float = EQUIVALENCE_MARGIN) -> dict:
    """The rule of this module's docstring. ``direction``: +1 when the paper has the contrast above 0 (for kind
    "equivalent": ignored). ``views``: seed_test / bootstrap_test outputs (or {"view", "unavailable"}); ``required``:
    the view names the claim needs; ``still_improving``: runs still improving when their epochs ran out."""
    by_name = {v["view"]: v for v in views}
    missing = [name for name in required if name not in by_name or by_name[name].get("p") is None]
    uncomputable = [name for name in missing if by_name.get(name, {}).get("not_computable")]
    reasons = [f"no view over {name}" for name in missing if name not in uncomputable]  # each view says why
    improving = [f"{len(still_improving)} run(s) still improving when their epochs ran out"] if still_improving else []
    if uncomputable and not reasons:  # the runs are there, but a required test has no value on them (a run still
        # improving would hold the claim too, and is named, but no p exists to hold)
        why = "; ".join(f"the view over {name} is {by_name[name]['unavailable']}" for name in uncomputable)
        return {"verdict": "not computable", "why": "; ".join([why] + improving)}
    if missing or improving:
        return {"verdict": "not decidable", "why": "; ".join(reasons + improving + [
            f"the view over {name} is not computable" for name in uncomputable])}
    used = [by_name[name] for name in required]
    if kind == "equivalent":
        if any(v.get("ci") is None for v in used):
            return {"verdict": "not decidable", "why": "a view without a 95 % interval (randomization test)"}
        if all(-margin < v["ci"][0] and v["ci"][1] < margin for v in used):
            return {"verdict": "supports", "why": f"every 95 % interval within ±{margin:g}"}
        if all(v["ci"][0] >= margin or v["ci"][1] <= -margin for v in used):
            return {"verdict": "contradicts", "why": f"every 95 % interval outside ±{margin:g}"}
        return {"verdict": "not decidable", "why": f"an interval overlaps the ±{margin:g} margin's edge"}
    signs = {int(np.sign(v["diff"])) for v in used}
    significant = all(v["p"] < ALPHA for v in used)
    if significant and signs == {direction}:
        return {"verdict": "supports", "why": f"the paper's direction, p < {ALPHA:g} on " + " and ".join(required)}
    if significant and signs == {-direction}:
        return {"verdict": "contradicts", "why": f"the opposite direction, p < {ALPHA:g} on " + " and ".join(required)}
    weak = [f"{v['view']} p = {v['p']:.3g}" for v in used if v["p"] >= ALPHA]
    return {"verdict": "not decidable", "why": ("; ".join(weak) + f" (≥ {ALPHA:g})") if weak
            else "the views disagree in direction"}


def holm(ps: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm (1979) step-down adjusted p-values of one family, in the input order (None stays None and is not
    counted): the i-th smallest of m p's becomes max over j ≤ i of (m − j + 1) · p_(j), capped at 1. Rejecting where
    the adjusted p < ALPHA keeps the family-wise error rate at ALPHA under any dependence."""
    known = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    out: List[Optional[float]] = [None] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (len(known) - rank) * p))
        out[i] = running
    return out


def benjamini_hochberg(ps: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Benjamini–Hochberg (1995) adjusted p-values (q-values) in the input order (None stays None): the i-th smallest
    of m p's becomes min over j ≥ i of m · p_(j) / j, capped at 1. Controls the expected share of false discoveries."""
    known = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    out: List[Optional[float]] = [None] * len(ps)
    running = 1.0
    for rank in range(len(known) - 1, -1, -1):
        p, i = known[rank]
        running = min(running, len(known) * p / (rank + 1))
        out[i] = running
    return out


MAX_SEEDS_NEEDED = 50  # seeds_needed: beyond this the answer is "no practical number of seeds"
POWER = 0.8


def seeds_needed(values: Sequence[float], direction: int = 1, alpha: float = ALPHA, power: float = POWER
                 ) -> Tuple[Optional[int], str]:
    """How many seeds the paired t-test over seeds would need to reach p < alpha (two-sided) with the given power, if
    the per-seed differences had the observed mean and standard deviation: the smallest n with
    P(|T| > t_{1-alpha/2, n-1}) ≥ power, T noncentral t with n − 1 degrees of freedom and noncentrality
    √n · mean / std (the standard paired-t power calculation, e.g. Cohen 1988 ch. 2). (n or None, why)."""
    from scipy import stats as scipy_stats

    if len(values) < 2:
        return None, "one seed: no spread to plan from"
    mean, std = statistics.fmean(values), statistics.stdev(values)
    if mean == 0 or int(np.sign(mean)) != direction:
        return None, "no number of seeds: the difference is not in the paper's direction"
    if std == 0:
        return len(values), "no spread between seeds"
    effect = abs(mean) / std
    for n in range(2, MAX_SEEDS_NEEDED + 1):
        critical = scipy_stats.t.ppf(1 - alpha / 2, n - 1)
        reach = scipy_stats.nct.sf(critical, n - 1, effect * math.sqrt(n)) + \
            scipy_stats.nct.cdf(-critical, n - 1, effect * math.sqrt(n))
        if reach >= power:
            return n, (f"{n} seeds for {power:.0%} power at p < {alpha:.2g} (mean {mean:+.2f}, std {std:.2f} over "
                       f"{len(values)} seeds)")
    return None, (f"no number of seeds up to {MAX_SEEDS_NEEDED}: the difference ({mean:+.2f}) is within the noise "
                  f"(std {std:.2f} over {len(values)} seeds)")


def seeds_needed_range(values: Sequence[float], direction: int = 1, alpha: float = ALPHA, power: float = POWER
                       ) -> Tuple[Optional[int], Optional[int], Optional[str]]:
    """The seeds needed (``seeds_needed``) at the two ends of the 95 % interval of the per-seed differences' std, at
    their observed mean: std·√((n−1)/χ²_{0.975, n−1}) .. std·√((n−1)/χ²_{0.025, n−1}) (the chi-square interval of a
    normal sample's variance) read through the paired-t power of ``seeds_needed``; 3 seeds' std is known only to
    within a factor of 12 (0.52-6.3 x the observed). (fewest, most or None beyond MAX_SEEDS_NEEDED,
    text "4–85" / "4–more than 50"); (None, None, None) where the point estimate has no number."""
    from scipy import stats as scipy_stats

    point, _ = seeds_needed(values, direction, alpha, power)
    if point is None or len(values) < 2 or statistics.stdev(values) == 0:
        return None, None, None
    mean, std, df = statistics.fmean(values), statistics.stdev(values), len(values) - 1
    ends = []
    for quantile in (1 - ALPHA / 2, ALPHA / 2):  # the larger chi-square quantile gives the smaller std
        spread = std * math.sqrt(df / scipy_stats.chi2.ppf(quantile, df))
        ends.append(seeds_needed([mean - spread, mean, mean + spread], direction, alpha, power)[0])
    low, high = ends
    low = min(low, point) if low is not None else point
    text = f"{low}–{high}" if high is not None else f"{low}–more than {MAX_SEEDS_NEEDED}"
    return low, high, text
