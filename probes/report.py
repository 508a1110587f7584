"""Markdown bodies of Tables 4-6 from a probe's result (the JSON that ``python -m probes`` writes) beside the paper's
values (``results/paper_numbers.json``, keys table4/table5/table6). The runner adds the title and provenance."""
from typing import List, Optional

# our row (layer name or baseline) -> the paper's row label
PAPER_ROW = {"first LSTM layer": "biLM, first layer", "second LSTM layer": "biLM, second layer",
             "WordNet first sense": "WordNet 1st sense baseline", "token layer": None}


def _f(value: Optional[float], decimals: int = 1) -> str:
    return "—" if value is None else f"{value:.{decimals}f}"


def _table(header: List[str], rows: List[list]) -> List[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] +
            ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _claim(what: str, sweep: str, result: dict, paper: dict, better: str, worse: str, judge=None) -> str:
    """The paper's layer ordering: with ``judge`` (the runner's: runner/analysis/claims.py probe_line, the test behind
    it and the verdict) or, standalone, the two numbers only — never "holds" on a difference alone. The probes do not
    import the runner: the runner judges their claims from their result files, as it does the task runs'."""
    if judge is not None:
        return judge(what, sweep, result, paper, better, worse)
    names = result.get("layer_names", [])
    return (f"- {what}: see the runner's claims.md for the test and the verdict "
            f"({better} vs {worse}; this biLM's layers: {', '.join(names)}).")


def table5(result: dict, paper: dict, judge=None) -> List[str]:
    from probes.wsd import PAPER_SET_NAME

    sets = result["sets"]
    main = PAPER_SET_NAME if PAPER_SET_NAME in sets else next(iter(sets))
    others = [s for s in sets if s != main]
    header = ["representation", f"F1 {main} (ours)", "F1 (paper)"] + [f"F1 {s} (ours)" for s in others]
    rows_paper = paper.get("rows", {})
    names = result["layer_names"]
    rows = []
    for label, pick in [("WordNet first sense", lambda s: s["first_sense"])] + \
            [(name, lambda s, j=j: s["layers"][j]) for j, name in enumerate(names)]:
        paper_label = PAPER_ROW.get(label)
        rows.append([label, _f(pick(sets[main])["F1"]), _f(rows_paper.get(paper_label)) if paper_label else "—"] +
                    [_f(pick(sets[s])["F1"]) for s in others])
    used = {v for v in PAPER_ROW.values() if v}
    rows += [[f"{label} (paper only)", "—", _f(value)] + ["—"] * len(others)
             for label, value in rows_paper.items() if label not in used]
    counts = result.get("counts", {})
    fallback = ", ".join(f"{name}: {c['fallback']} of {c['instances']}" for name, c in counts.items())
    return _table(header, rows) + [
        "", _claim("Paper: the second layer beats the first for WSD (69.0 vs 67.4)", "table5", result, paper,
                   "second LSTM layer", "first LSTM layer", judge),
        f"- Scored as the framework's Scorer.java (P = correct / answered, R = correct / instances, F1). "
        f"{main}: {sets[main]['first_sense']['instances']} instances. "
        f"The paper's column is {paper.get('set', 'its test sets')}.",
        f"- 1-NN over sense centroids from {result['train']['file']} ({result['train']['instances']} instances, "
        f"{result['train']['senses']} senses, {result['train']['lemma_pos']} lemma/POS pairs); lemmas that SemCor "
        f"does not have fall back to WordNet's first sense ({fallback}).",
        f"- Wall time {result['timing_s']['total']:.0f} s "
        f"(SemCor centroids {result['timing_s']['semcor_centroids']:.0f} s)."]


def table6(result: dict, paper: dict, judge=None) -> List[str]:
    header = ["representation", "dev accuracy (ours)", "test accuracy (ours)", "test accuracy (paper)"]
    rows_paper = paper.get("rows", {})
    base = result["baseline"]
    rows = [[f"baseline: {base['name']}", _f(base["dev_accuracy"]), _f(base["test_accuracy"]), "—"]]
    for name, layer in zip(result["layer_names"], result["layers"]):
        paper_label = PAPER_ROW.get(name)
        rows.append([f"{name} (linear)", _f(layer["dev_accuracy"]), _f(layer["test_accuracy"]),
                     _f(rows_paper.get(paper_label)) if paper_label else "—"])
    used = {v for v in PAPER_ROW.values() if v}
    rows += [[f"{label} (paper only)", "—", "—", _f(value)] for label, value in rows_paper.items()
             if label not in used]
    data = result["data"]
    return _table(header, rows) + [
        "", _claim("Paper: the first layer beats the second for POS (97.3 vs 96.8)", "table6", result, paper,
                   "first LSTM layer", "second LSTM layer", judge),
        f"- Softmax regression on each frozen layer (L-BFGS, L2 {result['l2']}, iterations picked on dev: "
        + ", ".join(f"{n} {layer['iterations']}" for n, layer in zip(result["layer_names"], result["layers"])) + "); "
        f"train {data['train']['tokens']} / dev {data['dev']['tokens']} / test {data['test']['tokens']} tokens, "
        f"{result['tags']} tags. The paper's column is {paper.get('set', 'the full WSJ')}.",
        f"- Wall time {result['timing_s']['total']:.0f} s (biLM layers {result['timing_s']['layers']:.0f} s)."]


def table4(result: dict, paper: dict, judge=None) -> List[str]:
    word = result["word"]
    rows = [[f"{source} (ours)", ", ".join(f"{w} ({s:.2f})" for w, s in neighbours)]
            for source, neighbours in result["context_free"].items()]
    rows += [[f"{source} (paper)", ", ".join(neighbours)] for source, neighbours in
             paper.get("context_free", {}).items()]
    lines = [f"Context-free nearest neighbours of '{word}' (cosine; ours over {result['vocabulary']} corpus words "
             f"seen at least {result['min_count']} times):", ""] + _table(["source", "nearest neighbours"], rows)
    paper_nearest = {p["source"]: p["nearest"] for p in paper.get("contextual", [])}
    rows = []
    for entry in result["contextual"]:
        for n in entry["nearest"]:
            rows.append([entry["source"], n["sentence"], f"{n['cosine']:.3f}", " ".join(n["sense_keys"]) or "—",
                         paper_nearest.get(entry["source"], "—")])
    lines += ["", f"Nearest SemCor sentences by the {result['layer']} biLM layer's vector of '{word}' "
                  f"({result['semcor_occurrences']} occurrences in {result['semcor']}):", ""]
    lines += _table(["source sentence", "nearest SemCor sentence (ours)", "cosine", "its SemCor sense",
                     "nearest (paper)"], rows)
    return lines + ["", f"- Wall time {result['timing_s']['total']:.0f} s."]


TABLES = {"neighbours": table4, "wsd": table5, "pos": table6}


def markdown_body(result: dict, paper: dict, judge=None) -> List[str]:
    """``judge``: the runner's verdict line for a layer claim (see _claim); the table functions that state none
    ignore it."""
    return TABLES[result["probe"]](result, paper, judge)
