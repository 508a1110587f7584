"""Gold counts of coreference data, the figures of tasks/coref/README.md (Metric): documents, clusters, mentions,
singleton clusters, and mentions wider than the configs' ``max_span_width`` (10 words, Lee et al. 2017), which no model
with that setting can propose.

    python -m tasks.coref.gold_counts ../shared/data/litbank_coref/train ../shared/data/litbank_coref/dev ...
"""
import sys
from collections import Counter
from typing import Dict

MAX_SPAN_WIDTH = 10  # jsonnet_configs/coref.jsonnet


def gold_counts(clusters_of_documents, max_span_width: int = MAX_SPAN_WIDTH) -> Dict[str, int]:
    """The counts of the module's docstring; the wide mentions in every cluster (``wide``) and in clusters of 2+
    mentions (``wide_in_2plus``, the gold of ``coref_f1``, which drops singletons)."""
    counts = Counter()
    for clusters in clusters_of_documents:
        counts["documents"] += 1
        for cluster in clusters:
            wide = sum(end - start + 1 > max_span_width for start, end in cluster)
            counts.update(clusters=1, mentions=len(cluster), singletons=len(cluster) == 1, wide=wide,
                          wide_in_2plus=wide if len(cluster) > 1 else 0)
    return {name: counts[name] for name in ("documents", "clusters", "mentions", "singletons", "wide", "wide_in_2plus")}


def main(argv=None) -> int:
    import tasks  # noqa: F401  (one-line errors for bad input; registers the reader)
    from tasks.coref.reader import CheckedCorefReader

    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m tasks.coref.gold_counts PATH [PATH ...]  (CoNLL-2012 files or directory trees)",
              file=sys.stderr)
        return 2
    reader = CheckedCorefReader(max_span_width=MAX_SPAN_WIDTH)
    for path in paths:
        counts = gold_counts(instance["metadata"]["clusters"] for instance in reader.read(path))
        print(path, " ".join(f"{name}={value}" for name, value in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
