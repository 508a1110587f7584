"""The run-directory records, the ground floor every job reads and writes: JSON written atomically, a run's
result loaded and checked for completeness, paths made portable, the machine and the code a record was made with."""
import json
import math
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Optional, Sequence, Tuple

from elmo_module.device import cpu_name
from runner.paths import REPO

# What a run reads, {path: sha256} (runner/execution/freshness.py), written by the runner before the run starts and
# kept in its attempts and its result.json as "reads".
READS_FILE = "reads.json"


def differs_from_head(tracked: Sequence[str], untracked: Sequence[str], repo: Path) -> bool:
    """Whether a tracked file under the pathspecs ``tracked`` differs from HEAD, or git does not know yet (and does
    not ignore) a file under ``untracked``. Raises OSError or CalledProcessError where git cannot tell."""
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *tracked], cwd=repo,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0
    new = subprocess.check_output(["git", "ls-files", "--others", "--exclude-standard", "--", *untracked], cwd=repo,
                                  text=True, stderr=subprocess.DEVNULL).strip()
    return changed or bool(new)


# an absolute path up to one of a checkout's own folders: /work/wt/x/runs/p/... -> runs/p/...
_OTHER_CHECKOUT = re.compile(r"(?<![\w.~-])/(?:[^\s\"'/]+/)+?(?=(?:runs|artifacts|\.venv|cache|tasks|elmo_module)/)")


def repo_relative(data):
    """``data`` (a JSON value) with this checkout's absolute path taken out of every string: what is committed under
    results/ names files relative to the repository, never the machine that made them."""
    prefix = f"{REPO}{os.sep}"
    if isinstance(data, str):  # this checkout's path, then any other checkout's (records made elsewhere)
        return _OTHER_CHECKOUT.sub("", data.replace(prefix, ""))
    if isinstance(data, dict):
        return {repo_relative(k): repo_relative(v) for k, v in data.items()}
    if isinstance(data, list):
        return [repo_relative(v) for v in data]
    return data


def write_json(path: Path, data) -> None:
    """Write-then-rename; on a failed write (a full disk) the partial file is removed, never left to look whole."""
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(finite(data), indent=2, allow_nan=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def finite(data):
    """NaN and ±Infinity as null (JSON has neither; Python's json would write them, and load_result rightly refuses
    them, so a record holding one would stay unreadable: allennlp's metrics.json has one when a loss diverged)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def keep_portable(source: Path, target: Path) -> None:
    """A stage's JSON record copied into a profile's archive under results/ (committed): no absolute path of this
    checkout in it (repo_relative), written with write-then-rename, and not rewritten when unchanged."""
    record = repo_relative(json.loads(Path(source).read_text()))
    try:
        if json.loads(Path(target).read_text()) == record:
            return
    except (OSError, ValueError):
        pass  # none yet, or a broken copy: written anew
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(target), record)


def write_atomic(path: Path, data) -> None:
    """Text or bytes written to a temporary sibling, then renamed over `path` (the tables, reports and claims)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary left behind
        tmp.unlink(missing_ok=True)
        raise


# a JSON string whole, or a bare NaN / Infinity / -Infinity outside strings: where json.loads met a constant
_JSON_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _no_constant(name: str):
    raise ValueError(name)


def load_result(path: Path) -> Tuple[Optional[dict], Optional[str]]:
    """(result, None) for a complete result.json; (None, what is wrong, in one line naming the file) for an empty or
    truncated one (a disk that filled up, a copy that was cut short), one holding NaN or Infinity (Python's json reads
    them; no metric is either) or bytes that are not UTF-8: such a run counts as unfinished; (None, None) when there
    is none."""
    expected = f"{path}: expected a complete JSON result, found"
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, f"{path}: expected a result file, found a directory"
    except OSError as e:
        return None, f"{expected} a file that cannot be read ({e.strerror or e})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        return None, f"{expected} byte 0x{data[e.start]:02x} at line {line} (not UTF-8)"
    try:
        result = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        found = "an empty file" if not text.strip() else f"invalid JSON at line {e.lineno} ({e.msg})"
        return None, f"{expected} {found}"
    except ValueError as e:  # NaN, Infinity or -Infinity: the first of them outside a string
        at = next(m.start(1) for m in _JSON_CONSTANT.finditer(text) if m.group(1))
        line = text.count("\n", 0, at) + 1
        return None, f"{expected} {e} at line {line} (no metric is {e})"
    if not isinstance(result, dict):
        return None, f"{path}: expected a JSON object, found {type(result).__name__}"
    # a task run's result (not a failed.json, not a probe's result, which names its probe and sweep) has its metric:
    # 'dev' and
    # 'test' numbers or null, one of them a number (runner/analysis/cells.py read_run reads them)
    numbers = [isinstance(result.get(k), (int, float)) and not isinstance(result.get(k), bool) for k in ("dev", "test")]
    if "returncode" not in result and "sweep" not in result and "probe" not in result and (
            not any(numbers) or any(not n and result.get(k) is not None for n, k in zip(numbers, ("dev", "test")))):
        return None, (f"{path}: expected a run's result with 'dev' and 'test' numbers (or one null), found "
                      f"{result.get('dev')!r} and {result.get('test')!r}")
    return result, None


def hardware() -> str:
    import torch


    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    # the vector unit torch dispatches to (AVX512, AVX2, ...): "AMD EPYC" named both the VM's AVX-512 and its AVX2-only
    # machines, whose kernels round differently (a run resumed across them is not the run never stopped)
    vector = torch.backends.cpu.get_cpu_capability()
    return f"{os.cpu_count()} CPU cores ({cpu_name()}, {vector}), {gpu}, torch {torch.__version__}"


CODE_DIRS = ("elmo_module", "tasks", "runner", "jsonnet_configs", "probes", "tools")


def git_commit(repo: Path = REPO) -> str:
    """HEAD's short hash, with "+changes" when the code differs from it: a tracked file changed (results/ excluded:
    the runner itself writes there while it works) or a file git does not know yet (and does not ignore) in a code
    folder, e.g. a new module under tasks/ that a config imports (once missed: it was not flagged)."""
    try:
        commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=repo, text=True,
                                         stderr=subprocess.DEVNULL).strip()
        return commit + ("+changes" if differs_from_head([".", ":!results"], CODE_DIRS, repo) else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def made_record(commit: str) -> dict:
    """How a run was made, kept in its result.json (and so in a multi-session profile's archive): the code it
    started with, the date it finished, the machine."""
    return {"git_commit": commit, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "hardware": hardware()}
