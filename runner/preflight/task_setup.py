"""What the preflight (runner/preflight/checks.py) and its GPU estimate (runner/preflight/gpu_estimate.py) both read of
a profile's runs before any training (the task's config itself: runner/task_configs.py): a readable sample of a data
file, the weights the profile's biLM stages start from, the GPU the runs ask for, and an error's first line.
Below both, so that neither imports the other for it."""
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from runner.paths import expand

PREFIX_BYTES = 256 * 1024  # a line-based data file is checked (and its size estimated) on this prefix
JSON_ENTRIES = 10  # a JSON data file (SQuAD) on its first entries


@dataclass
class Problem:
    file: str
    expected: str
    found: str
    fix: str

    def __str__(self) -> str:
        if not self.expected:  # ``found`` is a reader's own "...: expected ..., found ..." line
            return f"{self.file}: {self.found}. {self.fix}"
        return f"{self.file}: expected {self.expected}; found {self.found}. {self.fix}"


def first_line(error: BaseException) -> str:
    """An error's first non-empty line (a reader's or allennlp's message, without the lines after it)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def sample_file(path: Path, directory: Path) -> Tuple[Path, float]:
    """(a readable sample of a data file, whole size / sample size): the file itself when small, else its first
    PREFIX_BYTES cut at a blank line (or a line end), or a JSON file's first JSON_ENTRIES entries of its longest
    top-level list (SQuAD's 'data')."""
    size = path.stat().st_size
    if path.suffix == ".json":
        if size <= 4 * PREFIX_BYTES:
            return path, 1.0
        try:
            document = json.loads(path.read_bytes().decode("utf-8-sig"))
            key = max((k for k, v in document.items() if isinstance(v, list)), key=lambda k: len(document[k]))
        except (ValueError, AttributeError):  # not a JSON object with a list (a download cut short): the reader
            return path, 1.0  # reads the whole file and says what is wrong with it, naming the file
        entries = document[key]
        sample = directory / path.name
        sample.write_text(json.dumps({**document, key: entries[:JSON_ENTRIES]}), encoding="utf-8")
        return sample, len(entries) / min(len(entries), JSON_ENTRIES)
    if size <= PREFIX_BYTES:
        return path, 1.0
    with open(path, "rb") as f:
        head = f.read(PREFIX_BYTES)
    # the last blank line (a sentence boundary), else the last line end; lines end at \n, \r\n or \r (a CR-only
    # file was cut to nothing)
    ends = [m.end() for m in re.finditer(rb"(?:\r\n|\r|\n){2}", head)] or \
        [m.end() for m in re.finditer(rb"\r\n|\r|\n", head)] or [len(head)]
    head = head[:ends[-1]]
    sample = directory / path.name
    sample.write_bytes(head)
    return sample, size / len(head)


def bilm_sources(finetune: dict) -> List[Tuple[str, str]]:
    """(options, weights) that the profile's biLM stages start from (``finetune``: its bilm.finetune, whose "from"
    names the official weights)."""
    source = finetune.get("from")
    if isinstance(source, dict):
        return [(expand(source["options"]), expand(source["weights"]))]
    return []


def gpu_index(device: str, runs) -> Optional[int]:
    """The GPU the runs ask for: the profile's "device" (``device``) "cuda" or a CUDA_DEVICE knob >= 0; None for CPU,
    and for "device": "cpu" whatever the knobs say (``--device cpu`` sets it: the runs then get CUDA_DEVICE=-1)."""
    if device == "cpu":
        return None
    devices = sorted({int(r.knob_dict.get("CUDA_DEVICE") or -1) for r in runs} - {-1})
    if devices:
        return devices[0]
    return 0 if device == "cuda" else None
