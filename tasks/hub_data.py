"""Task data from the Hugging Face hub (through `datasets`) when a user is online, as an alternative to local files.

A data path ``hf:NAME:SPLIT`` or ``hf:NAME:CONFIG:SPLIT`` (e.g. ``hf:conll2003:train``, ``hf:snli:validation``,
``hf:squad:validation``, ``hf:sst:ptb:train``; the SRL/coref readers use the same ``hf:`` form; ``hf://NAME...``
is accepted too) makes a task reader load that split with
``datasets.load_dataset`` and convert its records to the task's file format, so they go through the same checks.
Offline (as on the project's machines) such a path is a one-line error naming it. The runner does not read hub
paths (its preflight, activation caches and checksums need files): use local files there.
"""
from typing import List, Optional, Tuple

HUB_PREFIX = "hf:"


def is_hub_path(path) -> bool:
    return str(path).startswith(HUB_PREFIX)


def parse_hub_path(path: str) -> Tuple[str, Optional[str], str]:
    from tasks.line_errors import InputError

    parts = str(path)[len(HUB_PREFIX):].lstrip("/").split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(f"{path}: expected hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT")
    return parts[0], (parts[1] if len(parts) == 3 else None), parts[-1]


def load_hub_split(path: str):
    """The `datasets.Dataset` that ``path`` names (downloads unless cached). Offline, or for a name or split the hub
    does not have, one line (the task readers' InputError) instead of `datasets`' 28-line traceback."""
    import datasets

    from tasks.line_errors import InputError

    name, config, split = parse_hub_path(path)
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # ConnectionError offline, FileNotFoundError / ValueError for an unknown name or split
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(f"{path}: expected a dataset split of the Hugging Face hub, found none ({reason}); "
                         f"offline, use the task's local files (tasks/<task>/README.md, 'Data')") from None


def label_names(dataset, column: str) -> Optional[List[str]]:
    """The names of a ClassLabel column (or of a sequence of ClassLabels), else None."""
    feature = dataset.features[column]
    feature = getattr(feature, "feature", feature)
    return list(feature.names) if hasattr(feature, "names") else None
